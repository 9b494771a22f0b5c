"""DynamicResources' independent verifier check, over the whole plan: the kube-scheduler's
DynamicResources plugin and the structured allocator's rules for the devices the plan allocates.
Imports only ``kubeplace.kube`` and the other rules' checks.

Written out plainly from the typed objects (``kube.dra``), sharing no code with ``models/`` (CEL is
evaluated by the CEL library through ``kube.device_cel``, as parsing is shared). A placed pod's
claims must exist and be its own (a template's generated claim owned by the pod); an allocated
claim's node selector must admit the node; every claim that is not allocated yet must get an
allocation in the plan, once across the plan (an allocated claim may be listed with its own
allocation: the pod is then added to its reservedFor, at most 256 consumers in all), which:

- names devices that exist, are available on the node and are not tainted;
- gives each request exactly its count of devices (``All``: every matching device available on
  the node), or for a ``firstAvailable`` request the count of one of its alternatives, every
  device admitted by the DeviceClass's and the request's CEL selectors;
- satisfies the claim's ``matchAttribute`` constraints;
- with the allocations of the cluster, gives no device twice and exceeds no pool's shared counter;
- has a node selector that admits the node.

Extended resources served by DRA: where no device plugin gives an extended resource the pod
requests and a DeviceClass serves it, the plan allocates the pod's extended resource claim:
devices of the class, as many as the pod requests, under the same rules.

Without the plan's allocations only the first two points (claims there, allocated ones usable) are checked.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator, Mapping, Sequence

from kubeplace.kube.device_cel import CelError, matches
from kubeplace.kube.dra import (
    ALL,
    EXTENDED_CLAIM,
    RESERVED_FOR_MAX,
    ClaimAllocation,
    Device,
    DeviceId,
    DeviceRequest,
    DeviceResult,
    Devices,
    ResourceClaim,
)
from kubeplace.kube.objects import Node, Pod, SelectorTerm
from kubeplace.kube.plan_view import Finding, PlanView
from kubeplace.models.plugins.node_affinity.verify import node_term_matches


def check_plan(view: PlanView, _args: None) -> list[Finding]:
    """What breaks the rule in the plan; the devices it allocates to the pods' claims
    (``view.claim_allocations``) are checked when given."""
    devices, allocations = view.snapshot.devices, view.claim_allocations
    findings: list[Finding] = []
    given: Counter[str] = Counter()
    joining: Counter[str] = Counter()
    # An allocation listing a device twice holds it once (the API server accepts such a list; the
    # kube-scheduler's allocated devices are a set).
    held: Counter[DeviceId] = Counter(device for c in devices.claims.values() if c.allocation
                                      for device in {r.device for r in c.allocation.results})
    for placed in view.placements:
        pod, node = placed.pod, placed.node
        namespace, name, node_name = pod.namespace, pod.name, node.name
        listed = (allocations or {}).get((namespace, name), ())
        if not listed and not pod.resource_claims and not devices.classes:
            continue  # no claim of its own, none allocated for it, no class to serve its extended resources
        chosen = {a.claim: a for a in listed}
        details = [f"claim {c} is listed {n} times for the pod" for c, n in Counter(a.claim for a in listed).items()
                   if n > 1]
        details += list(_pod(pod, node, devices, chosen, allocations is not None)) if pod.resource_claims else []
        joining.update(c.key for c in _claims(pod, devices)
                       if c.allocation is not None and pod.uid not in c.reserved_for)
        if allocations is not None:
            details += _extended(pod, node, devices, chosen.pop(EXTENDED_CLAIM, None), held)
        findings += [(namespace, name, node_name, detail) for detail in details]
        for allocation in chosen.values():
            existing = devices.claims.get(f"{namespace}/{allocation.claim}")
            if existing is not None and existing.allocation is not None:
                continue  # a reservation of an allocated claim (checked in _pod)
            given[f"{namespace}/{allocation.claim}"] += 1
            held.update(r.device for r in allocation.allocation.results)
    for claim_key, times in sorted(joining.items()):
        reserved = len(devices.claims[claim_key].reserved_for)
        if reserved + times > RESERVED_FOR_MAX:
            findings.append(("", claim_key, "", f"claim {claim_key} reserved for {reserved} "
                             f"consumers gets {times} more, over the API server's {RESERVED_FOR_MAX}"))
    for claim, times in sorted(given.items()):
        if times > 1:
            findings.append(("", claim, "", f"claim {claim} allocated {times} times by the plan"))
    for device_id, times in sorted(held.items()):
        device = devices.devices.get(device_id)
        if times > 1 and not (device is not None and device.shared):
            findings.append(("", str(device_id), "", f"device {device_id} allocated {times} times"))
    findings += _counters(devices, held)
    return findings


def _extended(pod: Pod, node: Node, devices: Devices, given: ClaimAllocation | None,
              held: Counter[DeviceId]) -> list[str]:
    """The pod's extended resource claim: on a node where no device plugin gives an extended
    resource the pod requests and a DeviceClass serves it, the plan allocates devices of that
    class, as many as the pod requests of it in all, one request per container; elsewhere none."""
    served: dict[str, int] = {}
    for resource, amount in pod.requests.items():
        device_class = devices.class_for(resource)
        if amount > 0 and device_class is not None and devices.serves(resource, node.allocatable):
            served[device_class.name] = served.get(device_class.name, 0) + amount
    if given is None:
        return [f"extended resources of class {', '.join(sorted(served))} are not allocated"] if served else []
    if not served:
        return ["an extended resource claim where no extended resource is served by DRA"]
    held.update(r.device for r in given.allocation.results)
    problems = []
    counted: dict[str, int] = {}
    for request in given.requests:
        counted[request.device_class] = counted.get(request.device_class, 0) + request.count
    if counted != served:
        problems.append(f"extended resource claim requests {counted} devices by class, the pod requests {served}")
    if any(m.request not in {r.name for r in given.requests} for m in given.mappings):
        problems.append("a request mapping names a request the extended resource claim does not have")
    claim = ResourceClaim(pod.namespace, EXTENDED_CLAIM, requests=given.requests)
    problems += [f"extended resource claim: {p}" for p in _allocation(claim, given, node, devices)]
    return problems


def _admits(terms: Sequence[SelectorTerm] | None, node: Node) -> bool:
    """A node selector (None: every node) admits the node."""
    return terms is None or any(node_term_matches(t.match_expressions, t.match_fields, node) for t in terms)


def _claim_of(pod: Pod, entry_name: str, claim_name: str, template: str,
              devices: Devices) -> tuple[ResourceClaim | None, str]:
    if not claim_name:
        if entry_name not in pod.generated_claims:
            return None, f'pod "{pod.namespace}/{pod.name}": ResourceClaim not created yet'
        claim_name = pod.generated_claims[entry_name]
        if not claim_name:
            return None, ""
    claim = devices.claims.get(f"{pod.namespace}/{claim_name}")
    if claim is None:
        return None, f'could not find ResourceClaim "{pod.namespace}/{claim_name}"'
    if claim.deleting:
        return None, f'resourceclaim "{claim_name}" is being deleted'
    if template and claim.owner_uid != pod.uid:
        return None, (f"ResourceClaim {pod.namespace}/{claim_name} was not created for Pod "
                      f"{pod.namespace}/{pod.name} (Pod is not owner)")
    return claim, ""


def _claims(pod: Pod, devices: Devices) -> list[ResourceClaim]:
    """The pod's claims that exist and are its own, each once (two entries may name one claim)."""
    found = {}
    for entry in pod.resource_claims:
        claim, _ = _claim_of(pod, entry.name, entry.claim, entry.template, devices)
        if claim is not None:
            found[claim.key] = claim
    return list(found.values())


