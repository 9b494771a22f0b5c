"""Raw Kubernetes objects (camelCase dicts, as in YAML, JSON or the API) -> typed objects.

:func:`build_snapshot` is the single place where a :class:`Snapshot` is assembled, whether the
objects came from files (``kube.files``) or the API (``kube.live``): both sources therefore
give equal snapshots for the same objects, read through ``kube.raw_objects`` (checked, lists
flattened, sorted by kind). Errors are :class:`InputError` naming the source, the object and the field.
"""

from __future__ import annotations

import bisect
import datetime
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, TypeVar

from kubeplace.kube.capacity import capacity_objects
from kubeplace.kube.disruption import parse_disruption_budget
from kubeplace.kube.dra_parse import build_devices, pod_claims
from kubeplace.kube.errors import (
    InputError,
    expect_controller,
    expect_dns1123,
    expect_int,
    expect_list,
    expect_mapping,
    expect_name,
    expect_namespace,
    expect_str,
    expect_string_map,
)
from kubeplace.kube.followers import leader_gang, parse_owners, stand_ins
from kubeplace.kube.gangs import gang_of, kueue_groups, parse_pod_group, plain_groups
from kubeplace.kube.kueue import KIND as KUEUE_KIND
from kubeplace.kube.kueue import gated_stand_ins, parse_workloads
from kubeplace.kube.memo import LastOf
from kubeplace.kube.metrics import KINDS as METRICS_KINDS
from kubeplace.kube.metrics import metrics_objects
from kubeplace.kube.nominated import nominated_elsewhere
from kubeplace.kube.objects import (
    FINISHED,
    GangKey,
    HostPort,
    Node,
    Pod,
    PodGroup,
    Snapshot,
    SpecRule,
)
from kubeplace.kube.pod_affinity import (
    POD_AFFINITY,
    POD_ANTI_AFFINITY,
    preferred_terms,
    required_terms,
    spread_constraints,
)
from kubeplace.kube.quantity import QuantityError, resource_amount
from kubeplace.kube.raw_objects import (
    DISRUPTION_BUDGET,
    NAMESPACE,
    NODE,
    POD,
    POD_GROUPS,
    PRIORITY_CLASS,
    RawObject,
    Sourced,
    by_kind,
    flatten,
    object_label,
)
from kubeplace.kube.requests import extended_requests, is_sidecar, pod_requests
from kubeplace.kube.runtime_classes import RUNTIME_CLASS, RuntimeClass, admitted, is_stored, parse_runtime_classes
from kubeplace.kube.selectors import (
    expect_label_key,
    matches,
    parse_selector,
    preferred_node_affinity,
    required_node_affinity,
)
from kubeplace.kube.storage import build_storage, has_inline_disk, pod_volumes
from kubeplace.kube.taints import parse_taints, parse_tolerations
from kubeplace.kube.workloads import CONTROLLER_KINDS, parse_controller

T = TypeVar("T")

DEFAULT_SCHEDULER = "default-scheduler"
BUILTIN_PRIORITY_CLASSES = {"system-cluster-critical": 2000000000, "system-node-critical": 2000001000}
PREEMPT_LOWER_PRIORITY, PREEMPT_NEVER = "PreemptLowerPriority", "Never"
PREEMPTION_POLICIES = (PREEMPT_LOWER_PRIORITY, PREEMPT_NEVER)


def parse_node(obj: RawObject, source: str = "") -> Node:
    try:
        metadata = expect_mapping(obj.get("metadata"), "metadata")
        spec = expect_mapping(obj.get("spec"), "spec")
        status = expect_mapping(obj.get("status"), "status")
        return Node(
            name=expect_name(metadata),
            uid=expect_str(metadata.get("uid"), "metadata.uid"),
            labels=expect_string_map(metadata.get("labels"), "metadata.labels"),
            taints=parse_taints(spec.get("taints"), "spec.taints"),
            unschedulable=_bool(spec.get("unschedulable"), "spec.unschedulable"),
            allocatable=_allocatable(status.get("allocatable")),
            source=source,
            provider_id=expect_str(spec.get("providerID"), "spec.providerID"),
        )
    except InputError as error:
        raise error.located(file=source, obj=object_label(obj)) from None


