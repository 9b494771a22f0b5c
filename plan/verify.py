"""Independent verification of a plan before anything is bound.

Every proposed placement is re-checked, pod by pod, against each hard constraint of
``placement-rules.md`` and against the snapshot's free capacity. The rules are written
out plainly here and on purpose share no code with ``models/`` or ``solver/`` (which
compute eligibility vectorised): a bug in one is caught by the other. Only
``kube.objects`` may be imported. A plan with any :class:`Violation` must be refused.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass

from kubeplace.kube.objects import (
    CPU,
    NO_EXECUTE,
    NO_SCHEDULE,
    PODS,
    ClaimChoice,
    GangKey,
    HostPort,
    Node,
    Pod,
    Requirement,
    Snapshot,
)
from kubeplace.plan.verify_volumes import VOLUME_RULES, verify_volumes

ExtraCheck = Callable[[Pod, Node], str | None]

UNSCHEDULABLE_TAINT_KEY = "node.kubernetes.io/unschedulable"
_INTEGER = re.compile(r"[+-]?[0-9]+")  # what Go's strconv.ParseInt accepts in base 10
_EVERY_ADDRESS = ("", "0.0.0.0")


@dataclass(frozen=True)
class VerifySettings:
    tenant_node_label: str = "tenant"
    tenant_pod_label: str = "tenant"
    tenant_namespace_label: str = "tenant"
    namespace_is_tenant: bool = False
    trust_pod_tenant: bool = False
    """The pod's own tenant label/annotation counts, only in a namespace without a tenant."""
    untenanted_nodes: str = "shared"  # or "closed": untenanted nodes take only untenanted pods
    gpu_model_node_label: str = "nvidia.com/gpu.product"
    gpu_model_pod_annotation: str = "kubeplace.io/gpu-model"
    check_tenant: bool = True
    check_gpu_model: bool = True
    volume_rules: frozenset[str] = VOLUME_RULES
    """Which of the volume plugins' rules to check (those the profile enables)."""
    gpu_device_resource: str = "nvidia.com/gpu"
    """Counts devices (and, with HAMi, vGPU slots); the node label ``<it>.count`` counts the
    physical devices behind the slots, ``<it>.replicas`` > 1 says every slot is a time slice."""
    gpu_percent_per_device: tuple[str, ...] = ("nvidia.com/gpucores", "nvidia.com/gpumem-percentage")
    gpu_percent_of_gpus: tuple[str, ...] = ("koordinator.sh/gpu-core", "koordinator.sh/gpu-memory-ratio")


@dataclass(frozen=True)
class Violation:
    namespace: str
    name: str
    node: str
    rule: str
    detail: str

    def __str__(self) -> str:
        return f"{self.namespace}/{self.name} -> {self.node}: {self.detail}"


def verify(
    snapshot: Snapshot,
    placements: Sequence[tuple[str, str, str]],
    settings: VerifySettings = VerifySettings(),
    extra_checks: Sequence[ExtraCheck] = (),
    volume_choices: Mapping[tuple[str, str], Sequence[ClaimChoice]] | None = None,
) -> list[Violation]:
    """All the reasons why ``placements`` ((namespace, name, node_name) triples) must not be
    bound; an empty list means the plan is valid. ``volume_choices`` (the volumes the plan binds
    the pods' unbound claims to) are checked when given, else that such volumes exist."""
    checker = _Checker(snapshot, settings, extra_checks)
    violations: list[Violation] = []
    for namespace, name, node_name in placements:
        violations.extend(
            Violation(namespace, name, node_name, rule, detail)
            for rule, detail in checker.place(namespace, name, node_name)
        )
    for node_name, pods in checker.placed.items():
        violations.extend(_capacity(checker.nodes[node_name], pods, snapshot.bound))
    violations.extend(_gang_topology(snapshot, placements))
    violations.extend(Violation(*finding) for finding in verify_volumes(snapshot, placements, volume_choices,
                                                                       settings.volume_rules))
    return violations


_GANG_LABELS = ("scheduling.x-k8s.io/pod-group", "pod-group.scheduling.sigs.k8s.io", "kubeplace.io/gang")
_GANG_ANNOTATION = "scheduling.k8s.io/group-name"


