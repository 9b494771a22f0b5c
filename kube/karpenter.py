"""Karpenter's ``karpenter.sh/v1`` NodePools and NodeClaims, typed and validated as Karpenter's
CRD (OpenAPI patterns, enums and CEL rules of ``pkg/apis/crds``) and its webhook
(``pkg/apis/v1/nodepool_validation.go``, ``nodeclaim_validation.go``) validate them.

A NodePool says which nodes Karpenter may launch: the labels and taints they register with, the
requirements an instance type and offering must meet, ``limits`` on the capacity of all its nodes,
its ``weight`` (higher first) and how it may disrupt them. A NodeClaim is one node launched (or
being launched) for a NodePool; their capacity counts against the NodePool's limits.
Requirements use Karpenter's operators: the node affinity ones and ``Gte``/``Lte``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from kubeplace.kube.errors import (
    INT32_MAX,
    InputError,
    expect_int,
    expect_label_value,
    expect_list,
    expect_mapping,
    expect_name,
    expect_str,
    expect_string_map,
)
from kubeplace.kube.karpenter_disruption import NEVER, cron_schedule, duration_seconds
from kubeplace.kube.metrics import parse_time
from kubeplace.kube.node_selector import Requirement
from kubeplace.kube.objects import (
    NO_EXECUTE,
    NO_SCHEDULE,
    PREFER_NO_SCHEDULE,
    Node,
    NodeClaim,
    NodeClassRef,
    NodePool,
    NodePoolBudget,
    Taint,
)
from kubeplace.kube.quantity import QuantityError, resource_amount
from kubeplace.kube.selectors import DOES_NOT_EXIST, EXISTS, GT, IN, LT, NOT_IN, is_qualified_name

GROUP = "karpenter.sh"
NODE_POOL, NODE_CLAIM = (GROUP, "NodePool"), (GROUP, "NodeClaim")
KINDS = (NODE_POOL, NODE_CLAIM)
"""(API group, kind) of the Karpenter objects a snapshot reads."""

NODEPOOL_LABEL = "karpenter.sh/nodepool"
CAPACITY_TYPE_LABEL = "karpenter.sh/capacity-type"
INSTANCE_TYPE_LABEL = "node.kubernetes.io/instance-type"
ZONE_LABEL = "topology.kubernetes.io/zone"
REGION_LABEL = "topology.kubernetes.io/region"
ARCH_LABEL = "kubernetes.io/arch"
OS_LABEL = "kubernetes.io/os"
HOSTNAME_LABEL = "kubernetes.io/hostname"
WINDOWS_BUILD_LABEL = "node.kubernetes.io/windows-build"
WELL_KNOWN_LABELS = frozenset({NODEPOOL_LABEL, ZONE_LABEL, REGION_LABEL, INSTANCE_TYPE_LABEL, ARCH_LABEL, OS_LABEL,
                               CAPACITY_TYPE_LABEL, WINDOWS_BUILD_LABEL})
"""``v1.WellKnownLabels``: labels Karpenter narrows from NodePools and pods."""
NORMALIZED_LABELS = {
    "failure-domain.beta.kubernetes.io/zone": ZONE_LABEL,
    "beta.kubernetes.io/arch": ARCH_LABEL,
    "beta.kubernetes.io/os": OS_LABEL,
    "beta.kubernetes.io/instance-type": INSTANCE_TYPE_LABEL,
    "failure-domain.beta.kubernetes.io/region": REGION_LABEL,
}
"""``v1.NormalizedLabels``: deprecated aliases Karpenter reads as the stable label."""
CAPACITY_TYPES = ("on-demand", "spot", "reserved")
GTE, LTE = "Gte", "Lte"
OPERATORS = (IN, NOT_IN, EXISTS, DOES_NOT_EXIST, GT, LT, GTE, LTE)
"""``SupportedNodeSelectorOps``."""
INTEGER_OPERATORS = (GT, LT, GTE, LTE)
MAX_REQUIREMENTS, MAX_MIN_VALUES, MAX_BUDGETS = 100, 50, 50
CONSOLIDATION_POLICIES = ("WhenEmpty", "WhenEmptyOrUnderutilized")
DISRUPTION_REASONS = ("Underutilized", "Empty", "Drifted")
DEFAULT_BUDGET_NODES = "10%"
_DURATION = re.compile(r"(([0-9]+(s|m|h))+|Never)")
_BUDGET_NODES = re.compile(r"((100|[0-9]{1,2})%|[0-9]+)")
_BUDGET_DURATION = re.compile(r"((([0-9]+(h|m))|([0-9]+h[0-9]+m))(0s)?)")
_SCHEDULE = re.compile(r"(@(annually|yearly|monthly|weekly|daily|midnight|hourly))|((.+)\s(.+)\s(.+)\s(.+)\s(.+))")


def parse_node_pool(obj: Mapping[str, Any], source: str = "") -> NodePool:
    """One NodePool; InputError naming the field, in Karpenter's words where it has some."""
    metadata = expect_mapping(obj.get("metadata"), "metadata")
    spec = expect_mapping(obj.get("spec"), "spec")
    template = expect_mapping(spec.get("template"), "spec.template")
    template_spec = expect_mapping(template.get("spec"), "spec.template.spec")
    at = "spec.template.spec"
    requirements, min_values = parse_requirements(template_spec.get("requirements"), f"{at}.requirements",
                                                  required=True)
    taints = karpenter_taints(template_spec.get("taints"), f"{at}.taints")
    startup_taints = karpenter_taints(template_spec.get("startupTaints"), f"{at}.startupTaints")
    _unique_taints(taints, startup_taints, at)
    replicas = _optional_int(spec.get("replicas"), "spec.replicas", 0, 2**63 - 1)
    limits = parse_limits(spec.get("limits"), "spec.limits")
    weight = _optional_int(spec.get("weight"), "spec.weight", 1, 100)
    if replicas is not None and weight is not None:
        raise InputError("'weight' is not supported on static NodePools", field="spec.weight")
    if replicas is not None and set(limits) - {"nodes"}:
        raise InputError("only 'limits.nodes' is supported on static NodePools", field="spec.limits")
    disruption = expect_mapping(spec.get("disruption"), "spec.disruption")
    if spec.get("disruption") is None:  # the CRD's default for an absent disruption
        disruption = {"consolidateAfter": "0s"}
    elif disruption.get("consolidateAfter") is None:
        raise InputError("Required value", field="spec.disruption.consolidateAfter",
                         expected='a duration such as "30s" or "Never"')
    return NodePool(
        name=expect_name(metadata),
        labels=template_labels(template.get("metadata")),
        taints=taints,
        startup_taints=startup_taints,
        requirements=requirements,
        min_values=min_values,
        limits=limits,
        weight=weight or 0,
        consolidation_policy=_enum(disruption.get("consolidationPolicy"), "spec.disruption.consolidationPolicy",
                                   CONSOLIDATION_POLICIES) or "WhenEmptyOrUnderutilized",
        consolidate_after=_duration(disruption.get("consolidateAfter"), "spec.disruption.consolidateAfter",
                                    _DURATION) or "0s",
        budgets=parse_budgets(disruption.get("budgets"), "spec.disruption.budgets"),
        node_class_ref=_node_class_ref(template_spec.get("nodeClassRef"), f"{at}.nodeClassRef"),
        expire_after=_duration(template_spec.get("expireAfter"), f"{at}.expireAfter", _DURATION) or "720h",
        replicas=replicas,
        source=source,
    )


