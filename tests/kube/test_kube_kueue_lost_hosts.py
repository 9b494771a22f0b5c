"""A Kueue-admitted topology-aware workload pinned to a node that failed: kubeplace holds its
pods back as one gang (Kueue admitted them together), and the reason of every pod names the lost
node and says the workload waits for Kueue (which replaces the node, or evicts the workload and
requeues it: NodeFailures), in the plan's table and JSON and in serve's decision and Event."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner

from kubeplace.cli.main import main
from kubeplace.kube.gangs import gang_of
from kubeplace.kube.kueue import lost_host_holds
from kubeplace.kube.objects import GangKey
from kubeplace.models.config import Configuration, Profile, SolverSettings
from kubeplace.plan.pipeline import make_plan
from kubeplace.plan.verify import verify
from tests.builders import NodeBuilder, PodBuilder, node, pod, snapshot_of
from tests.serve.test_serve_loop import bound, next_cycle, scheduler

HOST = "kubernetes.io/hostname"
WORKLOAD = "job-train-1a2b3"
KEY = GangKey("default", WORKLOAD)
UNREACHABLE = "node.kubernetes.io/unreachable"


def host(name: str) -> NodeBuilder:
    return node(name).cpu("8").memory("16Gi").label(HOST, name)


def member(k: int, on: str) -> PodBuilder:
    """Pod k of the workload, ungated by Kueue's TAS with its node pinned."""
    return (pod(f"train-{k}").cpu("2").memory("1Gi").annotation("kueue.x-k8s.io/workload", WORKLOAD)
            .label("kueue.x-k8s.io/tas", "true").label("kueue.x-k8s.io/podset", "main").selector(HOST, on))


def six_pods(lost: NodeBuilder) -> list[Any]:
    """Three hosts, two pods pinned to each; h2 is ``lost``."""
    return [host("h0"), host("h1"), lost, *(member(k, f"h{k // 2}") for k in range(6))]


def holds(*objects: Any) -> dict[GangKey, str]:
    snap = snapshot_of(*objects)
    return lost_host_holds(snap.pending, snap.nodes, gang_of)


ONE = ("Kueue workload default/job-train-1a2b3 waits for Kueue to replace node h2 or to evict and requeue it "
       "(NodeFailures): its topology assignment pins train-4, train-5 to node h2, which ")
SIX = "; its 6 pending pods, admitted together, wait together"


@pytest.mark.parametrize(("lost", "why"), [
    (host("h2").taint(UNREACHABLE), "is unreachable (taint node.kubernetes.io/unreachable:NoSchedule)"),
    (host("h2").taint(UNREACHABLE, effect="NoExecute"),
     "is unreachable (taint node.kubernetes.io/unreachable:NoExecute)"),
    (host("h2").taint("node.kubernetes.io/not-ready"), "is NotReady (taint node.kubernetes.io/not-ready:NoSchedule)"),
    (host("h2").unschedulable(), "is cordoned (spec.unschedulable)"),
    (host("h2").taint("gpu-broken", "yes"), "has the taint gpu-broken=yes:NoSchedule its pods do not tolerate"),
    (host("h9"), "is not in the cluster (deleted)"),
])
def test_the_reason_names_the_lost_node_and_what_kueue_does(lost: NodeBuilder, why: str) -> None:
    assert holds(*six_pods(lost)) == {KEY: ONE + why + SIX}


def test_no_hold_while_the_pinned_nodes_can_take_the_pods() -> None:
    assert holds(*six_pods(host("h2"))) == {}
    tolerated = [host("h0"), host("h1"), host("h2").taint(UNREACHABLE),
                 *(member(k, f"h{k // 2}").tolerate(UNREACHABLE, operator="Exists") for k in range(6))]
    assert holds(*tolerated) == {}
    other = [host("h0").taint(UNREACHABLE), pod("plain").cpu("1").selector(HOST, "h0")]
    assert holds(*other) == {}  # (not admitted by Kueue: no workload to requeue)
    own = [host("h0").taint(UNREACHABLE),
           pod("mine").cpu("1").selector(HOST, "h0").annotation("kueue.x-k8s.io/workload", WORKLOAD)]
    assert holds(*own) == {}  # (admitted without topology-aware scheduling: the user's own nodeSelector)