def parse_pod(obj: RawObject, source: str = "", priority_classes: Mapping[str, PriorityClass] | None = None) -> Pod:
    """``priority_classes`` (name -> value and preemption policy) resolves ``priorityClassName``
    for pod files that lack ``spec.priority`` or ``spec.preemptionPolicy``, which admission
    would have filled in on a real cluster."""
    try:
        metadata = expect_mapping(obj.get("metadata"), "metadata")
        spec = expect_mapping(obj.get("spec"), "spec")
        status = expect_mapping(obj.get("status"), "status")
        labels = expect_string_map(metadata.get("labels"), "metadata.labels")
        resource_claims, generated_claims = pod_claims(spec, status)
        node_name = _node_name(spec)
        return Pod(
            namespace=expect_namespace(metadata),
            name=expect_name(metadata),
            uid=expect_str(metadata.get("uid"), "metadata.uid"),
            labels=labels,
            annotations=expect_string_map(metadata.get("annotations"), "metadata.annotations"),
            node_name=node_name,
            scheduler_name=expect_str(spec.get("schedulerName"), "spec.schedulerName") or DEFAULT_SCHEDULER,
            priority=_priority(spec, priority_classes or {}, is_stored(obj)),
            preemption_policy=_preemption_policy(spec, priority_classes or {}, is_stored(obj)),
            requests=pod_requests(obj, use_status_resources=bool(node_name)),
            node_selector=_node_selector(spec),
            required_terms=required_node_affinity(spec),
            tolerations=parse_tolerations(spec.get("tolerations"), "spec.tolerations"),
            host_ports=_host_ports(spec),
            anti_affinity=required_terms(spec, labels, POD_ANTI_AFFINITY),
            affinity=required_terms(spec, labels, POD_AFFINITY),
            preferred_affinity=preferred_terms(spec, labels, POD_AFFINITY),
            preferred_anti_affinity=preferred_terms(spec, labels, POD_ANTI_AFFINITY),
            spread=spread_constraints(spec, labels),
            preferred_node_terms=preferred_node_affinity(spec),
            phase=expect_str(status.get("phase"), "status.phase") or "Pending",
            deleting=metadata.get("deletionTimestamp") is not None,
            scheduling_gates=_scheduling_gates(spec.get("schedulingGates")),
            spec_rules=spec_rules(spec),
            volumes=pod_volumes(spec, expect_name(metadata)),
            resource_claims=resource_claims,
            generated_claims=generated_claims,
            container_requests=extended_requests(spec),
            owner_kind=expect_controller(metadata.get("ownerReferences"), "kind") or "",
            owner_name=expect_controller(metadata.get("ownerReferences"), "name") or "",
            owner_api_version=expect_controller(metadata.get("ownerReferences"), "apiVersion") or "",
            creation=_timestamp(metadata.get("creationTimestamp"), "metadata.creationTimestamp"),
            nominated_node=expect_str(status.get("nominatedNodeName"), "status.nominatedNodeName"),
            scheduling_group=expect_str(expect_mapping(spec.get("schedulingGroup"), "spec.schedulingGroup")
                                        .get("podGroupName"), "spec.schedulingGroup.podGroupName"),
            source=source,
        )
    except InputError as error:
        raise error.located(file=source, obj=object_label(obj)) from None


def _admitted_pod(obj: RawObject, source: str, priority_classes: Mapping[str, PriorityClass],
                  runtime_classes: Mapping[str, RuntimeClass]) -> Pod:
    """The pod as the API server would store it: its RuntimeClass merged (``kube.runtime_classes``);
    one whose RuntimeClass is missing is left to the default scheduler with that reason."""
    try:
        merged, missing = admitted(obj, runtime_classes)
    except InputError as error:
        raise error.located(file=source, obj=object_label(obj)) from None
    pod = parse_pod(merged, source, priority_classes)
    return replace(pod, unmodelled=(missing,)) if missing else pod