def parse_node_claim(obj: Mapping[str, Any], source: str = "") -> NodeClaim:
    """One NodeClaim: its NodePool, what it asked for and, once launched, its capacity."""
    metadata = expect_mapping(obj.get("metadata"), "metadata")
    spec = expect_mapping(obj.get("spec"), "spec")
    status = expect_mapping(obj.get("status"), "status")
    labels = expect_string_map(metadata.get("labels"), "metadata.labels")
    taints = karpenter_taints(spec.get("taints"), "spec.taints")
    startup_taints = karpenter_taints(spec.get("startupTaints"), "spec.startupTaints")
    _unique_taints(taints, startup_taints, "spec")
    resources = expect_mapping(spec.get("resources"), "spec.resources")
    return NodeClaim(
        name=expect_name(metadata),
        node_pool=labels.get(NODEPOOL_LABEL, ""),
        labels=labels,
        requirements=parse_requirements(spec.get("requirements"), "spec.requirements", node_claim=True)[0],
        taints=taints,
        startup_taints=startup_taints,
        requests=parse_limits(resources.get("requests"), "spec.resources.requests"),
        capacity=parse_limits(status.get("capacity"), "status.capacity"),
        allocatable=parse_limits(status.get("allocatable"), "status.allocatable"),
        node_name=expect_str(status.get("nodeName"), "status.nodeName"),
        initialized_at=_initialized_at(status.get("conditions")),
        last_pod_event=None if status.get("lastPodEventTime") in (None, "") else parse_time(
            status.get("lastPodEventTime"), "status.lastPodEventTime"),
        source=source,
        provider_id=expect_str(status.get("providerID"), "status.providerID"),
    )


