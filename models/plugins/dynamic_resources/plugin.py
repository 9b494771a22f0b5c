"""DynamicResources: a pod's resource claims must be allocatable on its node (the kube-scheduler's
DynamicResources plugin with the structured allocator, ``models.devices``).

PreFilter rejects a pod whose claims are not there yet (not generated, missing, being deleted, not
the pod's); a claim already allocated restricts the pod to the nodes its allocation's node selector
admits ("resourceclaim not available on the node"); the claims to allocate must be allocatable on
the node against the devices other claims hold ("cannot allocate all claims"). A claim several
pending pods share and nobody has allocated yet is allocated with the first of them in queue
order; the others wait, as they do while the kube-scheduler's allocation is in flight. An allocated
claim is reserved for at most 256 consumers (ResourceClaimReservedForMaxSize): a pod it is full for
waits ("resourceclaim in use"), and of the pending pods joining it only as many as it has places
left, in queue order, may be placed.
A selector
failing at run time on some device (division by zero, no such key, ...) is a Filter error for the
pods whose claims use it: they are not placed, the error is their reason ('running
"DynamicResources" filter plugin: claim default/c: selector #0: CEL runtime error: division by
zero'), and the other pods are placed.

Across the batch, device consumption is capacity, so that the solver packs it:

- each DeviceClass the pods ask for is a resource (the extended resource it serves: its
  ``extendedResourceName``, else ``deviceclass.resource.kubernetes.io/<class>``): a
  node offers its free devices of the class, a pod takes the devices its requests count
  (``ExactCount``; a ``firstAvailable`` request its smallest alternative);
- one class of pods: at most as many pods on a node as the exact allocator allocates there one
  after another (exact for pods of one class: their claims are alike; it holds selectors,
  ``matchAttribute``, ``All`` and shared counters).

Across pod classes, selectors that admit only some of a DeviceClass's devices, ``matchAttribute``
constraints, ``All`` requests and shared counters are approximated by those device counts. The
plan's devices are then chosen exactly (:meth:`DynamicResources.choose`: all the claims of a node's
pods in one search); a placed pod whose claims cannot be allocated there after all is not placed
(with the kube-scheduler's reason), so a plan never holds an allocation that does not exist.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property

import numpy as np

from kubeplace.kube.dra import (
    ALL,
    IMPLICIT_EXTENDED_PREFIX,
    RESERVED_FOR_MAX,
    Allocation,
    ClaimAllocation,
    DeviceRequest,
    RequestMapping,
    ResourceClaim,
)
from kubeplace.kube.objects import Node, Pod
from kubeplace.models.devices import (
    CANNOT_ALLOCATE,
    IN_USE,
    NOT_AVAILABLE,
    Allocator,
    PodDeviceClaims,
    Usage,
    class_devices,
    resolve,
    try_allocate,
    usable_on,
)
from kubeplace.models.extended_resources import extended_claim, mapped_resources, served_on
from kubeplace.models.framework import ClassView, RunContext
from kubeplace.models.problem import BoolArray, Gang, GroupCap, IntArray
from kubeplace.models.volumes import queue_order

NAME = "DynamicResources"
NO_CLAIMS = PodDeviceClaims()
"""A pod without device claims (shared: frozen)."""
MAX_PER_NODE = 256
"""The most pods of one class counted onto one node's devices."""