def _gang_name(pod: Pod) -> str:
    """The pod's gang as the schedulers define it: a member label, or Volcano's annotation."""
    for label in _GANG_LABELS[:2]:
        if pod.labels.get(label):
            return pod.labels[label]
    return pod.annotations.get(_GANG_ANNOTATION) or pod.labels.get(_GANG_LABELS[2], "")


def _gang_topology(snapshot: Snapshot, placements: Sequence[tuple[str, str, str]]) -> Iterator[Violation]:
    """A gang with a topology key runs on nodes with one value of that label: running
    members (first) and placed ones share the value; a placed member on a node without the
    label, or with another value than the first member's, is a violation."""
    keys = {g.key: g.topology_key for g in snapshot.pod_groups if g.topology_key}
    if not keys:
        return
    pending = {(pod.namespace, pod.name): pod for pod in snapshot.pending}
    nodes = {node.name: node for node in snapshot.nodes}
    first: dict[GangKey, str] = {}
    for pod in snapshot.bound:
        gang = GangKey(pod.namespace, _gang_name(pod))
        if gang in keys and pod.node_name in nodes:
            first.setdefault(gang, nodes[pod.node_name].labels.get(keys[gang], ""))
    for namespace, name, node_name in placements:
        member, node = pending.get((namespace, name)), nodes.get(node_name)
        if node is None or member is None or (placed := GangKey(namespace, _gang_name(member))) not in keys:
            continue
        key = keys[placed]
        value = node.labels.get(key)
        want = first.setdefault(placed, value or "")
        if value is None:
            yield Violation(namespace, name, node_name, "GangTopology", f"gang {placed.name}: node has no label {key}")
        elif value != want:
            yield Violation(namespace, name, node_name, "GangTopology",
                            f"gang {placed.name}: {key}={value}, other members in {key}={want or '(no label)'}")


class _Checker:
    """Walks the plan in order, remembering which pods went where."""

    def __init__(
        self, snapshot: Snapshot, settings: VerifySettings, extra_checks: Sequence[ExtraCheck]
    ) -> None:
        self.snapshot, self.settings, self.extra_checks = snapshot, settings, extra_checks
        self.pending = {(pod.namespace, pod.name): pod for pod in snapshot.pending}
        self.nodes = {node.name: node for node in snapshot.nodes}
        self.seen: set[tuple[str, str]] = set()
        self.placed: dict[str, list[Pod]] = {}  # node name -> pods placed there, in plan order

    def place(self, namespace: str, name: str, node_name: str) -> list[tuple[str, str]]:
        """(rule, detail) for each problem of this one placement."""
        pod = self.pending.get((namespace, name))
        if pod is None:
            return [("Pending", "not one of the snapshot's pending pods")]
        if (namespace, name) in self.seen:
            return [("Pending", "placed more than once")]
        self.seen.add((namespace, name))
        problems = list(_pod_state(pod))
        node = self.nodes.get(node_name)
        if node is None:
            return [*problems, ("NodeName", "no such node in the snapshot")]
        problems += _pair_rules(pod, node, self.snapshot, self.settings, self.extra_checks)
        here = self.placed.setdefault(node_name, [])
        problems += (("NodePorts", d) for d in _port_conflicts(pod, node, self.snapshot.bound, here))
        here.append(pod)
        return problems


def _pod_state(pod: Pod) -> Iterator[tuple[str, str]]:
    if pod.unmodelled:
        yield "Unmodelled", f"left to default scheduler: {', '.join(pod.unmodelled)}"
    if pod.scheduling_gates:
        yield "SchedulingGates", f"has scheduling gates: {', '.join(pod.scheduling_gates)}"
    if pod.deleting:
        yield "Pending", "is being deleted"
    if pod.node_name:
        yield "Pending", f"already bound to {pod.node_name}"
    if pod.finished:
        yield "Pending", f"has finished (phase {pod.phase})"