def _initialized_at(raw: object) -> float | None:
    """When the ``Initialized`` condition turned True (its ``lastTransitionTime``); None while it is not."""
    for index, item in enumerate(expect_list(raw, "status.conditions")):
        condition = expect_mapping(item, f"status.conditions[{index}]")
        if condition.get("type") == "Initialized" and condition.get("status") == "True":
            return parse_time(condition.get("lastTransitionTime"), f"status.conditions[{index}].lastTransitionTime")
    return None


def parse_requirements(raw: object, field: str, *, required: bool = False,
                       node_claim: bool = False) -> tuple[tuple[Requirement, ...], dict[str, int]]:
    """``requirements`` with their ``minValues``, validated by the CRD's rules and
    ``ValidateRequirement``. A NodeClaim may name ``karpenter.sh/nodepool``; a NodePool may not."""
    if raw is None and required:
        raise InputError("Required value", field=field)
    items = expect_list(raw, field)
    if len(items) > MAX_REQUIREMENTS:
        raise InputError(f"Too many: {len(items)}: must have at most {MAX_REQUIREMENTS} items", field=field)
    requirements, min_values = [], {}
    for index, item in enumerate(items):
        at = f"{field}[{index}]"
        requirement, minimum = _requirement(expect_mapping(item, at), at, node_claim)
        requirements.append(requirement)
        if minimum is not None:
            min_values[requirement.key] = minimum
    return tuple(requirements), min_values


def _requirement(raw: Mapping[str, Any], at: str, node_claim: bool) -> tuple[Requirement, int | None]:
    key = expect_str(raw.get("key"), f"{at}.key")
    if not key:
        raise InputError("Required value", field=f"{at}.key")
    key = NORMALIZED_LABELS.get(key, key)
    check_label_key(key, f"{at}.key", allow_nodepool=node_claim)
    operator = _enum(raw.get("operator"), f"{at}.operator", OPERATORS)
    if not operator:
        raise InputError("Required value", field=f"{at}.operator")
    raw_values = expect_list(raw.get("values"), f"{at}.values")
    values = tuple(expect_str(v, f"{at}.values[{i}]") for i, v in enumerate(raw_values))
    for index, value in enumerate(values):
        expect_label_value(value, f"{at}.values[{index}]")
    if operator == IN and not values:
        raise InputError("requirements with operator 'In' must have a value defined", field=f"{at}.values")
    if operator in INTEGER_OPERATORS and (len(values) != 1 or not values[0].isdigit()):
        raise InputError("requirements operator 'Gt', 'Lt', 'Gte', or 'Lte' must have a single positive integer value",
                         field=f"{at}.values")
    minimum = _optional_int(raw.get("minValues"), f"{at}.minValues", 1, MAX_MIN_VALUES)
    if minimum is not None and operator == IN and len(values) < minimum:
        raise InputError("requirements with 'minValues' must have at least that many values specified in the "
                         "'values' field", field=f"{at}.minValues")
    if key == CAPACITY_TYPE_LABEL and operator == IN and not set(values) & set(CAPACITY_TYPES):
        raise InputError(f"no valid values found in {list(values)} for {key}, expected one of: "
                         f"{list(CAPACITY_TYPES)}, got: {list(values)}", field=f"{at}.values")
    return Requirement(key, operator, values), minimum


