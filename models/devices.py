"""A pending pod's resource claims as the kube-scheduler's DynamicResources plugin sees them, and
an exact small allocator for them on one node (k8s.io/dynamic-resource-allocation/structured).

:func:`resolve` is the plugin's PreFilter: it rejects the pod (a claim not generated yet, missing,
being deleted, not owned by the pod) or sorts its claims into allocated ones (usable where their
allocation's node selector admits) and ones to allocate. :class:`Allocator` allocates claims on a
node as the structured allocator does: requests in order, each a DeviceClass's and its own CEL
selectors, ``ExactCount`` or ``All`` devices, ``firstAvailable`` alternatives in order, the
claim's ``matchAttribute`` constraints, devices in use by other claims skipped, partitionable
devices' shared counters respected. It searches by backtracking over device combinations (the
kube-scheduler's search tries permutations; the answers are the same), within a step budget.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from kubeplace.kube.device_cel import CelError, matches
from kubeplace.kube.dra import (
    ALL,
    RESERVED_FOR_MAX,
    Allocation,
    AttributeValue,
    Device,
    DeviceId,
    DeviceRequest,
    DeviceResult,
    Devices,
    MatchAttribute,
    ResourceClaim,
)
from kubeplace.kube.objects import Node, Pod, Requirement, SelectorTerm
from kubeplace.kube.selectors import terms_match
from kubeplace.models.extended_resources import mapped_resources

CANNOT_ALLOCATE = "cannot allocate all claims"
NOT_AVAILABLE = "resourceclaim not available on the node"
STALE_EXTENDED_CLAIM = "cannot schedule extended resource claim"
"""The kube-scheduler's Filter reasons (dynamicresources.go)."""
IN_USE = "resourceclaim in use"
"""PreFilter's reason for an allocated claim that cannot be reserved for the pod (CanBeReserved)."""
MAX_STEPS = 20_000
"""Devices tried per allocation before giving up (the kube-scheduler gives up after a timeout)."""
MAX_RESULTS = 32
"""resourceapi.AllocationResultsMaxSize: devices one claim may get."""

CounterKey = tuple[str, str, str, str]
"""(driver, pool, counter set, counter)."""


@dataclass(frozen=True)
class PodDeviceClaims:
    """A pending pod's claims after DynamicResources' PreFilter."""

    rejection: str = ""
    allocated: tuple[ResourceClaim, ...] = ()
    to_allocate: tuple[ResourceClaim, ...] = ()
    extended: tuple[str, ...] = ()
    """The extended resources it requests that a DeviceClass serves (an implicit claim where
    no device plugin serves them)."""

    @property
    def any(self) -> bool:
        return bool(self.rejection or self.allocated or self.to_allocate or self.extended)


def resolve(pod: Pod, devices: Devices) -> PodDeviceClaims:
    """DynamicResources' PreFilter, in its words (foreachPodResourceClaim, resourceclaim.Name,
    validateDeviceClass; an extended resource claim left from an earlier attempt: Filter's
    "cannot schedule extended resource claim", the kube-scheduler then deletes it)."""
    extended = mapped_resources(pod, devices)
    if extended and any(c.extended and c.owner_uid == pod.uid and c.namespace == pod.namespace
                        for c in devices.claims.values()):
        return PodDeviceClaims(STALE_EXTENDED_CLAIM)
    allocated: dict[str, ResourceClaim] = {}
    to_allocate: dict[str, ResourceClaim] = {}
    for entry in pod.resource_claims:
        check_owner = not entry.claim
        if entry.claim:
            name = entry.claim
        elif entry.name in pod.generated_claims:
            name = pod.generated_claims[entry.name]
            if not name:
                continue  # intentionally not created
        else:
            return PodDeviceClaims(f'pod "{pod.key}": ResourceClaim not created yet')
        claim = devices.claim(pod.namespace, name)
        if claim is None:
            return PodDeviceClaims(f'could not find ResourceClaim "{pod.namespace}/{name}"')
        if claim.deleting:
            return PodDeviceClaims(f'resourceclaim "{name}" is being deleted')
        if check_owner and claim.owner_uid != pod.uid:
            return PodDeviceClaims(f"ResourceClaim {claim.key} was not created for Pod {pod.key} (Pod is not owner)")
        if claim.allocation is not None:
            if pod.uid not in claim.reserved_for and len(claim.reserved_for) >= RESERVED_FOR_MAX:
                return PodDeviceClaims(IN_USE)
            allocated[claim.key] = claim
            continue
        for request in claim.requests:
            for option in request.alternatives or (request,):
                if option.device_class not in devices.classes:
                    return PodDeviceClaims(f"request {option.name}: device class {option.device_class} does not exist")
        to_allocate[claim.key] = claim  # two entries naming one claim: its devices are allocated once
    return PodDeviceClaims("", tuple(allocated.values()), tuple(to_allocate.values()), extended)