def _node_selector(spec: Mapping[str, Any]) -> dict[str, str]:
    """``spec.nodeSelector``, its keys label keys (ValidatePodSpec's ValidateLabels)."""
    selector = expect_string_map(spec.get("nodeSelector"), "spec.nodeSelector")
    for key in selector:
        expect_label_key(key, "spec.nodeSelector")
    return selector


def _node_name(spec: RawObject) -> str:
    """``spec.nodeName``: none yet, or a node's name (a DNS-1123 subdomain, as the API server checks it)."""
    name = expect_str(spec.get("nodeName"), "spec.nodeName")
    return expect_dns1123(name, "spec.nodeName") if name else ""


def parse_namespace_labels(obj: RawObject, source: str = "") -> tuple[str, Mapping[str, str]]:
    """A Namespace object -> (name, labels)."""
    try:
        metadata = expect_mapping(obj.get("metadata"), "metadata")
        return expect_name(metadata, label=True), expect_string_map(metadata.get("labels"), "metadata.labels")
    except InputError as error:
        raise error.located(file=source, obj=object_label(obj)) from None


def build_snapshot(
    objects: Iterable[Sourced],
    *,
    scheduler_name: str = "kubeplace",
    namespaces: set[str] | None = None,
    selector: str | None = None,
    source: str = "",
    nodes: Iterable[Node] = (),
    pods: Iterable[Pod] = (),
) -> Snapshot:
    """The snapshot of a set of raw objects, the same whether they came from files or the API.

    ``pending`` holds the pods that are ours to place: no node, not terminating, no scheduling
    gates, not finished, our scheduler name, and in ``namespaces`` (None = all) and matching
    ``selector``. ``bound`` holds every pod with a node in the snapshot that has not finished,
    whatever its scheduler or namespace, since it uses capacity there. Nodes are sorted by
    name and pods by namespace/name, so the order of the input does not matter. ``nodes`` and
    ``pods`` are already typed ones added to those of ``objects`` (``serve`` keeps them typed).
    """
    requirements = parse_selector(selector) if selector else ()
    kinds, skipped = by_kind(flatten(objects))
    builtin = {name: PriorityClass(value, name=name) for name, value in BUILTIN_PRIORITY_CLASSES.items()}
    priority_classes = {**builtin, **_priority_classes(kinds.get(PRIORITY_CLASS, []))}
    nodes, node_names = _UNIQUE_NODES([*nodes, *(parse_node(obj, where) for obj, where in kinds.get(NODE, []))])
    runtime_classes = parse_runtime_classes(kinds.get(RUNTIME_CLASS, []), object_label)
    pods = _unique_pods([*pods, *(_admitted_pod(obj, where, priority_classes, runtime_classes)
                                  for obj, where in kinds.get(POD, []))])
    pending = [  # (the test inline: a call per pod of the cluster costs more than the test)
        pod
        for pod in pods
        if not pod.node_name and not pod.deleting and not pod.scheduling_gates and not pod.finished
        and pod.scheduler_name == scheduler_name
        and (namespaces is None or pod.namespace in namespaces)
        and matches(requirements, pod.labels)
    ]
    bound = [pod for pod in pods if pod.node_name in node_names and pod.phase not in FINISHED]  # (not .finished)
    nominated = nominated_elsewhere(pods, pending, node_names)
    namespace_labels = dict(parse_namespace_labels(obj, where) for obj, where in kinds.get(NAMESPACE, []))
    groups, reserved = _gangs(kinds, pods, pending, bound, nodes)
    node_metrics, pod_metrics = metrics_objects(item for kind in METRICS_KINDS for item in kinds.get(kind, []))
    budgets = [_located(parse_disruption_budget, obj, where) for obj, where in kinds.get(DISRUPTION_BUDGET, [])]
    controllers = [_located(parse_controller, obj, where)
                   for kind in CONTROLLER_KINDS for obj, where in kinds.get(kind, [])]
    node_pools, node_claims, daemon_pods = capacity_objects(
        kinds, nodes, lambda pod, where: parse_pod(pod, where, priority_classes), object_label)
    return Snapshot(
        nodes=tuple(nodes),
        pending=tuple(pending),
        bound=tuple(bound),
        namespace_labels=dict(sorted(namespace_labels.items())),
        pod_groups=tuple(sorted(groups, key=lambda g: g.key)),
        reserved=tuple(reserved),
        disruption_budgets=tuple(sorted(budgets, key=lambda b: (b.namespace, b.name))),
        controllers=tuple(sorted(controllers, key=lambda c: (c.kind, c.namespace, c.name))),
        skipped_kinds=dict(sorted(skipped.items())),
        source=source,
        storage=build_storage(kinds, object_label),
        devices=build_devices(kinds, object_label),
        nominated=tuple(nominated),
        node_metrics=node_metrics,
        pod_metrics=pod_metrics,
        node_pools=node_pools,
        node_claims=node_claims,
        daemon_pods=daemon_pods,
    )