@dataclass(frozen=True)
class DynamicResources:
    allocator: Allocator = field(compare=False)
    claims: Mapping[str, PodDeviceClaims] = field(default_factory=dict)
    """Pending pod key -> its claims (pods with claims or extended resources served by DRA only)."""
    waits: Mapping[str, str] = field(default_factory=dict)
    """Pending pod key -> why it waits for an earlier pod (a shared claim it allocates)."""
    usage: Usage = field(default_factory=Usage, compare=False)
    """What the claims already allocated hold."""
    bound_extended: Mapping[str, Mapping[str, int]] = field(default_factory=dict)
    """Node -> extended resource -> what its bound pods request of it (their devices are in ``usage``)."""
    pods: Mapping[str, Pod] = field(default_factory=dict, compare=False)
    name: str = NAME
    reason: str = CANNOT_ALLOCATE
    _extended: dict[tuple[str, tuple[str, ...]], tuple[ResourceClaim, tuple[RequestMapping, ...]]] = field(
        default_factory=dict, compare=False, repr=False)

    def _claims(self, pod: Pod) -> PodDeviceClaims:
        if not self.claims:  # no pod has any (the common case): no key to spell per call
            return NO_CLAIMS
        return self.claims.get(pod.key, NO_CLAIMS)

    def _served(self, pod: Pod, node: Node) -> tuple[str, ...]:
        return served_on(self._claims(pod).extended, node)

    def extended_claim(self, pod: Pod, node: Node) -> tuple[ResourceClaim, tuple[RequestMapping, ...]] | None:
        """The pod's extended resource claim on the node (None: nothing served there by DRA)."""
        served = self._served(pod, node)
        if not served:
            return None
        key = (pod.key, served)
        if key not in self._extended:
            self._extended[key] = extended_claim(pod, self.allocator.devices, served)
        return self._extended[key]

    def to_allocate(self, pod: Pod, node: Node) -> tuple[ResourceClaim, ...]:
        """The claims to allocate for the pod on the node: its own, then its extended resource claim."""
        special = self.extended_claim(pod, node)
        return (*self._claims(pod).to_allocate, *((special[0],) if special else ()))

    def pod_key(self, pod: Pod) -> Hashable:
        claims = self._claims(pod)
        if not claims.any:
            return None
        allocated = tuple(c.allocation.node_selector for c in claims.allocated if c.allocation is not None)
        return (claims.rejection, self.waits.get(pod.key, ""), allocated,
                tuple((c.requests, c.constraints) for c in claims.to_allocate), claims.extended,
                tuple((c.index, c.long_lived, tuple(sorted(c.requests.items())), tuple(sorted(c.positions.items())))
                      for c in pod.container_requests) if claims.extended else ())

    def node_key(self, node: Node) -> Hashable:
        return node.name if self.claims else None

    def node_key_basis(self) -> object:
        return bool(self.claims)

    def unmodelled(self, pod: Pod) -> tuple[str, ...]:
        """Claims using features kubeplace does not model (adminAccess, device tolerations,
        consumable capacity, distinctAttribute constraints): the pod is left to the default scheduler."""
        claims = self._claims(pod).to_allocate
        found = sorted({o.unsupported for c in claims for r in c.requests for o in (r.alternatives or (r,))
                        if o.unsupported})
        fields = [f"ResourceClaim {c.key} {where} (DRAConsumableCapacity)" for c in claims for where in c.unsupported]
        return tuple(f"dynamic resource claims: {what}" for what in (*found, *fields))

    def rejection(self, pod: Pod) -> str:
        return self._claims(pod).rejection or self.waits.get(pod.key, "")

    def filter_error(self, pod: Pod) -> str:
        """The first CEL runtime error of the selectors of the pod's claims to allocate (of its
        extended resources' classes too), as the kube-scheduler reports the Filter error it
        aborts the pod's scheduling with; other pods are not affected."""
        found = "" if self.rejection(pod) else self._selector_error(pod)
        return f'running "{NAME}" filter plugin: {found}' if found else ""

    def _blocked(self, pod: Pod) -> str:
        """Why no node admits the pod whatever the node (a PreFilter rejection, a Filter error)."""
        return self.rejection(pod) or self.filter_error(pod)

    def _selector_error(self, pod: Pod) -> str:
        claims = self._claims(pod)
        devices = self.allocator.devices
        for claim in claims.to_allocate:
            for request in claim.requests:
                for option in request.alternatives or (request,):
                    if found := self.allocator.selector_error(option, claim):
                        return found
        for resource in claims.extended:
            device_class = devices.class_for(resource)
            if device_class is not None and (found := self.allocator.selector_error(
                    DeviceRequest("", device_class.name))):
                return found
        return ""

    def filter(self, pod: Pod, nodes: Sequence[Node]) -> BoolArray:
        if not self._claims(pod).any:
            return np.ones(len(nodes), dtype=np.bool_)
        return np.array([not reasons for reasons in self.node_reasons(pod, nodes)], dtype=np.bool_)

    def node_reasons(self, pod: Pod, nodes: Sequence[Node]) -> list[tuple[str, ...]]:
        claims = self._claims(pod)
        if blocked := self._blocked(pod):
            return [(blocked,) for _ in nodes]
        out: list[tuple[str, ...]] = []
        for node in nodes:
            if not all(usable_on(c, node) for c in claims.allocated):
                out.append((NOT_AVAILABLE,))
                continue
            to_allocate = self.to_allocate(pod, node)
            if to_allocate:
                found, why = try_allocate(self.allocator, to_allocate, node, self.usage)
                out.append(() if found is not None else (why,))
            else:
                out.append(())
        return out

    # ------------------------------------------------------------------ device pools as capacity

    def resource_of(self, class_name: str) -> str:
        """The resource counting a DeviceClass's devices: the extended resource it serves (its
        ``extendedResourceName``, else ``deviceclass.resource.kubernetes.io/<class>``), so that
        claims and extended resource requests of one class take from one capacity."""
        device_class = self.allocator.devices.classes.get(class_name)
        named = device_class.extended_resource if device_class is not None else ""
        if named and self.allocator.devices.class_for(named) is device_class:
            return named
        return IMPLICIT_EXTENDED_PREFIX + class_name

    def extra_requests(self, pod: Pod) -> dict[str, int]:
        """The devices of each class the pod's claims take (exact counts; a firstAvailable
        request counts its smallest alternative when all are of one class; All is not counted
        here: its pods are kept apart by the per-class rule and the final choice). Extended
        resources served by DRA are requested as they are."""
        if self._blocked(pod):
            return {}
        out: dict[str, int] = {}
        for claim in self._claims(pod).to_allocate:
            for request in claim.requests:
                options = request.alternatives or (request,)
                if len({o.device_class for o in options}) == 1 and all(o.mode != ALL for o in options):
                    key = self.resource_of(options[0].device_class)
                    out[key] = out.get(key, 0) + min(o.count for o in options)
        for key in out:
            out[key] += pod.requests.get(key, 0)
        return out

    def extra_allocatable(self, node: Node) -> dict[str, int]:
        """Per DeviceClass the pending pods ask for, where no device plugin serves its resource:
        its free devices available on the node, plus what the bound pods request of it there
        (their devices are among those taken; their requests are counted as the node's use)."""
        out = {}
        for class_name in self.wanted_classes:
            resource = self.resource_of(class_name)
            if node.allocatable.get(resource, 0) > 0:
                continue
            _, free = class_devices(self.allocator, self.usage, class_name, node)
            out[resource] = free + self.bound_extended.get(node.name, {}).get(resource, 0)
        return out

    @cached_property
    def wanted_classes(self) -> tuple[str, ...]:
        devices = self.allocator.devices
        return tuple(sorted({o.device_class for c in self.claims.values() for claim in c.to_allocate
                             for r in claim.requests for o in (r.alternatives or (r,))}
                            | {cls.name for c in self.claims.values() for r in c.extended
                               if (cls := devices.class_for(r)) is not None}))

    # ------------------------------------------------------------------ constraint

    def constraints(self, view: ClassView) -> Sequence[GroupCap | Gang]:
        needing = [c for c, pod in enumerate(view.class_pods)
                   if (self._claims(pod).to_allocate or self._claims(pod).extended) and not self._blocked(pod)]
        caps: list[GroupCap | Gang] = []
        for c in needing:
            pod = view.class_pods[c]
            caps.append(GroupCap(f"devices of {pod.key}'s claims", (c,), self._repeat(pod, view.nodes), NAME))
        return caps

    def _repeat(self, pod: Pod, nodes: Sequence[Node]) -> IntArray:
        """Per node: how many such pods the allocator fits one after another."""
        counts = np.zeros(len(nodes), dtype=np.int64)
        for i, node in enumerate(nodes):
            if not all(usable_on(c, node) for c in self._claims(pod).allocated):
                continue
            claims = self.to_allocate(pod, node)
            if not claims:
                counts[i] = MAX_PER_NODE
                continue
            usage = self.usage.copy()
            while counts[i] < MAX_PER_NODE:
                found, _ = try_allocate(self.allocator, claims, node, usage)
                if found is None:
                    break
                for device_id in (r.device for a in found for r in a.results):
                    usage.take(self.allocator.devices.devices.get(device_id), device_id)
                counts[i] += 1
        return counts

    # ------------------------------------------------------------------ choosing devices

    def choose(self, placed: Sequence[tuple[Pod, Node]]) -> tuple[dict[str, tuple[ClaimAllocation, ...]],
                                                                  dict[str, str]]:
        """The devices of each placed pod's claims to allocate, and the pods whose claims cannot
        be allocated on their node after all, with the reason. Node by node, the claims of all
        its pods are allocated together (one search: the exact answer to whether they all fit);
        when that fails, pod by pod in queue order, and the pods that do not fit are left out.
        A claim allocated already is listed with its allocation (not reserved for the pod yet:
        binding adds the pod to its reservedFor, as the kube-scheduler's PreBind does)."""
        by_node: dict[str, list[Pod]] = {}
        nodes: dict[str, Node] = {}
        for pod, node in placed:
            if self.to_allocate(pod, node):
                by_node.setdefault(node.name, []).append(pod)
                nodes[node.name] = node
        usage = self.usage.copy()
        chosen: dict[str, tuple[ClaimAllocation, ...]] = {}
        failed: dict[str, str] = {}
        for name in sorted(by_node):
            node = nodes[name]
            pods = queue_order(by_node[name])
            claims = [c for pod in pods for c in self.to_allocate(pod, node)]
            together, _ = try_allocate(self.allocator, claims, node, usage)
            if together is not None:
                found = iter(together)
                for pod in pods:
                    chosen[pod.key] = self._record(pod, node, [next(found) for _ in self.to_allocate(pod, node)],
                                                   usage)
                continue
            for pod in pods:
                one, why = try_allocate(self.allocator, self.to_allocate(pod, node), node, usage)
                if one is None:
                    failed[pod.key] = why
                else:
                    chosen[pod.key] = self._record(pod, node, one, usage)
        for pod, _ in placed:
            reserve = tuple(ClaimAllocation(c.name, c.allocation) for c in self._claims(pod).allocated
                            if c.allocation is not None and pod.uid not in c.reserved_for)
            if reserve and pod.key not in failed:
                chosen[pod.key] = (*reserve, *chosen.get(pod.key, ()))
        return chosen, failed

    def _record(self, pod: Pod, node: Node, found: Sequence[Allocation], usage: Usage) -> tuple[ClaimAllocation, ...]:
        for allocation in found:
            for result in allocation.results:
                usage.take(self.allocator.devices.devices.get(result.device), result.device)
        special = self.extended_claim(pod, node)
        return tuple(ClaimAllocation(c.name, a, *((special[0].requests, special[1]) if c.extended and special
                                                  else ((), ())))
                     for c, a in zip(self.to_allocate(pod, node), found, strict=True))