def usable_on(claim: ResourceClaim, node: Node) -> bool:
    """An allocated claim can be used on the node (its allocation's node selector admits it)."""
    return claim.allocation is not None and terms_match(claim.allocation.node_selector, node.labels, node.name)


def reaches(device: Device, node: Node) -> bool:
    """The device's slice makes it available on the node."""
    if device.node:
        return device.node == node.name
    if device.node_selector is not None:
        return terms_match(device.node_selector, node.labels, node.name)
    return device.all_nodes


def class_devices(allocator: Allocator, usage: Usage, class_name: str, node: Node) -> tuple[int, int]:
    """(devices, free devices) of a DeviceClass available on the node."""
    try:
        matching = allocator.candidates(DeviceRequest("", class_name), node)
    except CelError:
        return 0, 0
    return len(matching), sum(1 for d in matching if d.id not in usage.in_use)


def dra_devices(devices: Devices, nodes: Sequence[Node], resource: str) -> list[tuple[int, int]]:
    """Per node, (devices, free devices) of the DeviceClass serving the extended resource by DRA
    (none: empty)."""
    device_class = devices.class_for(resource)
    if device_class is None or not devices.devices:
        return []
    allocator, usage = Allocator(devices), Usage.of(devices)
    return [class_devices(allocator, usage, device_class.name, node) for node in nodes]


def _same(a: AttributeValue, b: AttributeValue) -> bool:
    return type(a) is type(b) and a == b


@dataclass
class Usage:
    """What other claims hold: devices in use and counters consumed (shared across allocations)."""

    in_use: set[DeviceId] = field(default_factory=set)
    consumed: dict[CounterKey, int] = field(default_factory=dict)

    @staticmethod
    def of(devices: Devices) -> Usage:
        usage = Usage()
        for device_id in devices.allocated:
            usage.take(devices.devices.get(device_id), device_id)
        return usage

    def take(self, device: Device | None, device_id: DeviceId) -> None:
        self.in_use.add(device_id)
        for key, amount in _consumption(device):
            self.consumed[key] = self.consumed.get(key, 0) + amount

    def copy(self) -> Usage:
        return Usage(set(self.in_use), dict(self.consumed))


def _consumption(device: Device | None) -> Iterable[tuple[CounterKey, int]]:
    if device is None:
        return
    for use in device.consumes:
        for counter, amount in use.counters.items():
            yield (device.id.driver, device.id.pool, use.counter_set, counter), amount


class _SelectorError(CelError):
    """A selector's runtime error, worded as the structured allocator words it: "class gpu:
    selector #0: CEL runtime error: ..." or "claim default/c: selector #0: ..."."""

    def __init__(self, device_class: str, index: int, error: str, of_class: bool,
                 claim: ResourceClaim | None) -> None:
        self.device_class, self.index, self.error, self.of_class = device_class, index, error, of_class
        super().__init__(self.naming(claim))

    def naming(self, claim: ResourceClaim | None) -> str:
        """The message, naming ``claim`` when the selector is the claim's own."""
        if self.of_class:
            return f"class {self.device_class}: selector #{self.index}: {self.error}"
        return self.error if claim is None else f"claim {claim.key}: selector #{self.index}: {self.error}"