def _gangs(kinds: Mapping[tuple[str, str], list[Sourced]], pods: Sequence[Pod], pending: list[Pod],
           bound: list[Pod], nodes: Sequence[Node]) -> tuple[list[PodGroup], list[Pod]]:
    """Every gang the pods may belong to, and the stand-ins planned in them for pods that do not
    exist yet (followers, ``kube.followers``) or are still gated by Kueue (``kube.kueue``)."""
    sourced = _unique_pod_groups(item for kind in POD_GROUPS for item in kinds.get(kind, []))
    groups = _one_per_group(parse_pod_group(obj, where) for obj, where in sourced)
    groups += plain_groups(pending, {g.key for g in groups})
    leaders = [pod for pod in pending if (key := leader_gang(pod)) is not None and gang_of(pod) == key]
    workloads = parse_workloads(kinds.get(KUEUE_KIND, []), object_label)
    live = [pod for pod in pods if not pod.finished] if leaders or workloads else []  # (else nobody reads them)
    followers, leader_groups = (stand_ins(leaders, live, parse_owners(kinds, object_label), nodes) if leaders
                                else ([], []))
    groups += leader_groups
    gated = gated_stand_ins(live, {n.name: n for n in nodes}, workloads) if workloads else []  # (none gated by Kueue)
    groups += kueue_groups([*pending, *gated], bound, {g.key for g in groups})
    return groups, [*followers, *gated]


def _unique_pod_groups(items: Iterable[Sourced]) -> list[Sourced]:
    """The PodGroup objects, refused when one (apiVersion, namespace, name) comes twice, as the API
    server refuses to create it again; the same object in two versions of its API is not a duplicate."""
    first: dict[tuple[str, str, str], str] = {}
    out = []
    for obj, where in items:
        meta = obj.get("metadata")
        meta = meta if isinstance(meta, Mapping) else {}
        namespace, name = str(meta.get("namespace") or "default"), str(meta.get("name", ""))
        key = (str(obj.get("apiVersion", "")), namespace, name)
        if name and key in first:
            raise InputError(f"duplicate PodGroup (first defined in {first[key]})", file=where,
                             obj=f"PodGroup {namespace}/{name}")
        first[key] = where
        out.append((obj, where))
    return out


def _one_per_group(groups: Iterable[PodGroup]) -> list[PodGroup]:
    """One PodGroup per API group and name: a server serving the Workload API in two versions lists
    each object in both; the readable copy is kept."""
    kept: dict[tuple[str, GangKey], PodGroup] = {}
    for group in groups:
        key = (group.origin, group.key)
        if key not in kept or (kept[key].unreadable and not group.unreadable):
            kept[key] = group
    return list(kept.values())


def _nodes_and_names(nodes: tuple[Node, ...]) -> tuple[tuple[Node, ...], frozenset[str]]:
    unique = tuple(_unique_nodes(nodes))
    return unique, frozenset(node.name for node in unique)


_UNIQUE_NODES: LastOf[tuple[tuple[Node, ...], frozenset[str]]] = LastOf(_nodes_and_names, kept=1)
"""The nodes sorted (InputError on one named twice) and their names, for the last nodes: ``serve``
builds each cycle's snapshot from the same node objects."""