def build(_args: None, ctx: RunContext) -> DynamicResources:
    snapshot = ctx.snapshot
    devices = snapshot.devices
    pending = [p for p in snapshot.pending if not p.unmodelled and (p.resource_claims or mapped_resources(p, devices))]
    claims = {p.key: resolve(p, devices) for p in pending}
    owner: dict[str, str] = {}
    consumers: dict[str, int] = {}
    waits: dict[str, str] = {}
    for pod in queue_order(pending):
        pod_claims = claims[pod.key]
        if pod_claims.rejection:
            continue
        shared = [c for c in pod_claims.to_allocate if owner.setdefault(c.key, pod.key) != pod.key]
        if shared:
            waits[pod.key] = f"resource claim {shared[0].key} is in the process of being allocated"
            continue
        joining = [c for c in pod_claims.allocated if pod.uid not in c.reserved_for]
        if any(consumers.get(c.key, len(c.reserved_for)) >= RESERVED_FOR_MAX for c in joining):
            waits[pod.key] = IN_USE  # the earlier pods in queue order take the claim's last consumer places
            continue
        for claim in joining:
            consumers[claim.key] = consumers.get(claim.key, len(claim.reserved_for)) + 1
    bound_extended: dict[str, dict[str, int]] = {}
    for pod in snapshot.bound if devices.classes else ():  # (no DeviceClass: no resource is mapped)
        for resource in mapped_resources(pod, devices):
            per_node = bound_extended.setdefault(pod.node_name, {})
            per_node[resource] = per_node.get(resource, 0) + pod.requests.get(resource, 0)
    return DynamicResources(Allocator(devices), claims, waits, Usage.of(devices), bound_extended)
