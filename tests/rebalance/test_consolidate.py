"""``rebalance --consolidate``: the cheapest nodes kept, then the fewest evictions, within every
constraint (each test below fails without the constraint it names), every answer re-planned and
verified."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kubeplace.cli.main import main
from kubeplace.kube.catalogue import PRICE_UNIT, InstanceType, Offering
from kubeplace.kube.errors import DisruptionBudget, InputError, NotFound
from kubeplace.models.config import SolverSettings
from kubeplace.models.config_load import load_configuration
from kubeplace.rebalance.cluster_state import ClusterState, state_of
from kubeplace.rebalance.consolidate import Consolidation, consolidate, node_price
from kubeplace.rebalance.drain import drain_nodes
from kubeplace.rebalance.model import Budgets
from kubeplace.rebalance.movable import Rules
from kubeplace.rebalance.solve_moves import Settings
from kubeplace_bench.rebalance_clusters import node, pdb, pod

CONFIG = load_configuration(None)
PROFILE = CONFIG.profile(None)
FAST = SolverSettings(time_limit=10.0, workers=1, seed=0)
ZONE = "zone-a"
CATALOGUE = (
    InstanceType("small", {"cpu": 2000, "memory": 8 * 2**30, "pods": 110}, "amd64", ("linux",),
                 (Offering(ZONE, "on-demand", PRICE_UNIT // 10),)),
    InstanceType("large", {"cpu": 4000, "memory": 16 * 2**30, "pods": 110}, "amd64", ("linux",),
                 (Offering(ZONE, "on-demand", PRICE_UNIT // 5),)),
)


def karpenter_node(name: str, itype: str = "large", pool: str = "default",
                   annotations: dict[str, str] | None = None) -> dict[str, Any]:
    cpu = 4000 if itype == "large" else 2000
    n = node(name, cpu, cpu * 4, labels={"node.kubernetes.io/instance-type": itype,
                                         "topology.kubernetes.io/zone": ZONE, "karpenter.sh/capacity-type": "on-demand",
                                         **({"karpenter.sh/nodepool": pool} if pool else {})})
    n["metadata"]["annotations"] = dict(annotations or {})
    return n


def node_claim(node_name: str, pool: str = "default", provider_id: str = "") -> dict[str, Any]:
    """The NodeClaim that launched ``node_name``: what makes it Karpenter's to disrupt."""
    return {"apiVersion": "karpenter.sh/v1", "kind": "NodeClaim",
            "metadata": {"name": f"{node_name}-claim", "labels": {"karpenter.sh/nodepool": pool}},
            "spec": {"requirements": [], "nodeClassRef": {"group": "karpenter.kwok.sh", "kind": "KWOKNodeClass",
                                                          "name": "default"}},
            "status": {"nodeName": node_name, **({"providerID": provider_id} if provider_id else {}),
                       "conditions": [{"type": "Initialized", "status": "True",
                                       "lastTransitionTime": "2026-01-01T00:00:00Z"}]}}