def _unique_nodes(nodes: Iterable[Node]) -> list[Node]:
    by_name: dict[str, Node] = {}
    for node in nodes:
        if node.name in by_name:
            first = by_name[node.name].source
            raise InputError(f"duplicate node (first defined in {first})", file=node.source, obj=f"Node {node.name}")
        by_name[node.name] = node
    return [by_name[name] for name in sorted(by_name)]


@dataclass(frozen=True)
class _Sorted:
    """An answer of :func:`_unique_pods`: its pods by id, their keys sorted, the pods in that order."""

    by_id: dict[int, Pod]
    keys: list[tuple[str, str]]
    pods: list[Pod]


_LAST_SORTED: list[_Sorted] = []
"""The last answer (one: it holds its pods, so an id in it is its pod's)."""
SORTED_CHANGES = 8
"""Up to len(pods) // SORTED_CHANGES pods that came or went, the last answer is updated (else sorted again)."""


def _unique_pods(pods: Iterable[Pod]) -> list[Pod]:
    """The pods sorted by (namespace, name); InputError on the first that comes twice. ``serve``
    builds each cycle's snapshot from nearly the same pod objects: the last answer is updated with
    the few that came and went (told apart by identity), not sorted again."""
    listed = list(pods)
    by_id = dict(zip(map(id, listed), listed, strict=True))
    last = _LAST_SORTED[0] if _LAST_SORTED else None
    found = _updated_order(last, by_id, len(listed)) if last is not None else None
    if found is None:
        found = _sorted_unique(listed, by_id)
    _LAST_SORTED[:] = [found]
    return list(found.pods)


def _updated_order(last: _Sorted, by_id: dict[int, Pod], count: int) -> _Sorted | None:
    """``last`` with the pods that came inserted and those that went taken out; None when many
    changed, or one object comes twice or two pods share a key (sorting again finds which)."""
    if len(by_id) != count:
        return None
    came, went = by_id.keys() - last.by_id.keys(), last.by_id.keys() - by_id.keys()
    if len(came) + len(went) > count // SORTED_CHANGES:
        return None
    keys, pods = list(last.keys), list(last.pods)
    for gone in went:
        pod = last.by_id[gone]
        at = bisect.bisect_left(keys, (pod.namespace, pod.name))
        del keys[at], pods[at]
    for new in came:
        pod = by_id[new]
        key = (pod.namespace, pod.name)
        at = bisect.bisect_left(keys, key)
        if at < len(keys) and keys[at] == key:
            return None
        keys.insert(at, key)
        pods.insert(at, pod)
    return _Sorted(by_id, keys, pods)


def _sorted_unique(listed: list[Pod], by_id: dict[int, Pod]) -> _Sorted:
    by_key: dict[tuple[str, str], Pod] = {}
    for pod in listed:
        key = (pod.namespace, pod.name)
        if key in by_key:
            first = by_key[key].source
            raise InputError(f"duplicate pod (first defined in {first})", file=pod.source, obj=f"Pod {pod.key}")
        by_key[key] = pod
    keys = sorted(by_key)
    return _Sorted(by_id, keys, [by_key[key] for key in keys])


@dataclass(frozen=True)
class PriorityClass:
    value: int
    preemption_policy: str = PREEMPT_LOWER_PRIORITY
    name: str = ""


DEFAULT_PRIORITY_CLASS = ""
"""Where :func:`_priority_classes` files the ``globalDefault`` class too: what priority admission
resolves an empty ``priorityClassName`` to."""


