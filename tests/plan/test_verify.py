"""plan.verify: each hard rule, a placement that passes and one that is refused."""

from __future__ import annotations

import ast
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from kubeplace.kube.objects import (
    CPU,
    GPU,
    MEMORY,
    PODS,
    HostPort,
    Node,
    Pod,
    Requirement,
    SelectorTerm,
    Snapshot,
    Taint,
    Toleration,
)
from kubeplace.models.plugins.dynamic_resources import verify as dynamic_resources_verify
from kubeplace.models.plugins.inter_pod_affinity import verify as affinity_verify
from kubeplace.models.plugins.tenant import TenantArgs
from kubeplace.models.plugins.topology_spread import verify as spread_verify
from kubeplace.models.plugins.volume_binding import verify as volume_binding_verify
from kubeplace.plan import verify as verify_module
from kubeplace.plan.verify import VerifySettings, Violation, rule_checks, verify

GiB = 1024**3


def node(name: str = "n1", *, cpu: int = 4000, labels: Mapping[str, str] | None = None, **kw: Any) -> Node:
    allocatable = {CPU: cpu, MEMORY: 8 * GiB, PODS: 10, **kw.pop("allocatable", {})}
    return Node(name=name, labels=labels or {}, allocatable=allocatable, **kw)


def pod(name: str = "p", *, cpu: int = 500, ns: str = "default", **kw: Any) -> Pod:
    requests = {CPU: cpu, PODS: 1, **kw.pop("requests", {})}
    return Pod(namespace=ns, name=name, requests=requests, **kw)


def running(name: str, on: str = "n1", **kw: Any) -> Pod:
    kw.setdefault("phase", "Running")
    return pod(name, node_name=on, **kw)


def term(*expressions: Requirement, fields: Sequence[Requirement] = ()) -> SelectorTerm:
    return SelectorTerm(match_expressions=tuple(expressions), match_fields=tuple(fields))


def tol(key: str, value: str = "", effect: str = "", operator: str = "Equal") -> Toleration:
    return Toleration(key=key, operator=operator, value=value, effect=effect)


def tenant(**args: Any) -> VerifySettings:
    """The default settings with these Tenant args."""
    return VerifySettings(rules=rule_checks(args={"Tenant": TenantArgs(**args)}))


@dataclass
class Case:
    id: str
    pending: Sequence[Pod]
    nodes: Sequence[Node] = (node(),)
    bound: Sequence[Pod] = ()
    placements: Sequence[tuple[str, str, str]] | None = None  # default: every pending pod on n1
    expected: Sequence[str] = ()  # rule names, in order; empty means the plan is valid
    settings: VerifySettings = field(default_factory=VerifySettings)
    namespace_labels: Mapping[str, Mapping[str, str]] = field(default_factory=dict)
    extra_checks: Sequence[Callable[[Pod, Node], str | None]] = ()


def broken_check(pod: Pod, node: Node) -> str | None:
    raise RuntimeError("plugin bug")


tainted = node(taints=(Taint("gpu", "a100", "NoSchedule"),))
no_execute = node(taints=(Taint("dedicated", "db", "NoExecute"), Taint("soft", "x", "PreferNoSchedule")))
zone = node(labels={"zone": "a", "cores": "16"})
gpu_node = node(labels={"nvidia.com/gpu.product": "A100"}, allocatable={GPU: 2})