def test_two_lost_nodes_mean_eviction() -> None:
    objects = [host("h0"), host("h1").taint(UNREACHABLE), host("h2").unschedulable(),
               *(member(k, f"h{k // 2}") for k in range(6))]
    assert holds(*objects) == {KEY: (
        "Kueue workload default/job-train-1a2b3 waits for Kueue to evict and requeue it (NodeFailures: more than "
        "one of its nodes failed): its topology assignment pins train-2, train-3 to node h1, which is unreachable "
        "(taint node.kubernetes.io/unreachable:NoSchedule) and train-4, train-5 to node h2, which is cordoned "
        "(spec.unschedulable)" + SIX)}


EXPECTED = ONE + "is unreachable (taint node.kubernetes.io/unreachable:NoSchedule)" + SIX


@pytest.mark.parametrize("backend", ["cpsat", "highs"])
def test_the_plan_holds_all_six_and_every_pod_says_why(backend: str) -> None:
    snap = snapshot_of(*six_pods(host("h2").taint(UNREACHABLE)))
    plan = make_plan(snap, Configuration(), Profile(), SolverSettings(backend=backend, time_limit=5, workers=1)).plan
    assert verify(snap, []) == [] and plan.placements == ()
    assert {u.name: u.reasons for u in plan.unplaced} == {f"train-{k}": (EXPECTED,) for k in range(6)}
    assert [(g.name, g.placed, g.reason) for g in plan.gangs] == [(WORKLOAD, False, EXPECTED)]


def test_the_plan_table_and_json_say_it(tmp_path: Path) -> None:
    items = [o.manifest() for o in six_pods(host("h2").taint(UNREACHABLE))]
    for item in items:
        if item["kind"] == "Pod":
            item["spec"]["schedulerName"] = "kubeplace"
    snapshot = tmp_path / "snap.yaml"
    snapshot.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": items}))
    as_json = CliRunner().invoke(main, ["plan", str(snapshot), "-o", "json"])
    assert as_json.exit_code == 0, as_json.output
    document = json.loads(as_json.stdout)
    assert {u["name"]: u["reasons"] for u in document["unplaced"]} == {f"train-{k}": [EXPECTED] for k in range(6)}
    as_table = CliRunner().invoke(main, ["plan", str(snapshot)], terminal_width=1000)
    rows = [line for line in as_table.stdout.splitlines() if line.startswith("default ")]
    assert len(rows) == 6 and all(EXPECTED in " ".join(row.split()) for row in rows), as_table.stdout


def test_serve_binds_none_and_its_decision_and_event_say_why(caplog: pytest.LogCaptureFixture) -> None:
    s, cluster = scheduler(*six_pods(host("h2").taint(UNREACHABLE)), pod("other").cpu("1"))
    with caplog.at_level(logging.INFO, logger="kubeplace.serve"):
        report = next_cycle(s)
    assert set(bound(cluster)) == {"other"}  # (placed pod by pod, four of the six would have been bound)
    assert sorted(report.unplaced) == [f"default/train-{k}" for k in range(6)]
    failed = [e for e in cluster.events if e["reason"] == "FailedScheduling"]
    assert len(failed) == 6 and {e["message"] for e in failed} == {EXPECTED}
    decisions = [r.fields for r in caplog.records if r.getMessage() == "decision"]  # type: ignore[attr-defined]
    unschedulable = [d for d in decisions if d.get("outcome") == "unschedulable"]
    assert len(unschedulable) == 6 and {d["why"] for d in unschedulable} == {EXPECTED}