def _pod(pod: Pod, node: Node, devices: Devices, chosen: Mapping[str, ClaimAllocation],
         check_devices: bool) -> Iterator[str]:
    seen = set()
    for entry in pod.resource_claims:
        claim, problem = _claim_of(pod, entry.name, entry.claim, entry.template, devices)
        if problem:
            yield problem
        if claim is None or claim.key in seen:
            continue
        seen.add(claim.key)
        if claim.allocation is not None:
            if pod.uid not in claim.reserved_for and len(claim.reserved_for) >= RESERVED_FOR_MAX:
                yield f"resourceclaim {claim.name} in use: reserved for {len(claim.reserved_for)} consumers"
            if not _admits(claim.allocation.node_selector, node):
                yield f"resourceclaim {claim.name} not available on the node"
            if claim.name in chosen and set(chosen[claim.name].allocation.results) != set(claim.allocation.results):
                yield f"claim {claim.name} is allocated already; the plan allocates it again"
            continue
        missing = [f"request {o.name}: device class {o.device_class} does not exist" for r in claim.requests
                   for o in (r.alternatives or (r,)) if o.device_class not in devices.classes]
        if missing:
            yield missing[0]
            continue
        if not check_devices:
            continue
        if claim.name not in chosen:
            yield f"claim {claim.name} is not allocated: cannot allocate all claims"
            continue
        yield from (f"claim {claim.name}: {p}" for p in _allocation(claim, chosen[claim.name], node, devices))