def with_claims(objects: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``objects`` and a NodeClaim for each node labelled with a NodePool that has none."""
    claimed = {o["status"]["nodeName"] for o in objects if o["kind"] == "NodeClaim"}
    return [*objects, *[node_claim(o["metadata"]["name"], o["metadata"]["labels"]["karpenter.sh/nodepool"])
                        for o in objects if o["kind"] == "Node" and o["metadata"]["name"] not in claimed
                        and "karpenter.sh/nodepool" in o["metadata"].get("labels", {})]]


def cluster_state(objects: list[dict[str, Any]]) -> ClusterState:
    return state_of([(o, "test") for o in with_claims(objects)])


def node_pool(name: str = "default", budgets: list[dict[str, Any]] | None = None,
              policy: str = "WhenEmptyOrUnderutilized", consolidate_after: str = "0s") -> dict[str, Any]:
    return {"apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": name},
            "spec": {"template": {"spec": {"requirements": [], "nodeClassRef": {
                "group": "karpenter.kwok.sh", "kind": "KWOKNodeClass", "name": "default"}}},
                "disruption": {"consolidationPolicy": policy, "consolidateAfter": consolidate_after,
                               "budgets": budgets or [{"nodes": "100%"}]}}}


def web(name: str, node_name: str, cpu: int = 1000, **extra: Any) -> dict[str, Any]:
    return pod(name, "default", cpu, 1024, node_name=node_name, labels={"app": "web"}, **extra)


def fragmented(extra: list[dict[str, Any]] | None = None, budgets: list[dict[str, Any]] | None = None,
               nodes: list[dict[str, Any]] | None = None) -> ClusterState:
    """Four large nodes (4 CPUs, 0.2/h) with one 1-CPU pod each: three of them can go."""
    objects = nodes or [karpenter_node(f"n{i}") for i in range(4)]
    objects += [web(f"w{i}", f"n{i}") for i in range(4)]
    objects += [node_pool(budgets=budgets), *(extra or [])]
    return cluster_state(objects)


def run(state: ClusterState, budgets: Budgets | None = None) -> Consolidation:
    return consolidate(state, CATALOGUE, Rules(), CONFIG, PROFILE, Settings(budgets=budgets or Budgets(), solver=FAST))


def drained(result: Consolidation) -> set[str]:
    return {d.node for d in result.drain}


def test_three_half_empty_nodes_go_and_their_pods_move_to_the_fourth() -> None:
    result = run(fragmented())
    assert len(result.drain) == 3 and result.verified
    assert result.cost_before == 4 * PRICE_UNIT // 5 and result.cost_after == PRICE_UNIT // 5
    assert result.bound <= result.cost_after
    (kept,) = {f"n{i}" for i in range(4)} - drained(result)
    assert {m.target for m in result.moves} == {kept} and len(result.moves) == 3


def test_fewest_evictions_at_the_least_cost() -> None:
    state = fragmented(extra=[web("w0b", "n0"), web("w0c", "n0")])  # 6 CPUs: two nodes stay, n0 one of them
    result = run(state)
    assert "n0" not in drained(result) and len(result.drain) == 2 and len(result.moves) == 2


def test_a_pdb_limits_the_evictions() -> None:
    result = run(fragmented(extra=[pdb("web", "default", "web", 1)]))
    assert len(result.moves) == 1 and len(result.drain) == 1


def test_max_moves() -> None:
    result = run(fragmented(), Budgets(max_moves=2))
    assert len(result.moves) == 2 and len(result.drain) == 2


def test_a_do_not_disrupt_pod_keeps_its_node() -> None:
    state = fragmented()
    raw = state.raw_pods["default/w1"]
    objects = [o for o in fragmented_objects() if o["metadata"]["name"] != "w1"]
    objects.append({**raw, "metadata": {**raw["metadata"], "annotations": {"karpenter.sh/do-not-disrupt": "true"}}})
    result = run(cluster_state(objects))
    assert "n1" not in drained(result) and len(result.drain) == 3
    assert ("n1", 'pod default/w1 is annotated karpenter.sh/do-not-disrupt: "true"') in result.kept


def fragmented_objects() -> list[dict[str, Any]]:
    return with_claims([*[karpenter_node(f"n{i}") for i in range(4)], *[web(f"w{i}", f"n{i}") for i in range(4)],
                        node_pool()])


def test_a_do_not_disrupt_node_stays() -> None:
    nodes = [karpenter_node("n0", annotations={"karpenter.sh/do-not-disrupt": "true"}),
             *[karpenter_node(f"n{i}") for i in range(1, 4)]]
    result = run(fragmented(nodes=nodes))
    assert "n0" not in drained(result) and len(result.drain) == 3


def test_a_node_annotated_do_not_disrupt_otherwise_than_true_may_go() -> None:
    """Karpenter's ValidateNodeDisruptable compares the node's annotation with "true" exactly (no
    duration on a node): "True" or "1h" do not keep it."""
    for value in ("True", "TRUE", "1h"):
        nodes = [karpenter_node("n0", annotations={"karpenter.sh/do-not-disrupt": value}),
                 *[karpenter_node(f"n{i}") for i in range(1, 4)]]
        result = run(fragmented(nodes=nodes))
        assert len(result.drain) == 3 and not any("do-not-disrupt" in why for _, why in result.kept), result.kept


def test_the_nodepool_disruption_budget() -> None:
    assert len(run(fragmented(budgets=[{"nodes": "1"}])).drain) == 1
    assert len(run(fragmented(budgets=[{"nodes": "50%"}])).drain) == 2
    # a budget for empty nodes only does not limit the removal of under-used ones
    assert len(run(fragmented(budgets=[{"nodes": "0", "reasons": ["Empty"]}])).drain) == 3


def test_a_budget_percentage_is_of_the_nodes_karpenter_counts() -> None:
    """Karpenter's budget mapping (BuildDisruptionBudgetMapping) takes a percentage of its NodePool's
    managed, initialized nodes whose instance is not terminating, and subtracts those already being
    disrupted (not Ready, being deleted, tainted karpenter.sh/disrupted)."""
    def claim(name: str, condition: str) -> dict[str, Any]:
        c = node_claim(name)
        c["status"]["conditions"] = [{"type": condition, "status": "True",
                                      "lastTransitionTime": "2026-01-01T00:00:00Z"}] if condition else []
        return c

    not_counted = [karpenter_node("u0"), claim("u0", ""), karpenter_node("u1"), claim("u1", ""),  # not initialized
                   karpenter_node("t0"), claim("t0", "InstanceTerminating")]
    assert len(run(fragmented(budgets=[{"nodes": "25%"}], extra=not_counted)).drain) == 1  # 25% of 4, not of 7
    sick = karpenter_node("sick", annotations={"karpenter.sh/do-not-disrupt": "true"})
    sick["status"] = {"conditions": [{"type": "Ready", "status": "False"}]}
    tainted = karpenter_node("tainted", annotations={"karpenter.sh/do-not-disrupt": "true"})
    tainted["spec"] = {"taints": [{"key": "karpenter.sh/disrupted", "effect": "NoSchedule"}]}
    assert len(run(fragmented(budgets=[{"nodes": "3"}], extra=[sick, tainted])).drain) == 1  # 3 - 2 disrupted
    assert len(run(fragmented(budgets=[{"nodes": "3"}], extra=[sick])).drain) == 2


def test_a_node_karpenter_removes_already_is_no_candidate() -> None:
    """Karpenter's ValidateNodeDisruptable refuses a node being deleted or marked for deletion
    (tainted karpenter.sh/disrupted by a command in progress): it is not removed twice."""
    deleting = {"deletionTimestamp": "2026-01-01T00:00:00Z", "finalizers": ["karpenter.sh/termination"]}
    for mark in ({"metadata": deleting},
                 {"spec": {"taints": [{"key": "karpenter.sh/disrupted", "effect": "NoSchedule"}]}}):
        nodes = [karpenter_node(f"n{i}") for i in range(4)]
        for part, fields in mark.items():
            nodes[0][part] = {**nodes[0].get(part, {}), **fields}
        result = run(fragmented(nodes=nodes))
        assert "n0" not in drained(result), mark
        assert dict(result.kept)["n0"].startswith("Karpenter is removing it already"), result.kept


def test_a_pod_that_may_not_move_keeps_its_node() -> None:
    nodes = [karpenter_node(f"n{i}") for i in range(4)]
    bare = pod("bare", "default", 100, 64, node_name="n2", owner=None)
    result = run(fragmented(nodes=nodes, extra=[bare]))
    assert "n2" not in drained(result) and len(result.drain) == 2  # its 1.1 CPU and 4 pods need two nodes


def test_anti_affinity_holds_after_the_moves() -> None:
    """A pod on n0 refuses web pods beside it: they all go to another node, n0's pod stays."""
    guard = pod("guard", "default", 100, 64, node_name="n0", labels={"app": "guard"}, affinity={
        "podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [{
            "labelSelector": {"matchLabels": {"app": "web"}}, "topologyKey": "kubernetes.io/hostname"}]}})
    nodes = [karpenter_node(f"n{i}") for i in range(4)]
    objects = [*nodes, *[web(f"w{i}", f"n{i}") for i in range(1, 4)], guard, node_pool()]
    result = run(cluster_state(objects))
    assert "n0" not in drained(result) and len(result.drain) == 2
    assert all(m.target != "n0" for m in result.moves)