CASES = [
    # Pending: the plan may only place pending pods, once each, on known nodes.
    Case("pending pod on a known node", [pod()]),
    Case("unknown pod", [pod()], placements=[("default", "ghost", "n1")], expected=["Pending"]),
    Case("pod placed twice", [pod()], placements=[("default", "p", "n1")] * 2, expected=["Pending"]),
    Case("unknown node", [pod()], placements=[("default", "p", "nope")], expected=["NodeName"]),
    Case("already bound", [pod(node_name="n2")], expected=["Pending"]),
    Case("being deleted", [pod(deleting=True)], expected=["Pending"]),
    Case("scheduling gates", [pod(scheduling_gates=("wait",))], expected=["SchedulingGates"]),
    Case("unmodelled rules", [pod(unmodelled=("required pod affinity",))], expected=["Unmodelled"]),
    # NodeUnschedulable
    Case("cordoned node", [pod()], nodes=[node(unschedulable=True)], expected=["NodeUnschedulable"]),
    Case(
        "cordoned node, tolerated",
        [pod(tolerations=(tol("node.kubernetes.io/unschedulable", effect="NoSchedule", operator="Exists"),))],
        nodes=[node(unschedulable=True)],
    ),
    # NodeAffinity: nodeSelector and required terms
    Case("nodeSelector matches", [pod(node_selector={"zone": "a"})], nodes=[zone]),
    Case("nodeSelector differs", [pod(node_selector={"zone": "b"})], nodes=[zone], expected=["NodeAffinity"]),
    Case("In matches", [pod(required_terms=(term(Requirement("zone", "In", ("a", "b"))),))], nodes=[zone]),
    Case(
        "terms ORed, second matches",
        [
            pod(
                required_terms=(
                    term(Requirement("zone", "In", ("b",))),
                    term(Requirement("cores", "Gt", ("8",))),
                )
            )
        ],
        nodes=[zone],
    ),
    Case(
        "expressions ANDed, one fails",
        [pod(required_terms=(term(Requirement("zone", "In", ("a",)), Requirement("gpu", "Exists")),))],
        nodes=[zone],
        expected=["NodeAffinity"],
    ),
    Case(
        "empty term matches nothing", [pod(required_terms=(term(),))], nodes=[zone], expected=["NodeAffinity"]
    ),
    Case("NotIn with missing label", [pod(required_terms=(term(Requirement("gpu", "NotIn", ("x",))),))]),
    Case(
        "DoesNotExist",
        [pod(required_terms=(term(Requirement("zone", "DoesNotExist")),))],
        nodes=[zone],
        expected=["NodeAffinity"],
    ),
    Case(
        "Lt with non-integer value",
        [pod(required_terms=(term(Requirement("zone", "Lt", ("9",))),))],
        nodes=[zone],
        expected=["NodeAffinity"],
    ),
    Case(
        "Gt with missing label",
        [pod(required_terms=(term(Requirement("gpus", "Gt", ("0",))),))],
        expected=["NodeAffinity"],
    ),
    Case(
        "matchFields name In",
        [pod(required_terms=(term(fields=[Requirement("metadata.name", "In", ("n1",))]),))],
    ),
    Case(
        "matchFields name NotIn",
        [pod(required_terms=(term(fields=[Requirement("metadata.name", "NotIn", ("n1",))]),))],
        expected=["NodeAffinity"],
    ),
    # TaintToleration
    Case("untolerated NoSchedule", [pod()], nodes=[tainted], expected=["TaintToleration"]),
    Case("tolerated by Equal", [pod(tolerations=(tol("gpu", "a100", "NoSchedule"),))], nodes=[tainted]),
    Case(
        "Equal with another value",
        [pod(tolerations=(tol("gpu", "h100"),))],
        nodes=[tainted],
        expected=["TaintToleration"],
    ),
    Case(
        "Exists with empty key tolerates all",
        [pod(tolerations=(tol("", operator="Exists"),))],
        nodes=[tainted],
    ),
    Case(
        "effect must match",
        [pod(tolerations=(tol("gpu", effect="NoExecute", operator="Exists"),))],
        nodes=[tainted],
        expected=["TaintToleration"],
    ),
    Case(
        "NoExecute untolerated, PreferNoSchedule ignored",
        [pod()],
        nodes=[no_execute],
        expected=["TaintToleration"],
    ),
    # NodePorts
    Case("different ports", [pod("a", host_ports=(HostPort(80),)), pod("b", host_ports=(HostPort(81),))]),
    Case(
        "same port, different protocol",
        [pod("a", host_ports=(HostPort(53),)), pod("b", host_ports=(HostPort(53, "UDP"),))],
    ),
    Case(
        "same port, different host IPs",
        [
            pod("a", host_ports=(HostPort(80, ip="10.0.0.1"),)),
            pod("b", host_ports=(HostPort(80, ip="10.0.0.2"),)),
        ],
    ),
    Case(
        "two placements share a port",
        [pod("a", host_ports=(HostPort(80),)), pod("b", host_ports=(HostPort(80, ip="10.0.0.2"),))],
        expected=["NodePorts"],
    ),
    Case(
        "port used by a bound pod",
        [pod(host_ports=(HostPort(80, ip="0.0.0.0"),))],
        bound=[running("web", host_ports=(HostPort(80),))],
        expected=["NodePorts"],
    ),
    Case(
        "port used by a pod on another node",
        [pod(host_ports=(HostPort(80),))],
        bound=[running("web", on="n2", host_ports=(HostPort(80),))],
    ),
    # Tenant
    Case(
        "tenant node, same tenant by trusted pod label",
        [pod(labels={"tenant": "a"})],
        nodes=[node(labels={"tenant": "a"})],
        settings=tenant(trustPodTenant=True),
    ),
    Case(
        "tenant node, pod label not trusted",
        [pod(labels={"tenant": "a"})],
        nodes=[node(labels={"tenant": "a"})],
        expected=["Tenant"],
    ),
    Case(
        "tenant node, other tenant",
        [pod(annotations={"tenant": "b"})],
        nodes=[node(labels={"tenant": "a"})],
        expected=["Tenant"],
        settings=tenant(trustPodTenant=True),
    ),
    Case(
        "pod label never overrides its namespace's tenant",
        [pod(ns="team", labels={"tenant": "b"})],
        nodes=[node(labels={"tenant": "b"})],
        namespace_labels={"team": {"tenant": "a"}},
        expected=["Tenant"],
        settings=tenant(trustPodTenant=True),
    ),
    Case("tenant node, untenanted pod", [pod()], nodes=[node(labels={"tenant": "a"})], expected=["Tenant"]),
    Case(
        "tenant from namespace label",
        [pod(ns="team")],
        nodes=[node(labels={"tenant": "a"})],
        namespace_labels={"team": {"tenant": "a"}},
    ),
    Case(
        "namespace is tenant",
        [pod(ns="a")],
        nodes=[node(labels={"tenant": "a"})],
        settings=tenant(namespaceIsTenant=True),
    ),
    Case("shared untenanted node", [pod(labels={"tenant": "a"})]),
    Case(
        "closed untenanted node",
        [pod(labels={"tenant": "a"})],
        expected=["Tenant"],
        settings=tenant(untenantedNodes="closed", trustPodTenant=True),
    ),
    Case(
        "closed untenanted node, untrusted pod label",
        [pod(labels={"tenant": "a"})],
        settings=tenant(untenantedNodes="closed"),
    ),
    Case(
        "closed untenanted node, untenanted pod", [pod()], settings=tenant(untenantedNodes="closed")
    ),
    Case(
        "tenant check off",
        [pod()],
        nodes=[node(labels={"tenant": "a"})],
        settings=VerifySettings(rules=tuple(c for c in rule_checks() if c.name != "Tenant")),
    ),
    # GPUModel
    Case(
        "GPU model among alternatives",
        [pod(annotations={"kubeplace.io/gpu-model": "H100|A100"})],
        nodes=[gpu_node],
    ),
    Case(
        "GPU model differs",
        [pod(annotations={"kubeplace.io/gpu-model": "H100"})],
        nodes=[gpu_node],
        expected=["GPUModel"],
    ),
    Case(
        "GPU model on a node without GPUs",
        [pod(annotations={"kubeplace.io/gpu-model": "A100"})],
        expected=["GPUModel"],
    ),
    Case("empty GPU model annotation", [pod(annotations={"kubeplace.io/gpu-model": " "})]),
    # NodeResourcesFit
    Case("fits exactly", [pod("a", cpu=2000), pod("b", cpu=1000)], bound=[running("web", cpu=1000)]),
    Case(
        "cpu overflows with bound pods",
        [pod("a", cpu=2000), pod("b", cpu=1000)],
        bound=[running("web", cpu=1500)],
        expected=["NodeResourcesFit"],
    ),
    Case(
        "finished bound pods free their capacity",
        [pod(cpu=4000)],
        bound=[running("done", cpu=4000, phase="Succeeded")],
    ),
    Case("extended resource fits", [pod(requests={GPU: 2})], nodes=[gpu_node]),
    Case(
        "extended resource missing from allocatable", [pod(requests={GPU: 1})], expected=["NodeResourcesFit"]
    ),
    Case(
        "pod count",
        [pod(f"p{i}", cpu=0) for i in range(3)],
        nodes=[node(allocatable={PODS: 2})],
        expected=["NodeResourcesFit"],
    ),
    Case(
        "cpu and memory both overflow",
        [pod(cpu=5000, requests={MEMORY: 9 * GiB})],
        expected=["NodeResourcesFit", "NodeResourcesFit"],
    ),
    # extra checks (plugins)
    Case("extra check passes", [pod()], extra_checks=[lambda p, n: None]),
    Case("extra check refuses", [pod()], extra_checks=[lambda p, n: "no"], expected=["ExtraCheck"]),
    Case("extra check raises", [pod()], extra_checks=[broken_check], expected=["ExtraCheck"]),
]


