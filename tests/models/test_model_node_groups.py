"""The aggregation reuses a filter's node groups from the last cycle only while they still hold.

A filter's node groups (nodes with equal ``node_key``) are kept from one cycle to the next and
reused when the nodes are the same and the filter's ``node_key_basis`` is equal. Each test here
makes the second cycle one where last cycle's groups would be wrong (a node's labels or taints
changed, or the pending pods read another label) and checks the answer is the fresh one."""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from kubeplace.kube.objects import Snapshot, Taint
from kubeplace.models.aggregate import aggregate
from kubeplace.models.config import Configuration, Profile, instantiate
from tests.builders import node, pod, snapshot_of
from tests.models.plugins.volume_plans import EBS, cluster
from tests.volume_builders import claim, csi_node, mounting, volume


def eligible(snapshot: Snapshot) -> list[list[bool]]:
    agg = aggregate(snapshot, instantiate(Configuration(), Profile(), snapshot))
    return np.asarray(agg.problem.eligible).tolist()


def cycle_one(selector: tuple[str, str]) -> Snapshot:
    """Three alike nodes in zones a, b, c (one group for a filter reading only ``disk``)."""
    nodes = [node(f"n{i}").cpu(4).memory("8Gi").label("zone", z) for i, z in enumerate("abc")]
    return snapshot_of(*nodes, pod("p").cpu(1).selector(*selector))


def test_a_node_label_change_between_cycles_regroups_the_nodes() -> None:
    first = cycle_one(("disk", "ssd"))
    assert eligible(first) == [[False, False, False]]
    n2 = first.nodes[2]
    second = replace(first, nodes=(*first.nodes[:2], replace(n2, labels={**n2.labels, "disk": "ssd"})))
    assert eligible(second) == [[False, False, True]]  # last cycle's single group would say none


def test_a_node_taint_change_between_cycles_regroups_the_nodes() -> None:
    first = cycle_one(("zone", "a"))
    assert eligible(first) == [[True, False, False]]
    taints = (Taint("dedicated", "gpu", "NoSchedule"),)
    second = replace(first, nodes=(replace(first.nodes[0], taints=taints), *first.nodes[1:]))
    assert eligible(second) == [[False, False, False]]


def test_the_same_nodes_read_by_another_label_are_regrouped() -> None:
    first = cycle_one(("disk", "ssd"))
    assert eligible(first) == [[False, False, False]]
    second = snapshot_of(pod("q").cpu(1).selector("zone", "b"))
    second = replace(second, nodes=first.nodes)  # the same node objects, a pending pod reading "zone"
    assert eligible(second) == [[False, True, False]]


def test_unchanged_nodes_reuse_last_cycles_groups() -> None:
    first = cycle_one(("disk", "ssd"))
    plugins = instantiate(Configuration(), Profile(), first)
    groups = [t.node_group for t in aggregate(first, plugins).filters]
    again = [t.node_group for t in aggregate(first, instantiate(Configuration(), Profile(), first)).filters]
    assert any(a is b for a, b in zip(groups, again, strict=True))
    assert all(np.array_equal(a, b) for a, b in zip(groups, again, strict=True))


def test_unchanged_nodes_reuse_every_filters_groups() -> None:
    """Every in-tree filter says what its node keys read (``node_key_basis``), so a cycle on the
    same nodes computes no node key again (the volume filters' included)."""
    first = cycle_one(("disk", "ssd"))
    groups = [t.node_group for t in aggregate(first, instantiate(Configuration(), Profile(), first)).filters]
    again = [t.node_group for t in aggregate(first, instantiate(Configuration(), Profile(), first)).filters]
    assert all(a is b for a, b in zip(groups, again, strict=True))


def test_a_volume_attached_between_cycles_regroups_the_nodes_of_a_limited_driver() -> None:
    """The same node objects, one more volume running on n2: its room under its CSINode's limit
    is gone."""
    pending = (claim("a", storage_class="gp3"), mounting(pod("p").cpu("1"), "a"))
    running = (volume("pv-run", storage_class="gp3", claim_ref=("default", "run"), csi=(EBS, "h-run")),
               claim("run", volume="pv-run", storage_class="gp3"))
    first = cluster(csi_node("n2", (EBS, 1)), *running, *pending)
    assert eligible(first)[0][1]
    second = cluster(csi_node("n2", (EBS, 1)), *running, mounting(pod("running").on("n2"), "run"), *pending)
    second = replace(second, nodes=first.nodes)
    assert not eligible(second)[0][1]


def test_the_node_groups_kept_are_those_of_the_filters_used_last() -> None:
    """A user plugin names itself (it may take another name every run): the groups kept are those
    of the last NODE_GROUPS_KEPT filters, not of every name ever seen (each holds a cycle's nodes)."""
    from dataclasses import dataclass

    from kubeplace.models import aggregate as agg

    @dataclass(frozen=True)
    class Named:
        name: str
        reason: str = "no"

        def pod_key(self, p: object) -> None:
            return None

        def node_key(self, n: object) -> str:
            return "same"

        def node_key_basis(self) -> int:
            return 0

        def filter(self, p: object, nodes: list[object]) -> np.ndarray:
            return np.ones(len(nodes), dtype=np.bool_)

    nodes = [node(f"n{i}").cpu(4).build() for i in range(3)]
    for i in range(3 * agg.NODE_GROUPS_KEPT):
        agg._node_groups(Named(f"run-{i}"), nodes)
    assert len(agg._LAST_NODE_GROUPS) <= agg.NODE_GROUPS_KEPT
    assert (Named, f"run-{3 * agg.NODE_GROUPS_KEPT - 1}") in agg._LAST_NODE_GROUPS