def test_a_node_without_price_is_kept_and_said_so() -> None:
    nodes = [*[karpenter_node(f"n{i}") for i in range(3)], karpenter_node("n3", "huge")]
    result = run(fragmented(nodes=nodes))
    assert "n3" not in drained(result)
    assert any(node == "n3" and "no price" in why for node, why in result.kept)


def test_the_price_annotation_and_the_catalogue() -> None:
    from kubeplace.kube.parse import parse_node

    priced = karpenter_node("x", annotations={"kubeplace.io/price-per-hour": "0.5"})
    assert node_price(parse_node(priced), {"kubeplace.io/price-per-hour": "0.5"}, ()) == (
        PRICE_UNIT // 2, "annotation kubeplace.io/price-per-hour")
    assert node_price(parse_node(karpenter_node("y", "small")), {}, CATALOGUE)[0] == PRICE_UNIT // 10
    with pytest.raises(InputError, match="price per hour"):
        node_price(parse_node(priced), {"kubeplace.io/price-per-hour": "-1"}, ())


def test_an_unknown_nodepool_is_bad_input() -> None:
    nodes = [karpenter_node("n0", pool="nope"), *[karpenter_node(f"n{i}") for i in range(1, 4)]]
    with pytest.raises(InputError, match="NodePool 'nope'"):
        run(fragmented(nodes=nodes))


# --------------------------------------------------------------------------- the command on files


KWOK_CATALOGUE = [
    {"name": name, "architecture": "amd64", "operatingSystems": ["linux"],
     "resources": {"cpu": cpu, "memory": memory, "pods": "110"},
     "offerings": [{"Price": price, "Available": True, "Requirements": [
         {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]},
         {"key": "topology.kubernetes.io/zone", "operator": "In", "values": [ZONE]}]}]}
    for name, cpu, memory, price in (("small", "2", "8Gi", 0.1), ("large", "4", "16Gi", 0.2))]