class Allocator:
    """Allocates claims on nodes against the snapshot's devices; CEL results are cached."""

    def __init__(self, devices: Devices) -> None:
        self.devices = devices
        self._matches: dict[tuple[str, DeviceId], bool | CelError] = {}
        self._errors: dict[tuple[str, tuple[str, ...]], _SelectorError | None] = {}
        self._local: dict[str, list[Device]] = {}
        self._shared = [d for d in devices.devices.values() if not d.node]
        for device in devices.devices.values():
            if device.node:
                self._local.setdefault(device.node, []).append(device)
        self._limits = {(driver, pool, name, counter): amount
                        for (driver, pool), sets in devices.counters.items()
                        for name, counters in sets.items() for counter, amount in counters.items()}

    def candidates(self, request: DeviceRequest, node: Node, claim: ResourceClaim | None = None) -> list[Device]:
        """Devices on the node that the request's class and selectors admit (CelError on a
        runtime error, as the allocator stops there, naming the class or ``claim``)."""
        return [d for d in self.on_node(node) if not d.tainted and self._admits(request, d, claim)]

    def selector_error(self, request: DeviceRequest, claim: ResourceClaim | None = None) -> str:
        """The first CEL runtime error of the request's selectors (its class's, then its own) on
        any device of the snapshot, in the kube-scheduler's words ("" when none): a selector
        that fails anywhere makes its pods unschedulable, as it aborts their scheduling."""
        key = (request.device_class, request.selectors)
        if key not in self._errors:
            self._errors[key] = None
            try:
                for device in self.devices.devices.values():
                    if not device.tainted:
                        self._admits(request, device, None)
            except _SelectorError as error:
                self._errors[key] = error
        found = self._errors[key]
        return "" if found is None else found.naming(claim)

    def _admits(self, request: DeviceRequest, device: Device, claim: ResourceClaim | None) -> bool:
        device_class = self.devices.classes[request.device_class]
        for of_class, selectors in ((True, device_class.selectors), (False, request.selectors)):
            for index, expression in enumerate(selectors):
                try:
                    if not self._match(expression, device):
                        return False
                except CelError as error:
                    raise _SelectorError(device_class.name, index, str(error), of_class, claim) from None
        return True

    def on_node(self, node: Node) -> list[Device]:
        """The devices available on the node, in the snapshot's order."""
        return [d for d in (*self._local.get(node.name, ()), *self._shared) if reaches(d, node)]

    def _match(self, expression: str, device: Device) -> bool:
        key = (expression, device.id)
        if key not in self._matches:
            try:
                self._matches[key] = matches(expression, device)
            except CelError as error:
                self._matches[key] = error
        found = self._matches[key]
        if isinstance(found, CelError):
            raise found
        return found

    def allocate(self, claims: Sequence[ResourceClaim], node: Node, usage: Usage) -> list[Allocation] | None:
        """An allocation per claim on ``node`` given what ``usage`` holds, or None. CelError when a
        selector fails at run time."""
        search = _Search(self, node, usage, claims)
        return search.run()

    def fits(self, usage: Usage, device: Device, extra: Mapping[CounterKey, int]) -> bool:
        return all(usage.consumed.get(k, 0) + extra.get(k, 0) + a <= self._limits.get(k, 0)
                   for k, a in _consumption(device))


