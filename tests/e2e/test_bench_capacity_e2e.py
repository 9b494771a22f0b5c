"""``kubeplace bench capacity`` end to end, small: one workload of six mixed-shape pods, the real
Karpenter (its kwok provider, from .ci/build-karpenter's cache) launching nodes and the
kube-scheduler binding every pod to them, and kubeplace's side run or reported unavailable."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from kubeplace.cli.main import main
from kubeplace_bench.capacity import UNAVAILABLE, table
from kubeplace_bench.capacity_karpenter import karpenter_build
from kubeplace_bench.controlplane_binaries import ControlPlaneUnavailable

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(900)]


def test_bench_capacity_measures_karpenter_and_kubeplace_on_one_workload() -> None:
    try:
        karpenter_build(build=False)
    except ControlPlaneUnavailable as unavailable:
        pytest.skip(str(unavailable))
    result = CliRunner().invoke(main, ["bench", "capacity", "--workload", "batch", "--scale", "0.1", "--settle", "20",
                                       "--time-limit", "5", "-o", "json"])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    (entry,) = doc["workloads"]
    assert (entry["workload"], entry["consolidation"]) == ("batch", False)
    karpenter, kubeplace, *applied = entry["results"]
    assert karpenter["scheduler"] == "karpenter" and karpenter["pods"] == 6
    assert karpenter["placed"] == 6, "Karpenter's nodes did not get every pod bound"
    assert karpenter["nodes"] == sum(karpenter["nodesByType"].values()) > 0
    assert karpenter["costPerHour"] > 0 and karpenter["seconds"] > 0
    assert kubeplace["scheduler"] == "kubeplace"
    if "unavailable" in kubeplace:
        assert kubeplace["unavailable"] == UNAVAILABLE
    else:
        assert {"placed", "nodes", "costPerHour", "bound", "gap", "seconds"} <= set(kubeplace)
        assert kubeplace["placed"] == 6 and kubeplace["verified"] is True
        # plan --provision --apply on the emptied cluster: Karpenter launched its NodeClaims, the pods are bound
        (on_cluster,) = applied
        assert on_cluster["scheduler"] == "kubeplace-apply" and on_cluster["placed"] == 6, on_cluster
        assert on_cluster["costPerHour"] == kubeplace["costPerHour"] and on_cluster["notes"] == []
    text = table(doc)
    assert text.splitlines()[0].split() == ["WORKLOAD", "SCHEDULER", "PODS", "PLACED", "NODES", "COST/H", "BOUND/H",
                                            "GAP", "SECONDS"]
    assert "batch karpenter: " in text


def test_bench_capacity_consolidation_measures_karpenter_and_kubeplace() -> None:
    """The consolidation workload, small: Karpenter's consolidation and `rebalance --consolidate
    --apply` each on the same freshly fragmented cluster; kubeplace's answer verified, never
    dearer than before, the nodes it removed gone and every pod bound again."""
    try:
        karpenter_build(build=False)
    except ControlPlaneUnavailable as unavailable:
        pytest.skip(str(unavailable))
    result = CliRunner().invoke(main, ["bench", "capacity", "--workload", "consolidation", "--scale", "0.3",
                                       "--settle", "10", "--time-limit", "5", "-o", "json"])
    assert result.exit_code == 0, result.output
    (entry,) = json.loads(result.stdout)["workloads"]
    karpenter, kubeplace = entry["results"]
    assert karpenter["scheduler"] == "karpenter" and kubeplace["scheduler"] == "kubeplace"
    assert kubeplace["verified"] is True and kubeplace["bound"] == kubeplace["pods"]
    assert kubeplace["costPerHourAfter"] <= kubeplace["costPerHourBefore"]
    assert kubeplace["nodesDeleted"] == kubeplace["nodesRemoved"]
    # kubeplace honours consolidateAfter Never as Karpenter does: given the pools at 0s while
    # Karpenter is stopped, it consolidates the scaled-down cluster (it removed nothing on Never)
    assert kubeplace["nodesRemoved"] > 0, kubeplace
    same = karpenter["kubeplaceOnThisStart"]  # kubeplace's dry run on Karpenter's own start
    assert same["costPerHourAfter"] <= karpenter["costPerHourBefore"] and same["podsEvicted"] >= 0
    assert same["nodesRemoved"] > 0, same
    assert "kubeplace's dry run on this start" in table(json.loads(result.stdout))