def files(tmp_path: Path, objects: list[dict[str, Any]], catalogue: Any = None) -> tuple[str, str]:
    cluster, prices = tmp_path / "cluster.yaml", tmp_path / "instance_types.json"
    cluster.write_text(yaml.safe_dump_all(objects))
    prices.write_text(json.dumps(KWOK_CATALOGUE if catalogue is None else catalogue))
    return str(cluster), str(prices)


def invoke(*args: str) -> Any:
    return CliRunner().invoke(main, ["rebalance", "--consolidate", *args, "--time-limit", "10", "--workers", "1"])


def test_cli_json_and_table(tmp_path: Path) -> None:
    cluster, prices = files(tmp_path, fragmented_objects())
    result = invoke(cluster, "--catalogue", prices, "-o", "json")
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    c = doc["consolidate"]
    assert len(c["drain"]) == 3 and c["costPerHourBefore"] == 0.8 and c["costPerHourAfter"] == 0.2
    assert c["bound"] <= 0.2 and doc["summary"]["verified"] and len(doc["moves"]) == 3
    assert doc["apply"]["dry_run"] is True
    table = invoke(cluster, "--catalogue", prices)
    assert table.exit_code == 0, table.output
    assert "DRAIN" in table.stdout and "cost per hour 0.8000 -> 0.2000" in table.stdout


@pytest.mark.parametrize("catalogue, objects, message", [
    ([{**KWOK_CATALOGUE[1], "offerings": [{"Available": True, "Requirements": KWOK_CATALOGUE[1]["offerings"][0][
        "Requirements"]}]}], None, "price"),
    (None, [karpenter_node("n0", pool="nope"), node_pool()], "NodePool 'nope'"),
])  # fmt: skip
def test_cli_bad_input_is_one_line_and_exit_2(tmp_path: Path, catalogue: Any, objects: Any, message: str) -> None:
    cluster, prices = files(tmp_path, objects or fragmented_objects(), catalogue)
    result = invoke(cluster, "--catalogue", prices)
    assert result.exit_code == 2, result.output
    assert result.stderr.count("\n") == 1 and result.stderr.startswith("error: ") and message in result.stderr


def test_catalogue_without_consolidate_is_refused(tmp_path: Path) -> None:
    cluster, prices = files(tmp_path, fragmented_objects())
    result = CliRunner().invoke(main, ["rebalance", cluster, "--catalogue", prices])
    assert result.exit_code == 2 and "--catalogue is read only with --consolidate" in result.stderr


# --------------------------------------------------------------------------- --apply on a fake cluster