def check_label_key(key: str, field: str, *, allow_nodepool: bool = False) -> None:
    """A label key a NodePool may set or require: a qualified name outside Karpenter's own domain
    (but for the capacity type) that is not ``kubernetes.io/hostname``."""
    if not is_qualified_name(key):
        raise InputError(f"Invalid value: {key!r}: a qualified name must consist of alphanumeric characters, '-', "
                         "'_' or '.', and must start and end with an alphanumeric character", field=field)
    if key == NODEPOOL_LABEL and not allow_nodepool:
        raise InputError(f'label "{NODEPOOL_LABEL}" is restricted', field=field)
    domain = key.split("/", 1)[0] if "/" in key else ""
    if key not in (CAPACITY_TYPE_LABEL, NODEPOOL_LABEL) and domain.endswith(GROUP):
        raise InputError(f'label domain "{GROUP}" is restricted', field=field)
    if key == HOSTNAME_LABEL:
        raise InputError(f'label "{HOSTNAME_LABEL}" is restricted', field=field)


def template_labels(raw_metadata: object) -> dict[str, str]:
    """``spec.template.metadata.labels`` as ``validateLabels`` and the CRD check them."""
    metadata = expect_mapping(raw_metadata, "spec.template.metadata")
    labels = expect_string_map(metadata.get("labels"), "spec.template.metadata.labels")
    for key, value in labels.items():
        field = f"spec.template.metadata.labels.{key}"
        check_label_key(key, field)
        expect_label_value(value, field)
    return labels


def karpenter_taints(raw: object, field: str) -> tuple[Taint, ...]:
    """Taints as ``validateTaintsField`` checks them: a qualified key, a value that is a
    qualified name too when given, a known effect."""
    taints = []
    for index, item in enumerate(expect_list(raw, field)):
        at = f"{field}[{index}]"
        taint = expect_mapping(item, at)
        key = expect_str(taint.get("key"), f"{at}.key")
        if not key or not is_qualified_name(key):
            raise InputError(f"invalid value: {key!r} is not a qualified name in {field.rsplit('.', 1)[-1]}",
                             field=f"{at}.key")
        value = expect_str(taint.get("value"), f"{at}.value")
        if value and not is_qualified_name(value):
            raise InputError(f"invalid value: {value!r} is not a qualified name in {field.rsplit('.', 1)[-1]}",
                             field=f"{at}.value")
        effect = _enum(taint.get("effect"), f"{at}.effect", (NO_SCHEDULE, PREFER_NO_SCHEDULE, NO_EXECUTE))
        if not effect:
            raise InputError("Required value", field=f"{at}.effect")
        taints.append(Taint(key, value, effect))
    return tuple(taints)


def _unique_taints(taints: Sequence[Taint], startup_taints: Sequence[Taint], at: str) -> None:
    """No key and effect twice across ``taints`` and ``startupTaints``."""
    seen: set[tuple[str, str]] = set()
    for name, group in (("taints", taints), ("startupTaints", startup_taints)):
        for index, taint in enumerate(group):
            if (taint.key, taint.effect) in seen:
                raise InputError(f"duplicate taint Key/Effect pair {taint.key}={taint.effect}",
                                 field=f"{at}.{name}[{index}]")
            seen.add((taint.key, taint.effect))


def parse_limits(raw: object, field: str) -> dict[str, int]:
    """A resource list (``limits``, ``capacity``) in integer units."""
    amounts = {}
    for resource, value in expect_mapping(raw, field).items():
        try:
            amounts[str(resource)] = resource_amount(str(resource), value)
        except QuantityError as error:
            raise InputError(error.problem, field=f"{field}.{resource}", expected=error.expected) from None
    return dict(sorted(amounts.items()))


