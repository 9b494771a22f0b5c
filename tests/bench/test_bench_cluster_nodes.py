"""When the cluster bench (and the replay) may start placing pods on the kwok nodes it created."""

from __future__ import annotations

from typing import Any

from kubeplace_bench.controlplane import fake_node_manifest, node_settled


def with_status(ready: str, taints: list[dict[str, str]]) -> dict[str, Any]:
    node = fake_node_manifest("n1")
    node["status"]["conditions"] = [{"type": "Ready", "status": ready}]
    node["spec"]["taints"] = [*node["spec"]["taints"], *taints]
    return node


def test_a_node_is_settled_once_ready_and_its_startup_taints_are_gone() -> None:
    """kwok reports Ready at once; the node lifecycle controller lifts the not-ready taint a moment
    later. A scheduler started in between finds the node unusable (it stranded a group in the
    lws-racks scenario on the first copy of a run)."""
    not_ready = {"key": "node.kubernetes.io/not-ready", "effect": "NoSchedule"}
    unreachable = {"key": "node.kubernetes.io/unreachable", "effect": "NoExecute"}
    assert not node_settled(with_status("True", [not_ready]))
    assert not node_settled(with_status("True", [unreachable]))
    assert not node_settled(with_status("False", []))
    assert node_settled(with_status("True", []))  # its own taints (kwok's) are fine
