"""``rebalance --consolidate`` removes only what a provisioner owns, through that provisioner:
control-plane nodes never, a node no NodeClaim owns never (a deleted Node leaves its machine
running), another controller's group only when opted in (``--node-group``) and then through it;
a DaemonSet or mirror pod annotated do-not-disrupt keeps its node; ``--apply`` takes the Lease
before it writes anything. Each test fails without the rule it names."""

from __future__ import annotations

import datetime
from typing import Any

import pytest
from click.testing import CliRunner

from kubeplace.cli.main import main
from kubeplace.kube.errors import NotFound
from kubeplace.rebalance.apply import LEASE_NAME, LeaseHeld
from kubeplace.rebalance.consolidate import Consolidation, consolidate
from kubeplace.rebalance.drain import DRAINED, MACHINE_DELETED, drain_nodes
from kubeplace.rebalance.movable import Rules
from kubeplace.rebalance.solve_moves import Settings
from kubeplace_bench.rebalance_clusters import node, pod
from tests.rebalance.test_consolidate import (
    CATALOGUE,
    CONFIG,
    FAST,
    PROFILE,
    ZONE,
    FakeCluster,
    cluster_state,
    drained,
    karpenter_node,
    node_claim,
    node_pool,
    web,
)

PRICE = {"kubeplace.io/price-per-hour": "0.2"}


def run(objects: list[dict[str, Any]], node_groups: frozenset[str] = frozenset()) -> Consolidation:
    return consolidate(cluster_state(objects), CATALOGUE, Rules(), CONFIG, PROFILE, Settings(solver=FAST),
                       node_groups=node_groups)


def kept(result: Consolidation) -> dict[str, str]:
    return dict(result.kept)


def two_karpenter_nodes() -> list[dict[str, Any]]:
    """n0 and n1, Karpenter's, one 1-CPU pod each: either can take the other's pod."""
    return [karpenter_node("n0"), karpenter_node("n1"), web("w0", "n0"), web("w1", "n1"), node_pool()]


def mirror_pod(name: str, node_name: str, annotations: dict[str, str] | None = None) -> dict[str, Any]:
    p = pod(name, "kube-system", 100, 64, node_name=node_name, owner=("Node", node_name))
    p["metadata"]["annotations"] = {"kubernetes.io/config.mirror": "abc", "kubernetes.io/config.source": "file",
                                    **(annotations or {})}
    return p


def control_plane_node(name: str, how: str) -> dict[str, Any]:
    """The issue's node: priced by annotation, no NodePool, only static pods; a control-plane node by ``how``."""
    n = node(name, 4000, 16000)
    n["metadata"]["annotations"] = dict(PRICE)
    kind, key = how.split(":", 1)
    if kind == "label":
        n["metadata"]["labels"][key] = ""
    else:
        n["spec"]["taints"] = [{"key": key, "effect": "NoSchedule"}]
    return n


CONTROL_PLANE = ["label:node-role.kubernetes.io/control-plane", "label:node-role.kubernetes.io/master",
                 "taint:node-role.kubernetes.io/control-plane", "taint:node-role.kubernetes.io/master"]


@pytest.mark.parametrize("how", CONTROL_PLANE)
def test_a_control_plane_node_never_goes(how: str) -> None:
    objects = [*two_karpenter_nodes(), control_plane_node("cp-1", how), mirror_pod("etcd-cp-1", "cp-1")]
    result = run(objects)
    assert "cp-1" not in drained(result)
    assert kept(result)["cp-1"] == "control-plane node, never removed"


@pytest.mark.parametrize("how", CONTROL_PLANE)
def test_a_control_plane_node_never_goes_even_when_karpenter_launched_it(how: str) -> None:
    cp = karpenter_node("cp-1")
    kind, key = how.split(":", 1)
    if kind == "label":
        cp["metadata"]["labels"][key] = "true"
    else:
        cp["spec"]["taints"] = [{"key": key, "effect": "NoExecute"}]
    result = run([*two_karpenter_nodes(), cp])
    assert "cp-1" not in drained(result) and kept(result)["cp-1"] == "control-plane node, never removed"


def test_a_priced_node_no_provisioner_owns_is_kept() -> None:
    plain = node("x1", 4000, 16000)
    plain["metadata"]["annotations"] = dict(PRICE)
    result = run([*two_karpenter_nodes(), plain])
    assert "x1" not in drained(result)
    assert kept(result)["x1"].startswith("no provisioner is known to own it")