class FakeCluster:
    def __init__(self, state: ClusterState, refuse: frozenset[str] = frozenset()) -> None:
        self.pods = {key: dict(raw) for key, raw in state.raw_pods.items()}
        self.nodes = {n.name: False for n in state.snapshot.nodes}
        self.refuse = refuse
        self.calls: list[tuple[str, ...]] = []

    def cordon_node(self, name: str, unschedulable: bool = True) -> None:
        self.calls.append(("cordon" if unschedulable else "uncordon", name))

    def delete_node_claim(self, name: str) -> None:
        self.calls.append(("delete nodeclaim", name))

    def list_nodes(self) -> list[dict[str, Any]]:
        return [{"metadata": {"name": n}} for n in self.nodes]

    def read_pod(self, namespace: str, name: str) -> dict[str, Any]:
        return self.pods[f"{namespace}/{name}"]

    def evict(self, namespace: str, name: str, uid: str, dry_run: bool = False) -> None:
        if name in self.refuse:
            raise DisruptionBudget("429: the PodDisruptionBudget forbids it")
        self.calls.append(("evict", name))

    def read_lease(self, namespace: str, name: str) -> dict[str, Any]:
        raise NotFound("no lease")

    def write_lease(self, namespace: str, lease: dict[str, Any], create: bool) -> dict[str, Any]:
        return lease


def test_apply_cordons_evicts_and_deletes_node_by_node() -> None:
    state = fragmented()
    result = run(state)
    cluster = FakeCluster(state, refuse=frozenset({result.moves[0].name}))
    report = drain_nodes(cluster, result.drain, result.moves)
    blocked = result.moves[0].source
    assert [c[0] for c in cluster.calls[:3]] == ["cordon"] * 3
    assert ("delete nodeclaim", f"{blocked}-claim") not in cluster.calls and ("uncordon", blocked) in cluster.calls
    assert report.removed == 2 and not report.complete
    doc = report.to_dict()
    assert {n["node"]: n["outcome"] for n in doc["nodes"]}[blocked] == "kept (uncordoned)"
    assert [r["outcome"] for r in doc["results"]].count("evicted") == 2