def _priority_classes(objects: Iterable[Sourced]) -> dict[str, PriorityClass]:
    """PriorityClass name -> its value (an int32 as in the API) and preemption policy; the one
    ``globalDefault`` class also under DEFAULT_PRIORITY_CLASS (a second one is refused, as
    priority admission refuses it)."""
    classes: dict[str, PriorityClass] = {}
    for obj, where in objects:
        try:
            name = expect_name(expect_mapping(obj.get("metadata"), "metadata"))
            policy = _policy(obj.get("preemptionPolicy"), "preemptionPolicy")
            found = PriorityClass(expect_int(obj.get("value"), "value"), policy or PREEMPT_LOWER_PRIORITY, name)
            if _bool(obj.get("globalDefault"), "globalDefault"):
                default = classes.get(DEFAULT_PRIORITY_CLASS)
                if default is not None:
                    raise InputError(f"PriorityClass {default.name} is already marked as default. "
                                     "Only one default can exist", field="globalDefault")
                classes[DEFAULT_PRIORITY_CLASS] = found
            classes[name] = found
        except InputError as error:
            raise error.located(file=where, obj=object_label(obj)) from None
    return classes


def _located(parse: Callable[[RawObject], T], obj: RawObject, where: str) -> T:
    try:
        return parse(obj)
    except InputError as error:
        raise error.located(file=where, obj=object_label(obj)) from None


def _bool(raw: object, field: str) -> bool:
    if raw is None:
        return False
    if not isinstance(raw, bool):
        raise InputError(f"{raw!r} is not a boolean", field=field, expected="true or false")
    return raw


def _allocatable(raw: object) -> dict[str, int]:
    amounts = {}
    for resource, value in sorted(expect_mapping(raw, "status.allocatable").items()):
        try:
            amounts[str(resource)] = resource_amount(str(resource), value)
        except QuantityError as error:
            raise InputError(error.problem, field=f"status.allocatable.{resource}", expected=error.expected) from None
    return amounts


def _priority(spec: Mapping[str, Any], priority_classes: Mapping[str, PriorityClass], stored: bool) -> int:
    """``spec.priority``, else its PriorityClass's value (the globalDefault one without a name). A
    pod the API server has not stored yet with a priority its class contradicts is refused, as
    priority admission refuses it."""
    found = priority_classes.get(expect_str(spec.get("priorityClassName"), "spec.priorityClassName"))
    raw = spec.get("priority")
    if raw is None:
        return found.value if found is not None else 0
    priority = expect_int(raw, "spec.priority")
    if found is not None and priority != found.value and not stored:
        raise InputError(f"the integer value of priority ({priority}) must not be provided in pod spec; priority "
                         f"admission controller computed {found.value} from the given PriorityClass name",
                         field="spec.priority")
    return priority


def _preemption_policy(spec: Mapping[str, Any], priority_classes: Mapping[str, PriorityClass], stored: bool) -> str:
    """``spec.preemptionPolicy``, else the PriorityClass's (admission copies it to the pod; it
    refuses a pod not stored yet that sets another)."""
    policy = _policy(spec.get("preemptionPolicy"), "spec.preemptionPolicy")
    found = priority_classes.get(expect_str(spec.get("priorityClassName"), "spec.priorityClassName"))
    if policy and found is not None and policy != found.preemption_policy and not stored:
        raise InputError(f"the string value of PreemptionPolicy ({policy}) must not be provided in pod spec; "
                         f"priority admission controller computed {found.preemption_policy} from the given "
                         "PriorityClass name", field="spec.preemptionPolicy")
    if policy:
        return policy
    return found.preemption_policy if found is not None else PREEMPT_LOWER_PRIORITY


def _policy(raw: object, field: str) -> str:
    policy = expect_str(raw, field)
    if policy and policy not in PREEMPTION_POLICIES:
        raise InputError(f"unknown preemption policy {policy!r}", field=field,
                         expected=" or ".join(PREEMPTION_POLICIES))
    return policy


def _scheduling_gates(raw: object) -> tuple[str, ...]:
    gates = []
    for index, item in enumerate(expect_list(raw, "spec.schedulingGates")):
        gate = expect_mapping(item, f"spec.schedulingGates[{index}]")
        gates.append(expect_str(gate.get("name"), f"spec.schedulingGates[{index}].name"))
    return tuple(gates)


def _timestamp(raw: object, field: str) -> str:
    """RFC 3339 text; YAML turns unquoted timestamps into datetimes, which are turned back."""
    if isinstance(raw, datetime.datetime):
        if raw.tzinfo is not None:
            raw = raw.astimezone(datetime.UTC).replace(tzinfo=None)
        return raw.strftime("%Y-%m-%dT%H:%M:%SZ")
    return expect_str(raw, field)