def test_a_karpenter_labelled_node_without_its_nodeclaim_is_kept() -> None:
    """Labelled with a NodePool but no NodeClaim owns it: matched by provider ID, a claim of the
    same node name launched for another machine is not its claim."""
    orphan = karpenter_node("n2")
    orphan["spec"]["providerID"] = "kwok://n2-new"
    other = node_claim("n2", provider_id="kwok://n2-old")
    result = run([*two_karpenter_nodes(), orphan, other, web("w2", "n2")])
    assert "n2" not in drained(result)
    assert "no NodeClaim owns it" in kept(result)["n2"]
    owned = karpenter_node("n2")
    owned["spec"]["providerID"] = "kwok://n2-new"
    assert "n2" in drained(run([*two_karpenter_nodes(), owned, node_claim("n2", provider_id="kwok://n2-new")]))


def eks_node(name: str, group: str = "ng-a") -> dict[str, Any]:
    """A node of an EKS managed node group, priced from its labels."""
    n = node(name, 4000, 16000, labels={
        "node.kubernetes.io/instance-type": "large", "topology.kubernetes.io/zone": ZONE,
        "karpenter.sh/capacity-type": "on-demand", "eks.amazonaws.com/nodegroup": group})
    n["spec"]["providerID"] = f"aws:///{ZONE}/i-0{name}"
    return n


def test_a_node_group_node_goes_only_when_opted_in_and_is_never_deleted() -> None:
    objects = [eks_node("ng-1"), eks_node("ng-2"), web("w1", "ng-1"), web("w2", "ng-2"), node_pool()]
    result = run(objects)
    assert not result.drain
    assert kept(result)["ng-1"] == "managed by EKS managed node group ng-a; pass --node-group eks/ng-a to consider it"
    assert "--node-group eks/ng-b: no node of the input belongs to it" in run(objects, frozenset({"eks/ng-b"})).notes
    opted = run(objects, frozenset({"eks/ng-a"}))
    (drain,) = opted.drain
    assert drain.node_group == "eks/ng-a" and not drain.node_claim
    assert drain.remove == (f"aws autoscaling terminate-instance-in-auto-scaling-group --instance-id i-0{drain.node} "
                            "--should-decrement-desired-capacity")
    cluster = FakeCluster(cluster_state(objects))
    report = drain_nodes(cluster, opted.drain, opted.moves)
    assert report.complete and report.drained == 1 and report.removed == 0
    assert report.nodes[0].outcome == DRAINED and report.nodes[0].message == drain.remove
    assert ("cordon", drain.node) in cluster.calls and ("uncordon", drain.node) not in cluster.calls
    assert not [c for c in cluster.calls if c[0].startswith("delete")]


def test_the_cluster_autoscaler_scale_down_disabled_annotation_keeps_an_opted_in_node() -> None:
    blocked = eks_node("ng-1")
    blocked["metadata"]["annotations"] = {"cluster-autoscaler.kubernetes.io/scale-down-disabled": "true"}
    objects = [blocked, eks_node("ng-2"), web("w1", "ng-1"), web("w2", "ng-2"), node_pool()]
    result = run(objects, frozenset({"eks/ng-a"}))
    assert "ng-1" not in drained(result) and "scale-down-disabled" in kept(result)["ng-1"]


def capi_node(name: str) -> list[dict[str, Any]]:
    """A Cluster API node (priced by annotation) and its Machine of MachineDeployment md-1."""
    n = node(name, 4000, 16000)
    n["metadata"]["annotations"] = {**PRICE, "cluster.x-k8s.io/machine": f"m-{name}",
                                    "cluster.x-k8s.io/cluster-namespace": "capi"}
    machine = {"apiVersion": "cluster.x-k8s.io/v1beta1", "kind": "Machine",
               "metadata": {"name": f"m-{name}", "namespace": "capi",
                            "labels": {"cluster.x-k8s.io/deployment-name": "md-1"}}}
    return [n, machine]


class CapiCluster(FakeCluster):
    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self.replicas = 3

    def annotate_machine(self, namespace: str, name: str, annotations: dict[str, str]) -> None:
        self.calls.append(("annotate machine", f"{namespace}/{name}", *sorted(annotations.items())[0]))

    def scale_machine_deployment(self, namespace: str, name: str, by: int) -> int:
        self.calls.append(("scale", f"{namespace}/{name}", str(by)))
        self.replicas += by
        return self.replicas


