"""serve and the cluster's default topology spread constraints: the Services and controllers that
give a pod its default selector are watched, so a served pod gets the profile's defaults as
`plan` gives them (listed DoNotSchedule defaults are hard)."""

from __future__ import annotations

from kubeplace.models.config import Configuration, Profile, SolverSettings
from kubeplace.models.framework import Objective
from kubeplace.models.plugins.topology_spread import DefaultConstraint, PodTopologySpreadArgs
from kubeplace.serve.informer import RESOURCES, Store
from kubeplace.serve.loop import Scheduler
from kubeplace.serve.settings import ServeSettings
from tests.builders import node, pod
from tests.models.test_model_preferences import replica_set
from tests.serve.fakes import Clock, FakeCluster
from tests.serve.test_serve_loop import bound, next_cycle

HOST = "kubernetes.io/hostname"


def test_the_controllers_behind_the_default_selector_are_watched() -> None:
    watched = {w.resource for w in RESOURCES}
    assert {"services", "replicationcontrollers", "apps/v1/replicasets", "apps/v1/statefulsets"} <= watched


def test_serve_keeps_a_replica_set_apart_under_listed_hard_defaults() -> None:
    hard = PodTopologySpreadArgs(defaultConstraints=(DefaultConstraint(1, HOST, "DoNotSchedule"),),
                                 defaultingType="List")
    profile = Profile(objective=Objective.BINPACK, plugin_args={"PodTopologySpread": hard})
    cluster, store = FakeCluster(), Store()
    store.replace("nodes", [node(name).cpu("8").memory("16Gi").manifest() for name in ("n0", "n1", "n2")])
    store.replace("pods", [pod(f"web-{i}").cpu("1").label("app", "web").owner("ReplicaSet", "web-1").manifest()
                           for i in range(3)])
    store.replace("apps/v1/replicasets", [replica_set("web-1", "web")])
    s = Scheduler(cluster, store, Configuration(), profile, SolverSettings(time_limit=5, workers=1),
                  ServeSettings(batch_window=0, initial_backoff=1, max_backoff=10), clock=Clock())
    s.resync_queue()
    next_cycle(s)
    assert sorted(bound(cluster).values()) == ["n0", "n1", "n2"]  # binpack alone would stack them