def _pair_rules(
    pod: Pod, node: Node, snapshot: Snapshot, settings: VerifySettings, extra_checks: Sequence[ExtraCheck]
) -> Iterator[tuple[str, str]]:
    if node.unschedulable and not _tolerates(pod, UNSCHEDULABLE_TAINT_KEY, "", NO_SCHEDULE):
        yield "NodeUnschedulable", "node is unschedulable (cordoned)"
    for key, value in pod.node_selector.items():
        if node.labels.get(key) != value:
            yield "NodeAffinity", f"nodeSelector {key}={value}: node has {key}={node.labels.get(key)}"
    if pod.required_terms is not None and not any(
        _term_matches(term.match_expressions, term.match_fields, node) for term in pod.required_terms
    ):
        yield "NodeAffinity", "no required node affinity term matches the node"
    for taint in node.taints:
        hard = taint.effect in (NO_SCHEDULE, NO_EXECUTE)
        if hard and not _tolerates(pod, taint.key, taint.value, taint.effect):
            yield "TaintToleration", f"untolerated taint {taint.key}={taint.value}:{taint.effect}"
    if settings.check_tenant:
        yield from _tenant(pod, node, snapshot, settings)
    if settings.check_gpu_model:
        yield from _gpu_model(pod, node, settings)
    yield from _existing_anti_affinity(pod, node, snapshot)
    for check in extra_checks:
        try:
            reason = check(pod, node)
        except Exception as error:  # refuse the plan rather than bind past a broken check
            name = getattr(check, "__name__", type(check).__name__)
            reason = f"check {name} raised {type(error).__name__}: {error}"
        if reason is not None:
            yield "ExtraCheck", reason


def _existing_anti_affinity(pod: Pod, node: Node, snapshot: Snapshot) -> Iterator[tuple[str, str]]:
    """A running pod's required anti-affinity term that matches ``pod`` forbids every node in
    the running pod's topology domain (same value of the term's topology key)."""
    nodes = {n.name: n for n in snapshot.nodes}
    for other in snapshot.bound:
        home = nodes.get(other.node_name)
        if home is None or other.finished:
            continue
        for term in other.anti_affinity:
            domain = home.labels.get(term.topology_key)
            if domain is None or node.labels.get(term.topology_key) != domain:
                continue
            scope = term.all_namespaces or pod.namespace in (term.namespaces or (other.namespace,))
            if scope and all(_label_requirement(r, pod.labels.get(r.key)) for r in term.selector):
                yield ("InterPodAntiAffinity",
                       f"{other.namespace}/{other.name} forbids {term.topology_key}={domain} to pods like this one")


def _label_requirement(r: Requirement, value: str | None) -> bool:
    if r.operator == "In":
        return value is not None and value in r.values
    if r.operator == "NotIn":
        return value is None or value not in r.values
    if r.operator == "Exists":
        return value is not None
    if r.operator == "DoesNotExist":
        return value is None
    return False


def _tolerates(pod: Pod, key: str, value: str, effect: str) -> bool:
    """toleration.go ToleratesTaint, for any of the pod's tolerations."""
    for toleration in pod.tolerations:
        if toleration.effect and toleration.effect != effect:
            continue
        if not toleration.key:
            if toleration.operator == "Exists":
                return True
            continue
        if toleration.key != key:
            continue
        if toleration.operator == "Exists":
            return True
        if toleration.operator in ("Equal", "") and toleration.value == value:
            return True
    return False


def _term_matches(expressions: Sequence[Requirement], fields: Sequence[Requirement], node: Node) -> bool:
    if not expressions and not fields:
        return False  # an empty term matches nothing
    for requirement in expressions:
        if not _requirement_holds(requirement, node.labels.get(requirement.key)):
            return False
    for requirement in fields:
        if requirement.key != "metadata.name" or requirement.operator not in ("In", "NotIn"):
            return False
        if not _requirement_holds(requirement, node.name):
            return False
    return True


def _requirement_holds(requirement: Requirement, value: str | None) -> bool:
    operator, values = requirement.operator, requirement.values
    if operator == "In":
        return value is not None and value in values
    if operator == "NotIn":
        return value is None or value not in values
    if operator == "Exists":
        return value is not None
    if operator == "DoesNotExist":
        return value is None
    if operator in ("Gt", "Lt"):
        if value is None or len(values) != 1:
            return False
        if not _INTEGER.fullmatch(value) or not _INTEGER.fullmatch(values[0]):
            return False
        return int(value) > int(values[0]) if operator == "Gt" else int(value) < int(values[0])
    return False  # unknown operator: never matches