class _Search:
    def __init__(self, allocator: Allocator, node: Node, usage: Usage, claims: Sequence[ResourceClaim]) -> None:
        self.allocator, self.node, self.usage, self.claims = allocator, node, usage, claims
        self.slots = [(c, r) for c, claim in enumerate(claims) for r in claim.requests]
        self.chosen: dict[DeviceId, int] = {}
        self.extra: dict[CounterKey, int] = {}
        self.results: list[list[DeviceResult]] = [[] for _ in claims]
        self.values: dict[tuple[int, int], tuple[AttributeValue, int]] = {}  # (claim, constraint) -> value, devices
        self.steps = 0
        self.cache: dict[tuple[int, str], list[Device]] = {}

    def run(self) -> list[Allocation] | None:
        if not self._slot(0):
            return None
        return [Allocation(tuple(results), self._node_selector(results)) for results in self.results]

    def _cands(self, c: int, request: DeviceRequest) -> list[Device]:
        if (c, request.name) not in self.cache:
            self.cache[(c, request.name)] = self.allocator.candidates(request, self.node, self.claims[c])
        return self.cache[(c, request.name)]

    def _slot(self, index: int) -> bool:
        if index == len(self.slots):
            return True
        c, request = self.slots[index]
        for option in request.alternatives or (request,):
            candidates = self._cands(c, option)
            if option.mode == ALL:
                if candidates and self._take_all(c, option, candidates, index):
                    return True
            elif self._pick(c, option, candidates, 0, option.count, index):
                return True
        return False

    def _take_all(self, c: int, request: DeviceRequest, candidates: list[Device], index: int) -> bool:
        added: list[Device] = []
        for device in candidates:
            if not self._add(c, request, device):
                break
            added.append(device)
        else:
            if self._slot(index + 1):
                return True
        for device in reversed(added):
            self._remove(c, device)
        return False

    def _pick(self, c: int, request: DeviceRequest, candidates: list[Device], start: int, left: int,
              index: int) -> bool:
        if left == 0:
            return self._slot(index + 1)
        for k in range(start, len(candidates) - left + 1):
            self.steps += 1
            if self.steps > MAX_STEPS:
                return False
            device = candidates[k]
            if self._add(c, request, device):
                if self._pick(c, request, candidates, k + 1, left - 1, index):
                    return True
                self._remove(c, device)
        return False

    def _add(self, c: int, request: DeviceRequest, device: Device) -> bool:
        if device.id in self.chosen or (device.id in self.usage.in_use and not device.shared):
            return False
        if len(self.results[c]) >= MAX_RESULTS or not self.allocator.fits(self.usage, device, self.extra):
            return False
        constraints = self.claims[c].constraints
        for k, constraint in enumerate(constraints):
            if not _applies(constraint, request.name):
                continue
            value = device.attributes.get(constraint.attribute)
            held = self.values.get((c, k))
            if value is None or (held is not None and held[1] > 0 and not _same(held[0], value)):
                for j in range(k):  # undo the counts this device added
                    if _applies(constraints[j], request.name):
                        self._release(c, j)
                return False
            self.values[(c, k)] = (value if held is None or held[1] == 0 else held[0],
                                   1 if held is None else held[1] + 1)
        self.chosen[device.id] = c
        for key, amount in _consumption(device):
            self.extra[key] = self.extra.get(key, 0) + amount
        self.results[c].append(DeviceResult(request.name, device.id))
        return True

    def _release(self, c: int, k: int) -> None:
        value, count = self.values[(c, k)]
        self.values[(c, k)] = (value, count - 1)

    def _remove(self, c: int, device: Device) -> None:
        result = self.results[c].pop()
        for k, constraint in enumerate(self.claims[c].constraints):
            if _applies(constraint, result.request):
                self._release(c, k)
        del self.chosen[device.id]
        for key, amount in _consumption(device):
            self.extra[key] -= amount

    def _node_selector(self, results: Sequence[DeviceResult]) -> tuple[SelectorTerm, ...] | None:
        """createNodeSelector: the node's name if a device is local to it, else the slices'
        selectors' requirements in one term, else None (every node)."""
        expressions: list[Requirement] = []
        fields: list[Requirement] = []
        for result in results:
            device = self.allocator.devices.devices[result.device]
            if device.node:
                return (SelectorTerm(match_fields=(Requirement("metadata.name", "In", (device.node,)),)),)
            if device.node_selector:
                term = device.node_selector[0]
                expressions += [r for r in term.match_expressions if r not in expressions]
                fields += [r for r in term.match_fields if r not in fields]
        if expressions or fields:
            return (SelectorTerm(tuple(expressions), tuple(fields)),)
        return None


def _applies(constraint: MatchAttribute, request: str) -> bool:
    if not constraint.requests:
        return True
    base = request.partition("/")[0]
    return request in constraint.requests or base in constraint.requests


def try_allocate(allocator: Allocator, claims: Sequence[ResourceClaim], node: Node,
                 usage: Usage) -> tuple[list[Allocation] | None, str]:
    """(allocations or None, the reason when None): a CEL runtime error is the reason itself."""
    try:
        found = allocator.allocate(claims, node, usage)
    except CelError as error:
        return None, str(error)
    return found, "" if found is not None else CANNOT_ALLOCATE
