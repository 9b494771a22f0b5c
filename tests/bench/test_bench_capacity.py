"""``kubeplace bench capacity``'s inputs and report, without a cluster: kubeplace reads the
catalogue and every workload as Karpenter does, every pod fits a node some NodePool may launch,
and the table shows both schedulers (or why kubeplace's side is missing)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from kubeplace.kube.capacity import candidate_nodes
from kubeplace.kube.files import load_catalogue, load_snapshot
from kubeplace_bench.capacity import (
    UNAVAILABLE,
    karpenter_version,
    provision_available,
    provision_figures,
    table,
    write_snapshot,
)
from kubeplace_bench.capacity_workloads import GPU, WORKLOADS, catalogue, prices


@pytest.fixture(scope="module")
def catalogue_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("catalogue") / "instance_types.json"
    path.write_text(json.dumps(catalogue()))
    return path


def test_the_catalogue_is_read_by_kubeplace_with_the_same_prices(catalogue_file: Path) -> None:
    types = load_catalogue([catalogue_file])
    price = prices(catalogue())
    assert len(types) == 19 and len(price) == 19 * 6
    assert {t.name for t in types if t.capacity.get(GPU)} == {f"g-{c}x-amd64-linux" for c in (8, 16, 32, 64)}
    for t in types:
        for offering in t.offerings:
            assert abs(offering.price / 1e9 - price[(t.name, offering.zone, offering.capacity_type)]) < 1e-6


@pytest.mark.parametrize("name", [n for n in WORKLOADS if n != "consolidation"])
def test_every_pod_of_a_workload_fits_a_node_its_node_pools_may_launch(name: str, catalogue_file: Path,
                                                                       tmp_path: Path) -> None:
    workload = WORKLOADS[name](0, 1.0)
    snapshot = load_snapshot([write_snapshot(tmp_path, workload, f"capacity-{name}")])
    assert len(snapshot.pending) == len(workload.pods) > 0
    assert sorted(p.name for p in snapshot.node_pools) == sorted(p["metadata"]["name"] for p in workload.node_pools)
    candidates = candidate_nodes(snapshot.node_pools, load_catalogue([catalogue_file]), snapshot.daemon_pods)
    for pod in snapshot.pending:
        assert any(all(c.node.allocatable.get(r, 0) >= amount for r, amount in pod.requests.items())
                   for c in candidates), pod.key


def test_the_spot_workload_weighs_its_spot_pool_first_and_the_gpu_pool_is_tainted() -> None:
    spot = {p["metadata"]["name"]: p["spec"] for p in WORKLOADS["spot"](0, 1.0).node_pools}
    assert spot["spot"]["weight"] > spot["on-demand"]["weight"]
    (gpu,) = WORKLOADS["gpu-gangs"](0, 1.0).node_pools
    assert gpu["spec"]["template"]["spec"]["taints"][0]["key"] == GPU


def test_a_checkout_without_plan_provision_is_reported_unavailable(tmp_path: Path) -> None:
    """An older kubeplace: its ``plan --help`` lists no --provision (a stand-in package that
    shadows the installed one on the checkout's path)."""
    cli = tmp_path / "kubeplace" / "cli"
    cli.mkdir(parents=True)
    (tmp_path / "kubeplace" / "__init__.py").write_text("")
    (cli / "__init__.py").write_text("")
    (cli / "main.py").write_text("print('Usage: kubeplace plan [OPTIONS] [SOURCE]...  --preempt')\n")
    assert not provision_available(tmp_path)
    assert provision_available(Path(__file__).resolve().parents[2])


PLAN: dict[str, Any] = {
    "summary": {"pods_placed": 3, "pods_unplaced": 1, "seconds": 0.8, "verified": True},
    "provision": [{"nodePool": "general", "instanceType": "c-4x-amd64-linux", "zone": "test-zone-a",
                   "capacityType": "on-demand", "pricePerHour": 0.17, "pods": ["a/x", "a/y", "a/z"]}],
    "provisionCostPerHour": 0.17, "provisionBound": 0.17, "provisionGap": 0.0}


def test_a_provisioning_plan_gives_placed_nodes_cost_bound_and_gap() -> None:
    assert provision_figures(PLAN) == {
        "pods": 4, "placed": 3, "nodes": 1, "nodesByType": {"c-4x-amd64-linux/test-zone-a/on-demand": 1},
        "costPerHour": 0.17, "bound": 0.17, "gap": 0.0, "verified": True, "planSeconds": 0.8}


def test_the_table_shows_both_schedulers_and_why_one_is_missing() -> None:
    karpenter = {"scheduler": "karpenter", "pods": 4, "placed": 4, "nodes": 2, "costPerHour": 0.34, "seconds": 3.2,
                 "nodesByType": {"c-2x-amd64-linux/test-zone-a/on-demand": 2}}
    kubeplace = {"scheduler": "kubeplace", **provision_figures(PLAN), "seconds": 1.5}
    applied = {"scheduler": "kubeplace-apply", "pods": 4, "placed": 4, "nodes": 1, "costPerHour": 0.17,
               "seconds": 9.4, "nodesByType": {"c-4x-amd64-linux/test-zone-a/on-demand": 1}}
    consolidated = {"scheduler": "karpenter", "nodesBefore": 8, "nodesAfter": 3, "costPerHourBefore": 1.36,
                    "costPerHourAfter": 0.51, "nodesRemoved": 5, "nodesLaunched": 0, "podsEvicted": 6,
                    "seconds": 40.0, "nodesByTypeBefore": {"c-4x": 8}, "nodesByTypeAfter": {"c-4x": 3}}
    doc = {"workloads": [
        {"workload": "web", "consolidation": False, "results": [karpenter, kubeplace, applied]},
        {"workload": "batch", "consolidation": False,
         "results": [karpenter, {"scheduler": "kubeplace", "unavailable": UNAVAILABLE}]},
        {"workload": "consolidation", "consolidation": True, "results": [consolidated]}]}
    text = table(doc)
    assert "web           kubeplace           4      3     1   0.1700   0.1700   0.00%      1.5" in text
    assert "web           kubeplace-apply     4      4     1   0.1700        -       -      9.4" in text
    assert f"batch         kubeplace       {UNAVAILABLE}" in text
    assert "consolidation karpenter     8->3           1.3600   0.5100        5        0        6     40.0" in text
    assert "web karpenter: c-2x-amd64-linux/test-zone-a/on-demand x2" in text


def test_the_report_names_the_karpenter_version_tools_karpenter_pins() -> None:
    assert re.fullmatch(r"v1\.\d+\.\d+", karpenter_version())


class _Api:
    """The part of ApiHttp the hand-over uses, recording each request; the Lease appears held
    after ``held_after`` reads of it."""

    def __init__(self, log: list[str], held_after: int) -> None:
        self.log, self.held_after, self.reads = log, held_after, 0

    def request(self, method: str, path: str, body: Any = None, **_: Any) -> dict[str, Any]:
        if path.endswith("/leases/kubeplace-rebalance"):
            self.reads += 1
            return {"spec": {"holderIdentity": "run" if self.reads > self.held_after else None}}
        self.log.append(f"{method} {path.rsplit('/', 1)[-1]} {body['spec']['disruption']['consolidateAfter']}")
        return {}


class _Karpenter:
    def __init__(self, log: list[str]) -> None:
        self.log = log

    def start(self) -> None:
        self.log.append("start karpenter")

    def stop(self) -> None:
        self.log.append("stop karpenter")


def test_kubeplace_plans_on_consolidatable_pools_while_karpenter_is_stopped_and_karpenter_never_sees_them() -> None:
    """kubeplace honours consolidateAfter Never as Karpenter does: its turn gets the pools at 0s
    with Karpenter stopped; once kubeplace holds its Lease (planned, about to write) the pools are
    Never again before Karpenter starts."""
    from kubeplace_bench import capacity_karpenter

    log: list[str] = []
    api = _Api(log, held_after=2)
    with capacity_karpenter.kubeplace_consolidates(api, _Karpenter(log), ["a", "b"], "ns",  # type: ignore[arg-type]
                                                   lambda: False) as hand_back:
        log.append("kubeplace plans")
        hand_back()
        log.append("kubeplace applies")
    assert log == ["stop karpenter", "PATCH a 0s", "PATCH b 0s", "kubeplace plans", "PATCH a Never", "PATCH b Never",
                   "start karpenter", "kubeplace applies"]
    assert api.reads == 3
    # a run that ends without the Lease (nothing to remove), or fails, hands the cluster back too
    log.clear()
    with pytest.raises(RuntimeError), capacity_karpenter.kubeplace_consolidates(
            _Api(log, held_after=99), _Karpenter(log), ["a"], "ns", lambda: True):  # type: ignore[arg-type]
        raise RuntimeError("kubeplace failed")
    assert log == ["stop karpenter", "PATCH a 0s", "PATCH a Never", "start karpenter"]