@pytest.mark.parametrize("case", CASES, ids=[case.id for case in CASES])
def test_rule(case: Case) -> None:
    snapshot = Snapshot(
        nodes=tuple(case.nodes),
        pending=tuple(case.pending),
        bound=tuple(case.bound),
        namespace_labels=case.namespace_labels,
    )
    placements = case.placements
    if placements is None:
        placements = [(p.namespace, p.name, "n1") for p in case.pending]
    violations = verify(snapshot, placements, case.settings, case.extra_checks)
    assert [v.rule for v in violations] == list(case.expected), [str(v) for v in violations]


def test_capacity_message_names_node_resource_and_pods() -> None:
    snapshot = Snapshot(nodes=(node("node-3"),), pending=(pod("web-1", cpu=4000), pod("web-2")), bound=())
    placements = [("default", "web-1", "node-3"), ("default", "web-2", "node-3")]
    [violation] = verify(snapshot, placements)
    assert violation == Violation("default", "web-1", "node-3", "NodeResourcesFit", violation.detail)
    assert str(violation).startswith("default/web-1 -> node-3: Insufficient cpu: needs 500m more than free")
    assert "default/web-1, default/web-2" in violation.detail


def test_port_conflict_names_the_other_pod() -> None:
    snapshot = Snapshot(
        nodes=(node(),),
        pending=(pod(host_ports=(HostPort(80),)),),
        bound=(running("web", host_ports=(HostPort(80),)),),
    )
    [violation] = verify(snapshot, [("default", "p", "n1")])
    assert str(violation) == "default/p -> n1: host port TCP/80 already used by default/web"