def test_a_cluster_api_node_goes_through_its_machine_deployment() -> None:
    objects = [*capi_node("c1"), *capi_node("c2"), web("w1", "c1"), web("w2", "c2")]
    assert "pass --node-group capi/md-1" in kept(run(objects))["c1"]
    result = run(objects, frozenset({"capi/md-1"}))
    (drain,) = result.drain
    assert drain.machine == f"capi/m-{drain.node}" and drain.node_group == "capi/md-1"
    cluster = CapiCluster(cluster_state(objects))
    report = drain_nodes(cluster, result.drain, result.moves)
    assert report.complete and report.removed == 1 and report.nodes[0].outcome == MACHINE_DELETED
    writes = [c for c in cluster.calls if c[0] in ("annotate machine", "scale")]
    assert writes == [("annotate machine", f"capi/m-{drain.node}", "cluster.x-k8s.io/delete-machine", "true"),
                      ("scale", "capi/md-1", "-1")]
    assert not [c for c in cluster.calls if c[0].startswith("delete")]


def test_a_cluster_api_node_whose_machine_is_unknown_is_kept() -> None:
    n, _ = capi_node("c1")
    result = run([n, *capi_node("c2"), web("w1", "c1"), web("w2", "c2")], frozenset({"capi/md-1"}))
    assert "c1" not in drained(result) and "Machine capi/m-c1 is not in the input" in kept(result)["c1"]


def daemon_pod(name: str, node_name: str, annotations: dict[str, str]) -> dict[str, Any]:
    p = pod(name, "kube-system", 100, 64, node_name=node_name, owner=("DaemonSet", "agent"))
    p["metadata"]["annotations"] = dict(annotations)
    return p


DO_NOT_DISRUPT = {"karpenter.sh/do-not-disrupt": "true"}


@pytest.mark.parametrize("guard", [daemon_pod("agent-n0", "n0", DO_NOT_DISRUPT),
                                   mirror_pod("static-n0", "n0", DO_NOT_DISRUPT)], ids=["DaemonSet", "mirror"])
def test_a_pod_that_goes_with_the_node_blocks_it_when_annotated_do_not_disrupt(guard: dict[str, Any]) -> None:
    """n0 runs only pods that go with it, so it counts as Empty; the annotation still keeps it."""
    objects = [karpenter_node("n0"), karpenter_node("n1"), web("w1", "n1"), node_pool(), guard]
    result = run(objects)
    assert "n0" not in drained(result)
    assert kept(result)["n0"] == f'pod {guard["metadata"]["namespace"]}/{guard["metadata"]["name"]} is annotated ' \
                                 'karpenter.sh/do-not-disrupt: "true"'


def test_a_terminating_do_not_disrupt_pod_does_not_block() -> None:
    guard = daemon_pod("agent-n0", "n0", DO_NOT_DISRUPT)
    guard["metadata"]["deletionTimestamp"] = "2024-01-01T00:00:00Z"
    result = run([karpenter_node("n0"), karpenter_node("n1"), web("w1", "n1"), node_pool(), guard])
    assert "n0" in drained(result)


# --------------------------------------------------------------------------- the Lease comes first


class LeasedCluster(FakeCluster):
    """The fake of ``test_consolidate`` with a Lease that can be held by someone else."""

    def __init__(self, *args: Any, holder: str = "") -> None:
        super().__init__(*args)
        self.lease: dict[str, Any] | None = None
        if holder:
            now = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
            self.lease = {"metadata": {"name": LEASE_NAME},
                          "spec": {"holderIdentity": holder, "leaseDurationSeconds": 300, "renewTime": now}}

    def read_lease(self, namespace: str, name: str) -> dict[str, Any]:
        self.calls.append(("read lease", name))
        if self.lease is None:
            raise NotFound("no lease")
        return dict(self.lease)

    def write_lease(self, namespace: str, lease: dict[str, Any], create: bool) -> dict[str, Any]:
        self.calls.append(("write lease", str((lease.get("spec") or {}).get("holderIdentity"))))
        self.lease = lease
        return lease


def test_apply_takes_the_lease_before_it_cordons() -> None:
    state = cluster_state(two_karpenter_nodes())
    result = consolidate(state, CATALOGUE, Rules(), CONFIG, PROFILE, Settings(solver=FAST))
    cluster = LeasedCluster(state)
    drain_nodes(cluster, result.drain, result.moves)
    first_write = next(c for c in cluster.calls if c[0] != "read lease")
    assert first_write[0] == "write lease" and first_write[1] != "None"
    assert cluster.calls[-1] == ("write lease", "None")  # released last, after the NodeClaim is deleted


