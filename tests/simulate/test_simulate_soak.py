"""What a soak needs of the simulation (nodes that go and come back, owners that delete the pods
that waited too long, no history kept) and the soak itself, short: serve's own cycle for a few
simulated hours of churn with every table it keeps, and the Python heap, flat."""

from __future__ import annotations

import pytest

from kubeplace.kube.errors import InputError
from kubeplace.simulate.engine import Churn, simulate
from kubeplace.simulate.names import KUBEPLACE
from kubeplace.simulate.schedulers import KubeplaceCycle, SimScheduler
from kubeplace.simulate.soak import SoakSpec, flat, mean_thirds, run_soak, thirds
from kubeplace.simulate.world import NodeEvent
from tests.simulate.sim_builders import SETUP, cluster, node, trace


def test_a_node_that_goes_away_takes_its_pods_and_they_run_again_elsewhere() -> None:
    seen: list[tuple[float, int, float]] = []

    def observe(now: float, sim: SimScheduler) -> None:
        assert isinstance(sim, KubeplaceCycle)
        world = sim.client.world
        seen.append((now, len(world.store.items("nodes")), world.totals.capacity.cpu))

    result = simulate(cluster(node("n0", cpu="2"), node("n1", cpu="2")),
                      trace({"arrivalSeconds": 0, "durationSeconds": 500, "template": "two", "name": "a"},
                            {"arrivalSeconds": 0, "durationSeconds": 500, "template": "two", "name": "b"}),
                      KUBEPLACE, SETUP, churn=Churn((NodeEvent(100, "n0", False), NodeEvent(300, "n0", True)),
                                                    observe=observe))
    at = {now: (nodes, cpu) for now, nodes, cpu in seen}
    assert at[0.0] == (2, 4000) and at[100.0] == (1, 2000) and at[300.0] == (2, 4000)
    records = {r.key: r for r in result.pods}
    moved = [r for r in records.values() if r.incarnation == 1]
    assert len(moved) == 1 and moved[0].preempted == 0  # made again by its controller, not preempted
    assert moved[0].end is not None and moved[0].end > 300  # ran once n0 was back
    assert result.summary.preemptions == 0


def test_an_owner_deletes_a_pod_that_waited_its_patience_and_nothing_is_kept_without_history() -> None:
    sims: list[KubeplaceCycle] = []
    result = simulate(cluster(node("n0", cpu="2")),
                      trace({"arrivalSeconds": 0, "template": "three", "name": "huge"},
                            {"arrivalSeconds": 0, "durationSeconds": 50, "template": "one", "name": "fits"}),
                      KUBEPLACE, SETUP, until=1_000,
                      churn=Churn(patience={"default/huge": 600}, history=False,
                                  observe=lambda now, sim: sims.append(sim) if not sims else None))
    world = sims[0].client.world
    assert world.gave_up == 1 and world.bindings == 1 and world.bound == []
    assert result.pods == () and world.totals.pending_pods == 0  # both gone, and forgotten
    assert sims[0].scheduler.tables()["queue_attempts"] == 0  # serve forgot the deleted pod too


def test_flat_compares_the_last_third_with_the_middle_one() -> None:
    assert thirds([1, 2, 3, 4, 5, 6]) == (2, 4, 6) and mean_thirds([1, 2, 3, 4, 5, 6]) == (1.5, 3.5, 5.5)
    assert flat([100] * 8 + [109] * 4, slack=0) and not flat([100] * 8 + [111] * 4, slack=0)
    assert flat([100] * 30 + [300] + [100] * 9) and not thirds([100] * 30 + [300] + [100] * 9)[2] <= 126  # one burst
    assert not flat(list(range(0, 1200, 100)), slack=16)  # a steady climb


def test_serve_soaks_for_hours_of_churn_with_every_table_flat() -> None:
    """A few simulated hours of the soak (``kubeplace bench soak`` runs days): one pod never fits
    (over 1,024 attempts: the backoff's ``2.0 ** attempts`` overflowed there), gangs time out,
    nodes go and come back, high-priority pods preempt. Every table serve keeps and the Python
    heap are flat: the last third's mean at most 10% (and 16 entries) above the middle third's
    (pods that cannot start are deleted after half an hour, so the first hour fills up the tables
    and the next ones are steady)."""
    soak = run_soak(SoakSpec(days=4 / 24, every=600, patience=1_800))
    assert len(soak.samples) >= 24
    counts = soak.counts
    assert counts["preemptions"] > 0 and counts["evictions"] > 0 and counts["gave_up"] > 0
    assert counts["gang_timeouts"] > 0 and counts["bindings"] > 100
    assert soak.growing() == [], {name: (thirds(v), mean_thirds(v)) for name, v in soak.series().items()}
    assert soak.samples[-1].tables["queue_attempts"] >= 1  # the pod that never fits, still retried


def test_a_node_event_naming_no_node_of_the_cluster_is_refused_in_one_line() -> None:
    with pytest.raises(InputError, match="node 'n9' is not in the cluster"):
        simulate(cluster(node("n0")), trace(), KUBEPLACE, SETUP, churn=Churn((NodeEvent(1, "n9", False),)))