def parse_budgets(raw: object, field: str) -> tuple[NodePoolBudget, ...]:
    """``disruption.budgets``; the CRD's default (one budget of 10%) when absent."""
    if raw is None:
        return (NodePoolBudget(),)
    items = expect_list(raw, field)
    if len(items) > MAX_BUDGETS:
        raise InputError(f"Too many: {len(items)}: must have at most {MAX_BUDGETS} items", field=field)
    budgets = []
    for index, item in enumerate(items):
        at = f"{field}[{index}]"
        budget = expect_mapping(item, at)
        nodes = budget.get("nodes", DEFAULT_BUDGET_NODES)
        if isinstance(nodes, int) and not isinstance(nodes, bool):
            nodes = str(nodes)
        nodes = _pattern(nodes, f"{at}.nodes", _BUDGET_NODES) or DEFAULT_BUDGET_NODES
        if not nodes.endswith("%") and int(nodes) > INT32_MAX:
            raise InputError(f"{nodes} nodes is more than Karpenter reads (an int32)", field=f"{at}.nodes",
                             expected=f"a count up to {INT32_MAX} or a percentage")
        schedule = _pattern(budget.get("schedule"), f"{at}.schedule", _SCHEDULE)
        duration = _duration(budget.get("duration"), f"{at}.duration", _BUDGET_DURATION)
        if bool(schedule) != bool(duration):
            raise InputError("'schedule' must be set with 'duration'", field=at)
        if schedule:
            try:
                cron_schedule(schedule)
            except InputError as error:
                raise error.located(field_prefix=f"{at}.schedule") from None
        reasons = tuple(_enum(r, f"{at}.reasons[{i}]", DISRUPTION_REASONS)
                        for i, r in enumerate(expect_list(budget.get("reasons"), f"{at}.reasons")))
        budgets.append(NodePoolBudget(nodes, reasons, schedule, duration))
    return tuple(budgets)


def _node_class_ref(raw: object, field: str) -> NodeClassRef:
    if raw is None:
        raise InputError("Required value", field=field)
    ref = expect_mapping(raw, field)
    parts = {}
    for name in ("group", "kind", "name"):
        value = expect_str(ref.get(name), f"{field}.{name}")
        if not value:
            raise InputError(f"{name} may not be empty", field=f"{field}.{name}")
        parts[name] = value
    return NodeClassRef(**parts)


def _enum(raw: object, field: str, allowed: Sequence[str]) -> str:
    value = expect_str(raw, field)
    if value and value not in allowed:
        supported = ", ".join(f'"{v}"' for v in allowed)
        raise InputError(f'Unsupported value: "{value}": supported values: {supported}', field=field)
    return value


def _pattern(raw: object, field: str, pattern: re.Pattern[str]) -> str:
    value = expect_str(raw, field)
    if value and not pattern.fullmatch(value):
        raise InputError(f"Invalid value: \"{value}\": should match '^{pattern.pattern}$'", field=field)
    return value


def _duration(raw: object, field: str, pattern: re.Pattern[str]) -> str:
    """A duration the pattern admits and Go's ``time.ParseDuration`` reads (``Never`` as is)."""
    value = _pattern(raw, field, pattern)
    if value and value != NEVER:
        try:
            duration_seconds(value)
        except InputError as error:
            raise error.located(field_prefix=field) from None
    return value


def _optional_int(raw: object, field: str, low: int, high: int) -> int | None:
    return None if raw is None else expect_int(raw, field, low, high)


def check_limits(pools: Iterable[NodePool], claims: Iterable[NodeClaim], nodes: Iterable[Node]) -> None:
    """Refuse a NodePool whose ``limits`` are below what its nodes already hold (what provisioning
    calls before adding nodes; reading a snapshot does not, see ``kube.capacity``): the capacity of
    its NodeClaims (``status.capacity``, what Karpenter counts in ``status.resources``), or the
    allocatable of a node with its label that no NodeClaim of the snapshot launched."""
    claims = list(claims)
    used: dict[str, dict[str, int]] = {}
    claimed = {claim.node_name for claim in claims if claim.node_name}
    holdings = [(claim.node_pool, claim.capacity) for claim in claims] + [
        (node.labels.get(NODEPOOL_LABEL, ""), node.allocatable) for node in nodes if node.name not in claimed]
    for owner, amounts in holdings:
        if not owner:
            continue
        total = used.setdefault(owner, {"nodes": 0})
        total["nodes"] += 1
        for resource, amount in amounts.items():
            total[resource] = total.get(resource, 0) + amount
    for pool in pools:
        for resource, limit in pool.limits.items():
            have = used.get(pool.name, {}).get(resource, 0)
            if have > limit:
                unit = "m" if resource == "cpu" else ""
                raise InputError(f"limit {limit}{unit} is below the {have}{unit} its nodes already hold",
                                 file=pool.source, obj=f"NodePool {pool.name}", field=f"spec.limits.{resource}")