def test_an_answer_the_verifier_refuses_is_cut_off_and_solved_again(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every answer is planned again and verified: one the verifier refuses (here: any that
    removes n0) is never shown; the model is solved again without it."""
    import kubeplace.rebalance.consolidate as module
    from kubeplace.plan.verify import Violation

    real = module.make_plan

    def refusing(view: Any, *args: Any, **kwargs: Any) -> Any:
        planned = real(view, *args, **kwargs)
        if "n0" not in {n.name for n in view.nodes}:
            return replace(planned, violations=(Violation("default", "w0", "n1", "test", "refused"),))
        return planned

    monkeypatch.setattr(module, "make_plan", refusing)
    result = run(fragmented())
    assert "n0" not in drained(result) and len(result.drain) == 3 and result.verified


# --------------------------------------------------------------------------- properties on random clusters


@st.composite
def random_clusters(draw: st.DrawFn) -> list[dict[str, Any]]:
    """3 to 6 nodes of both types, each with a few pods of one of two Deployments that fit it,
    some annotated do-not-disrupt, maybe a PDB and a budget on the NodePool."""
    kinds = draw(st.lists(st.sampled_from(["small", "large"]), min_size=3, max_size=6))
    objects: list[dict[str, Any]] = [karpenter_node(f"n{i}", kind) for i, kind in enumerate(kinds)]
    for i, kind in enumerate(kinds):
        room = 2000 if kind == "small" else 4000
        for j, cpu in enumerate(draw(st.lists(st.sampled_from([250, 500, 1000]), max_size=4))):
            if cpu > room:
                break
            room -= cpu
            app = draw(st.sampled_from(["a", "b"]))
            p = pod(f"p{i}-{j}", "default", cpu, 256, node_name=f"n{i}", labels={"app": app}, owner=("ReplicaSet", app))
            if draw(st.integers(0, 9)) == 0:
                p["metadata"]["annotations"] = {"karpenter.sh/do-not-disrupt": "true"}
            objects.append(p)
    if draw(st.booleans()):
        objects.append(pdb("a", "default", "a", draw(st.integers(0, 2))))
    budget = draw(st.sampled_from(["100%", "1", "50%"]))
    return [*objects, node_pool(budgets=[{"nodes": budget}])]


@settings(max_examples=25, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(random_clusters())
def test_answers_are_verified_never_dearer_and_within_their_rules(objects: list[dict[str, Any]]) -> None:
    from kubeplace.plan.verify import verify

    state = cluster_state(objects)
    result = run(state)
    assert result.verified and result.bound <= result.cost_after <= result.cost_before
    gone = drained(result)
    on_gone = {k for k, raw in state.raw_pods.items() if raw["spec"]["nodeName"] in gone}
    assert {f"{m.namespace}/{m.name}" for m in result.moves} == on_gone
    assert all(m.target not in gone for m in result.moves)
    # the moves as a plan of the pods of the removed nodes on the nodes that remain: verified
    snap = state.snapshot
    moved = {(m.namespace, m.name): m.target for m in result.moves}
    view = replace(snap, nodes=tuple(n for n in snap.nodes if n.name not in gone),
                   pending=tuple(replace(p, node_name="") for p in snap.bound if (p.namespace, p.name) in moved),
                   bound=tuple(p for p in snap.bound if p.node_name not in gone))
    assert verify(view, [(ns, name, node) for (ns, name), node in moved.items()]) == []
    allowed = {pdb.name: pdb.allowed for pdb in snap.disruption_budgets}
    assert sum(raw["metadata"]["labels"]["app"] == "a" for k, raw in state.raw_pods.items() if k in on_gone) <= (
        allowed.get("a", 10**6))
    assert not any((raw["metadata"].get("annotations") or {}).get("karpenter.sh/do-not-disrupt")
                   for k, raw in state.raw_pods.items() if k in on_gone)


def test_cli_report(tmp_path: Path) -> None:
    cluster, prices = files(tmp_path, fragmented_objects())
    report = tmp_path / "r.html"
    result = invoke(cluster, "--catalogue", prices, "--report", str(report))
    assert result.exit_code == 0, result.output
    html = report.read_text()
    assert "consolidate: cost per hour 0.8000 -" in html and "0.2000 (bound" in html
    assert "drain n" in html


def test_replace_buys_a_cheaper_node_for_the_pods_of_the_removed_ones() -> None:
    """Two large nodes (0.2/h) with a 1-CPU pod each: removing one leaves 0.2/h; replacing both
    by one small node (0.1/h, 2 CPUs) leaves 0.1/h, through the provisioning's offerings."""
    objects = [karpenter_node("n0"), karpenter_node("n1"), web("w0", "n0"), web("w1", "n1"), node_pool()]
    state = cluster_state(objects)
    settings = Settings(solver=FAST)
    assert run(state).cost_after == PRICE_UNIT // 5
    result = consolidate(state, CATALOGUE, Rules(), CONFIG, PROFILE, settings, replace_nodes=True)
    assert result.cost_after == PRICE_UNIT // 10 and drained(result) == {"n0", "n1"}
    (new,) = result.added
    assert (new.template.instance_type.name, new.template.node_pool.name) == ("small", "default") and len(new.pods) == 2
    assert {m.target for m in result.moves} == {new.name} and result.bound <= result.cost_after
    doc = result.to_dict()["consolidate"]
    assert doc["add"][0]["instanceType"] == "small" and doc["costPerHourAfter"] == 0.1


def test_replace_without_a_nodepool_is_bad_input(tmp_path: Path) -> None:
    objects = [o for o in fragmented_objects() if o["kind"] != "NodePool"]
    for o in objects:
        o["metadata"].get("labels", {}).pop("karpenter.sh/nodepool", None)
    cluster, prices = files(tmp_path, objects)
    result = invoke(cluster, "--catalogue", prices, "--replace")
    assert result.exit_code == 2 and result.stderr.count("\n") == 1 and "--replace needs" in result.stderr
    missing = invoke(cluster, "--replace")
    assert missing.exit_code == 2 and "--replace needs the instance types" in missing.stderr


def test_an_interrupted_apply_deletes_nothing_and_uncordons() -> None:
    state = fragmented()
    result = run(state)
    cluster = FakeCluster(state)

    def interrupted(namespace: str, name: str, uid: str, dry_run: bool = False) -> None:
        raise KeyboardInterrupt

    cluster.evict = interrupted  # type: ignore[method-assign]
    report = drain_nodes(cluster, result.drain, result.moves)
    assert report.removed == 0 and not report.complete and report.to_dict()["stopped"] == "interrupted"
    assert not [c for c in cluster.calls if c[0].startswith("delete")]
    assert sorted(c[1] for c in cluster.calls if c[0] == "uncordon") == sorted(drained(result))
