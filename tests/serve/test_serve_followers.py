"""serve and a JobSet leader whose followers do not exist yet: the leader is bound where its whole
job fits, the stand-ins holding its followers' room are never bound."""

from __future__ import annotations

from kubeplace.models.config import Configuration, Profile, SolverSettings
from kubeplace.serve.informer import Store
from kubeplace.serve.loop import Scheduler
from kubeplace.serve.settings import ServeSettings
from tests.models.test_model_followers import job, jobset_leader, racks
from tests.serve.fakes import Clock, FakeCluster
from tests.serve.test_serve_loop import bound, next_cycle


def test_serve_binds_the_leader_where_its_job_fits_and_never_a_stand_in() -> None:
    cluster, store = FakeCluster(), Store()
    manifests = [b.manifest() for b in racks(big="5")]
    store.replace("nodes", manifests)
    store.replace("pods", [jobset_leader("train").manifest()])
    store.replace("batch/v1/jobs", [job("train", 4)])
    s = Scheduler(cluster, store, Configuration(), Profile(), SolverSettings(time_limit=5, workers=1),
                  ServeSettings(batch_window=0, initial_backoff=1, max_backoff=10), clock=Clock())
    s.resync_queue()
    report = next_cycle(s)
    assert report.bound == ["default/train-0-abcde"]
    assert list(bound(cluster)) == ["train-0-abcde"] and bound(cluster)["train-0-abcde"].startswith("r4-")