def _host_ports(spec: Mapping[str, Any]) -> tuple[HostPort, ...]:
    """Host ports of app containers and sidecars (init containers that keep running). A
    ``hostNetwork`` pod's container ports are host ports: the API server defaults a missing
    ``hostPort`` to the ``containerPort`` (``defaultHostNetworkPorts``)."""
    host_network = _bool(spec.get("hostNetwork"), "spec.hostNetwork")
    containers = [
        (f"spec.containers[{index}]", container)
        for index, container in enumerate(expect_list(spec.get("containers"), "spec.containers"))
    ] + [
        (f"spec.initContainers[{index}]", container)
        for index, container in enumerate(expect_list(spec.get("initContainers"), "spec.initContainers"))
        if isinstance(container, Mapping) and is_sidecar(container)
    ]
    found = []
    for field, raw_container in containers:
        container = expect_mapping(raw_container, field)
        for index, raw_port in enumerate(expect_list(container.get("ports"), f"{field}.ports")):
            port = expect_mapping(raw_port, f"{field}.ports[{index}]")
            host_port = port.get("hostPort")
            if host_network and (host_port is None or host_port == 0):
                host_port = _container_port(port, f"{field}.ports[{index}].containerPort")
            if host_port is None or host_port == 0:
                continue
            if isinstance(host_port, bool) or not isinstance(host_port, int) or not 0 < host_port < 65536:
                raise InputError(
                    f"invalid hostPort {host_port!r}",
                    field=f"{field}.ports[{index}].hostPort",
                    expected="1-65535",
                )
            protocol = expect_str(port.get("protocol"), f"{field}.ports[{index}].protocol") or "TCP"
            host_ip = expect_str(port.get("hostIP"), f"{field}.ports[{index}].hostIP")
            found.append(HostPort(port=host_port, protocol=protocol, ip=host_ip))
    return tuple(found)


def _container_port(port: Mapping[str, Any], field: str) -> int:
    """``containerPort``, which the API server requires (1-65535)."""
    number = port.get("containerPort")
    if isinstance(number, bool) or not isinstance(number, int) or not 0 < number < 65536:
        raise InputError(f"invalid containerPort {number!r}", field=field, expected="1-65535")
    return number


def spec_rules(spec: Mapping[str, Any]) -> frozenset[SpecRule]:
    """Which of the rules that only their plugins interpret this spec holds (whether kubeplace
    models them is for those plugins to say, not for the parser)."""
    affinity = expect_mapping(spec.get("affinity"), "spec.affinity")
    found = set()
    for kind, rule in (
        ("podAffinity", SpecRule.REQUIRED_POD_AFFINITY),
        ("podAntiAffinity", SpecRule.REQUIRED_POD_ANTI_AFFINITY),
    ):
        rules = expect_mapping(affinity.get(kind), f"spec.affinity.{kind}")
        if rules.get("requiredDuringSchedulingIgnoredDuringExecution"):
            found.add(rule)
    constraints = expect_list(spec.get("topologySpreadConstraints"), "spec.topologySpreadConstraints")
    if any(
        not isinstance(constraint, Mapping) or constraint.get("whenUnsatisfiable", "DoNotSchedule") != "ScheduleAnyway"
        for constraint in constraints
    ):
        found.add(SpecRule.HARD_TOPOLOGY_SPREAD)
    if spec.get("resourceClaims"):
        found.add(SpecRule.RESOURCE_CLAIMS)
    if has_inline_disk(spec):
        found.add(SpecRule.INLINE_DISKS)
    held = frozenset(found)
    return _RULE_SETS.setdefault(held, held)


_RULE_SETS: dict[frozenset[SpecRule], frozenset[SpecRule]] = {}
"""Each set of rules once (at most 2^5), shared by every pod that holds it: one set per pod
(mostly the empty one) took 20 MiB at 100,000 pods."""