def _imports(module: object) -> set[str]:
    tree = ast.parse(Path(str(getattr(module, "__file__", ""))).read_text())
    imported = {node.module or "" for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
    return imported | {alias.name for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names}


@pytest.mark.parametrize(("module", "kubeplace_imports"), [
    (verify_module, {"kubeplace.kube.objects", "kubeplace.kube.storage_objects", "kubeplace.kube.dra",
                     "kubeplace.kube.plan_view", "kubeplace.kube.gpu_conventions", "kubeplace.kube.replay",
                     "kubeplace.models.plugins", "kubeplace.models.rules"}),
    (volume_binding_verify, {"kubeplace.kube.objects", "kubeplace.kube.storage_objects", "kubeplace.kube.plan_view",
                             "kubeplace.models.plugins.node_affinity.verify"}),
    (spread_verify, {"kubeplace.kube.objects", "kubeplace.kube.replay",
                     "kubeplace.models.plugins.taint_toleration.verify",
                     "kubeplace.models.plugins.node_affinity.verify"}),
    (affinity_verify, {"kubeplace.kube.objects", "kubeplace.kube.replay",
                       "kubeplace.models.plugins.node_affinity.verify"}),
    (dynamic_resources_verify, {"kubeplace.kube.objects", "kubeplace.kube.dra", "kubeplace.kube.device_cel",
                                "kubeplace.kube.plan_view", "kubeplace.models.plugins.node_affinity.verify"}),
])  # fmt: skip
def test_verifier_is_independent_of_models_and_solver(module: object, kubeplace_imports: set[str]) -> None:
    """The checks import only kube objects and the rules' own verifier checks (which import only
    kubeplace.kube: tests/test_structure.py); the registry and the rule descriptors only to find
    the enabled rules' checks."""
    imported = _imports(module)
    assert {name.split(".")[0] for name in imported} <= {"__future__", "collections", "dataclasses", "re", "typing",
                                                         "kubeplace"}
    assert {name for name in imported if name.startswith("kubeplace")} == kubeplace_imports


def test_device_check_looks_bound_pods_up_by_node_instead_of_searching_them_for_every_node() -> None:
    """verify_devices on 10,000 nodes and 10,000 bound pods: the old walk of every bound pod for
    every node (10^8 steps) took many seconds; a lookup takes milliseconds."""
    import time

    from kubeplace.plan.verify_gpu import verify_devices

    nodes = tuple(node(f"n{i}") for i in range(10_000))
    bound = tuple(pod(f"b{i}", node_name=f"n{i}") for i in range(10_000))
    pending = (pod("p"),)
    snap = Snapshot(nodes=nodes, pending=pending, bound=bound)
    started = time.perf_counter()
    assert verify_devices(snap, [("default", "p", "n7", ())]) == []
    assert time.perf_counter() - started < 0.5


def test_a_plan_is_checked_in_time_that_grows_with_plan_plus_cluster_not_their_product() -> None:
    """2,000 placements beside 10,000 running pods: the running pods' anti-affinity, host ports
    and capacity were searched for every placement (2 x 10^7 steps, many seconds)."""
    import time

    nodes = tuple(node(f"n{i}", cpu=64_000, allocatable={PODS: 110}) for i in range(1000))
    bound = tuple(pod(f"b{i}", node_name=f"n{i % 1000}") for i in range(10_000))
    pending = tuple(pod(f"p{i}") for i in range(2000))
    snap = Snapshot(nodes=nodes, pending=pending, bound=bound)
    started = time.perf_counter()
    assert verify(snap, [("default", f"p{i}", f"n{i % 1000}") for i in range(2000)]) == []
    assert time.perf_counter() - started < 1.5