def test_an_empty_node_is_removed_under_the_lease_too() -> None:
    """No pod to evict: the Lease is still taken before the cordon and the delete."""
    objects = [karpenter_node("n0"), karpenter_node("n1"), web("w1", "n1"), node_pool()]
    state = cluster_state(objects)
    result = consolidate(state, CATALOGUE, Rules(), CONFIG, PROFILE, Settings(solver=FAST))
    assert drained(result) == {"n0"} and not result.moves
    cluster = LeasedCluster(state)
    drain_nodes(cluster, result.drain, result.moves)
    kinds = [c[0] for c in cluster.calls if c[0] != "read lease"]
    assert kinds == ["write lease", "cordon", "write lease", "delete nodeclaim", "write lease"]  # take, renew, release


def test_a_held_lease_stops_the_run_before_any_write() -> None:
    state = cluster_state(two_karpenter_nodes())
    result = consolidate(state, CATALOGUE, Rules(), CONFIG, PROFILE, Settings(solver=FAST))
    cluster = LeasedCluster(state, holder="kubeplace-rebalance-29012345-abcde")
    with pytest.raises(LeaseHeld, match="held by kubeplace-rebalance-29012345-abcde until"):
        drain_nodes(cluster, result.drain, result.moves)
    assert [c[0] for c in cluster.calls] == ["read lease"]


def test_a_lease_lost_before_the_removals_removes_nothing_and_uncordons() -> None:
    from kubeplace.kube.errors import Conflict

    objects = [karpenter_node("n0"), karpenter_node("n1"), web("w1", "n1"), node_pool()]
    state = cluster_state(objects)
    result = consolidate(state, CATALOGUE, Rules(), CONFIG, PROFILE, Settings(solver=FAST))
    cluster = LeasedCluster(state)
    taken = cluster.write_lease

    def once(namespace: str, lease: dict[str, Any], create: bool) -> dict[str, Any]:
        if cluster.lease is not None and not create and lease["spec"].get("holderIdentity"):
            raise Conflict("409: the object has been modified")
        return taken(namespace, lease, create)

    cluster.write_lease = once  # type: ignore[method-assign]
    report = drain_nodes(cluster, result.drain, result.moves)
    assert report.removed == 0 and "lost the lease" in report.stopped and not report.complete
    assert not [c for c in cluster.calls if c[0].startswith("delete")] and ("uncordon", "n0") in cluster.calls


def test_cli_a_second_run_says_who_holds_the_lease_in_one_line(monkeypatch: pytest.MonkeyPatch, tmp_path: Any) -> None:
    import kubeplace.kube.kubeconfig as kubeconfig
    import kubeplace.rebalance.cluster_state as cluster_state_module

    state = cluster_state(two_karpenter_nodes())
    cluster = LeasedCluster(state, holder="cronjob-pod-1")
    monkeypatch.setattr(kubeconfig, "connect", lambda *args: cluster)
    monkeypatch.setattr(cluster_state_module, "load_live_state", lambda *args: state)
    result = CliRunner().invoke(main, ["rebalance", "--consolidate", "--apply", "--catalogue",
                                       str(_catalogue(tmp_path)), "--time-limit", "10", "--workers", "1"])
    assert result.exit_code != 0 and result.stderr.count("\n") == 1, result.output
    assert result.stderr.startswith("error: another rebalance is running: lease kubeplace-system/kubeplace-rebalance "
                                    "is held by cronjob-pod-1 until ")
    assert not [c for c in cluster.calls if c[0] not in ("read lease",)]


# --------------------------------------------------------------------------- the flag


@pytest.mark.parametrize("value", ["eks", "eks/", "karpenter/default", "asg/x", "eks/a/b"])
def test_cli_a_bad_node_group_is_one_line_and_exit_2(value: str) -> None:
    result = CliRunner().invoke(main, ["rebalance", "--consolidate", "--node-group", value, "--time-limit", "1"])
    assert result.exit_code == 2 and result.stderr.count("\n") == 1 and "--node-group" in result.stderr


@pytest.mark.parametrize("command", [["rebalance", "--consolidate"], ["plan", "fixtures/demo"]])
@pytest.mark.parametrize("value", ["nan", "inf", "0", "86400"])
def test_cli_a_node_timeout_that_is_no_finite_bounded_wait_is_refused(command: list[str], value: str) -> None:
    """One option for both commands that wait for new nodes (plan --provision --apply, consolidate
    --replace --apply); nan passed click's FloatRange, and the wait had no ceiling."""
    result = CliRunner().invoke(main, [*command, "--node-timeout", value, "--time-limit", "1"])
    assert result.exit_code == 2 and "--node-timeout" in result.output, result.output


def test_cli_node_group_without_consolidate_is_refused(tmp_path: Any) -> None:
    path = tmp_path / "c.yaml"
    path.write_text("apiVersion: v1\nkind: Node\nmetadata: {name: a}\n")
    result = CliRunner().invoke(main, ["rebalance", str(path), "--node-group", "eks/a"])
    assert result.exit_code == 2 and "--node-group is read only with --consolidate" in result.stderr