def _tenant(pod: Pod, node: Node, snapshot: Snapshot, settings: VerifySettings) -> Iterator[tuple[str, str]]:
    """The namespace is the tenant boundary: its label, else (namespace_is_tenant) its name;
    the pod's own label or annotation only where the namespace names no tenant and the
    configuration trusts it."""
    namespace_tenant = snapshot.namespace_labels.get(pod.namespace, {}).get(settings.tenant_namespace_label)
    if namespace_tenant:
        pod_tenant = namespace_tenant
    elif settings.namespace_is_tenant:
        pod_tenant = pod.namespace
    elif settings.trust_pod_tenant:
        pod_tenant = pod.labels.get(settings.tenant_pod_label) or pod.annotations.get(settings.tenant_pod_label) or ""
    else:
        pod_tenant = ""
    node_tenant = node.labels.get(settings.tenant_node_label, "")
    if node_tenant and node_tenant != pod_tenant:
        yield "Tenant", f"node belongs to tenant {node_tenant!r}, pod to {pod_tenant or 'no tenant'!r}"
    elif not node_tenant and pod_tenant and settings.untenanted_nodes != "shared":
        yield "Tenant", f"untenanted node is closed to tenant {pod_tenant!r}"


def _gpu_model(pod: Pod, node: Node, settings: VerifySettings) -> Iterator[tuple[str, str]]:
    wanted = pod.annotations.get(settings.gpu_model_pod_annotation, "")
    models = {model.strip() for model in wanted.split("|") if model.strip()}
    if not models:
        return  # no annotation, or an empty one: any node
    have = node.labels.get(settings.gpu_model_node_label)
    if have not in models:
        yield "GPUModel", f"needs GPU model {' or '.join(sorted(models))}, node has {have or 'none'}"


def _port_conflicts(pod: Pod, node: Node, bound: Sequence[Pod], placed_here: Sequence[Pod]) -> Iterator[str]:
    others = [other for other in bound if other.node_name == node.name and not other.finished]
    for other in [*others, *placed_here]:
        for mine in pod.host_ports:
            for theirs in other.host_ports:
                if _ports_conflict(mine, theirs):
                    yield f"host port {mine.protocol or 'TCP'}/{mine.port} already used by {other.key}"


def _ports_conflict(a: HostPort, b: HostPort) -> bool:
    if a.port != b.port or (a.protocol or "TCP") != (b.protocol or "TCP"):
        return False
    return a.ip == b.ip or a.ip in _EVERY_ADDRESS or b.ip in _EVERY_ADDRESS


def _requests(pod: Pod) -> dict[str, int]:
    requests = dict(pod.requests)
    requests[PODS] = max(requests.get(PODS, 0), 1)  # every pod takes one pod slot
    return requests


def _capacity(node: Node, placed: Sequence[Pod], bound: Sequence[Pod]) -> Iterator[Violation]:
    used: dict[str, int] = {}
    for other in bound:
        if other.node_name == node.name and not other.finished:
            for resource, amount in _requests(other).items():
                used[resource] = used.get(resource, 0) + amount
    added: dict[str, int] = {}
    for pod in placed:
        for resource, amount in _requests(pod).items():
            added[resource] = added.get(resource, 0) + amount
    for resource in sorted(added):
        allocatable = node.allocatable.get(resource, 0)
        free = allocatable - used.get(resource, 0)
        if added[resource] <= 0 or added[resource] <= free:
            continue
        users = [pod for pod in placed if _requests(pod).get(resource, 0) > 0]
        first = users[0]
        yield Violation(
            first.namespace,
            first.name,
            node.name,
            "NodeResourcesFit",
            f"Insufficient {resource}: needs {_amount(resource, added[resource] - free)} more than free "
            f"(allocatable {_amount(resource, allocatable)}, "
            f"bound pods {_amount(resource, used.get(resource, 0))}, "
            f"placed {_amount(resource, added[resource])} by {', '.join(p.key for p in users)})",
        )


def _amount(resource: str, value: int) -> str:
    return f"{value}m" if resource == CPU else str(value)