def _available(device: Device, node: Node) -> bool:
    if device.node:
        return device.node == node.name
    if device.node_selector is not None:
        return _admits(device.node_selector, node)
    return device.all_nodes


def _admitted(request: DeviceRequest, device: Device, devices: Devices) -> bool:
    device_class = devices.classes.get(request.device_class)
    if device_class is None:
        return False
    try:
        return all(matches(e, device) for e in (*device_class.selectors, *request.selectors))
    except CelError:
        return False


def _allocation(claim: ResourceClaim, given: ClaimAllocation, node: Node, devices: Devices) -> Iterator[str]:
    results = given.allocation.results
    for result in results:
        device = devices.devices.get(result.device)
        if device is None:
            yield f"device {result.device} does not exist"
        elif not _available(device, node):
            yield f"device {result.device} is not available on node {node.name}"
        elif device.tainted:
            yield f"device {result.device} is tainted"
    if len({r.device for r in results}) != len(results):
        yield "a device is given twice"
    for request in claim.requests:
        yield from _request(request, [r for r in results if r.request.split("/")[0] == request.name], node, devices)
    names = {r.name for r in claim.requests}
    yield from (f"device {r.device} for request {r.request}, which the claim does not have"
                for r in results if r.request.split("/")[0] not in names)
    for constraint in claim.constraints:
        values = []
        for result in results:
            base = result.request.split("/")[0]
            if constraint.requests and result.request not in constraint.requests and base not in constraint.requests:
                continue
            device = devices.devices.get(result.device)
            value = None if device is None else device.attributes.get(constraint.attribute)
            values.append(None if value is None else (type(value).__name__, value))
        if None in values or len(set(values)) > 1:
            yield f"matchAttribute {constraint.attribute} does not hold: {values}"
    if not _admits(given.allocation.node_selector, node):
        yield f"its allocation's node selector does not admit node {node.name}"


def _request(request: DeviceRequest, got: Sequence[DeviceResult], node: Node, devices: Devices) -> Iterator[str]:
    options = request.alternatives or (request,)
    used = {r.request for r in got}
    option = next((o for o in options if o.name in used), None) if request.alternatives else request
    if option is None or len(used) > 1 or (not request.alternatives and used - {request.name}):
        yield f"request {request.name}: devices for {sorted(used)}, expected one of {[o.name for o in options]}"
        return
    if option.mode == ALL:
        every = {d.id for d in devices.devices.values()
                 if _available(d, node) and not d.tainted and _admitted(option, d, devices)}
        if {r.device for r in got} != every or not every:
            yield f"request {option.name}: allocationMode All needs all {len(every)} matching devices, got {len(got)}"
    elif len(got) != option.count:
        yield f"request {option.name}: {len(got)} devices, expected {option.count}"
    for result in got:
        device = devices.devices.get(result.device)
        if device is not None and not _admitted(option, device, devices):
            yield f"device {result.device} does not match request {option.name}'s class and selectors"


def _counters(devices: Devices, held: Counter[DeviceId]) -> Iterator[Finding]:
    used: Counter[tuple[str, str, str, str]] = Counter()
    for device_id in held:
        device = devices.devices.get(device_id)
        for use in device.consumes if device is not None else ():
            for counter, amount in use.counters.items():
                used[(device_id.driver, device_id.pool, use.counter_set, counter)] += amount
    for (driver, pool, counter_set, counter), amount in sorted(used.items()):
        limit = devices.counters.get((driver, pool), {}).get(counter_set, {}).get(counter, 0)
        if amount > limit:
            yield ("", f"{driver}/{pool}", "",
                   f"counter {counter_set}/{counter} of pool {driver}/{pool}: {amount} used, {limit} available")