def test_cli_prints_why_each_node_is_kept(tmp_path: Any) -> None:
    import yaml

    objects = [*two_karpenter_nodes(), control_plane_node("cp-1", CONTROL_PLANE[0]), eks_node("ng-3", "X"),
               node_claim("n0"), node_claim("n1")]
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump_all(objects))
    result = CliRunner().invoke(main, ["rebalance", str(path), "--consolidate", "--catalogue",
                                       str(_catalogue(tmp_path)), "--time-limit", "10", "--workers", "1"])
    assert result.exit_code == 0, result.output
    assert "kept cp-1: control-plane node, never removed" in result.stdout
    assert "kept ng-3: managed by EKS managed node group X; pass --node-group eks/X to consider it" in result.stdout
    opted = CliRunner().invoke(main, ["rebalance", str(path), "--consolidate", "--catalogue", str(_catalogue(tmp_path)),
                                      "--node-group", "eks/X", "--time-limit", "10", "--workers", "1"])
    assert opted.exit_code == 0, opted.output
    assert ("ng-3: --apply drains it and leaves it cordoned; then: aws autoscaling "
            "terminate-instance-in-auto-scaling-group --instance-id i-0ng-3 --should-decrement-desired-capacity"
            in opted.stdout)


def _catalogue(tmp_path: Any) -> Any:
    import json

    from tests.rebalance.test_consolidate import KWOK_CATALOGUE

    path = tmp_path / "instance_types.json"
    path.write_text(json.dumps(KWOK_CATALOGUE))
    return path


# --------------------------------------------------------------------------- do-not-disrupt as a grace period


@pytest.mark.parametrize("value, start, blocks", [
    ("1h", "2024-01-01T00:00:00Z", False),      # ran longer than its grace period
    ("1h", None, True),                          # no start time: protected (Karpenter fails safe)
    ("876000h", "2024-01-01T00:00:00Z", True),   # a century: still protected
    ("1h30m", "2024-01-01T00:00:00Z", False),
    ("yes", None, False),                        # not a duration: no protection, as in Karpenter
    ("True", None, False),                       # Karpenter compares with "true" exactly
    ("TRUE", None, False),
    ("true", "2024-01-01T00:00:00Z", True),
    ("-5m", None, False),
    ("0s", None, False),
])  # fmt: skip
def test_do_not_disrupt_as_a_grace_period(value: str, start: str | None, blocks: bool) -> None:
    guard = daemon_pod("agent-n0", "n0", {"karpenter.sh/do-not-disrupt": value})
    guard["status"] = {"phase": "Running", **({"startTime": start} if start else {})}
    result = run([karpenter_node("n0"), karpenter_node("n1"), web("w1", "n1"), node_pool(), guard])
    assert ("n0" not in drained(result)) == blocks
    if blocks:
        assert kept(result)["n0"] == f'pod kube-system/agent-n0 is annotated karpenter.sh/do-not-disrupt: "{value}"'


def test_go_durations() -> None:
    from kubeplace.kube.karpenter_disruption import go_duration_ns

    assert go_duration_ns("1h30m") == 5400 * 10**9 and go_duration_ns("1.5s") == 1_500_000_000
    assert go_duration_ns("300ms") == 300_000_000 and go_duration_ns("2us") == 2000
    assert go_duration_ns(".5m") == 30 * 10**9
    assert [go_duration_ns(t) for t in ("", "5", "5d", "h", "1h 2m", "true")] == [None] * 6


def test_the_live_state_reads_cluster_api_machines() -> None:
    from kubeplace.rebalance.cluster_state import load_live_state

    node_object, machine = capi_node("c1")

    class Reader:
        description = "the cluster"

        def list_nodes(self) -> list[dict[str, Any]]:
            return [node_object]

        def list_pods(self, *args: Any) -> list[dict[str, Any]]:
            return []

        def list_namespaces(self) -> list[dict[str, Any]]:
            return []

        def list_pod_disruption_budgets(self) -> list[dict[str, Any]]:
            return []

        def list_objects(self, group: str, version: str, plural: str) -> list[dict[str, Any]]:
            return [machine] if (group, version, plural) == ("cluster.x-k8s.io", "v1beta1", "machines") else []

        def list_metrics(self, plural: str) -> list[dict[str, Any]]:
            raise NotFound("metrics.k8s.io is not served")

    state = load_live_state(Reader())
    assert state.machines == {"capi/m-c1": {"cluster.x-k8s.io/deployment-name": "md-1"}}
