"""DynamicResources: a pod's resource claims must be allocatable on its node (the kube-scheduler's
DynamicResources plugin with the structured allocator, ``models.devices``).

PreFilter rejects a pod whose claims are not there yet (not generated, missing, being deleted, not
the pod's); a claim already allocated restricts the pod to the nodes its allocation's node selector
admits ("resourceclaim not available on the node"); the claims to allocate must be allocatable on
the node against the devices other claims hold ("cannot allocate all claims"). A claim several
pending pods share and nobody has allocated yet is allocated with the first of them in queue
order; the others wait, as they do while the kube-scheduler's allocation is in flight.

Across the batch, device consumption is a capacity of each node's device pool (group rules):

- one class of pods: at most as many pods on a node as the exact allocator allocates there one
  after another (exact for pods of one class: their claims are alike);
- classes whose candidate devices overlap: for every set of them (up to MAX_SHARING), their pods on
  a node at most the free devices any of them may take there, divided by the most devices one of
  their pods takes (Hall's condition, each pod counted for the largest of them).

Shared counters and ``matchAttribute`` constraints are exact within a class and approximated by
device counts across classes. The plan's devices are then chosen exactly, pod by pod in queue
order (:meth:`DynamicResources.choose`); a placed pod whose claims cannot be allocated there after
all is not placed (with the kube-scheduler's reason), so a plan never holds an allocation that
does not exist.
"""

from __future__ import annotations

import itertools
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from kubeplace.kube.dra import Allocation, ClaimAllocation, DeviceId
from kubeplace.kube.objects import Node, Pod
from kubeplace.models.devices import (
    CANNOT_ALLOCATE,
    NOT_AVAILABLE,
    Allocator,
    PodDeviceClaims,
    Usage,
    resolve,
    try_allocate,
    usable_on,
)
from kubeplace.models.framework import ClassView, RunContext
from kubeplace.models.problem import BoolArray, Gang, GroupCap, IntArray
from kubeplace.models.volumes import queue_order

NAME = "DynamicResources"
MAX_SHARING = 6
"""Classes sharing devices that get a rule per set (2^6 - 1 sets); further ones are not placed
where they share."""
MAX_PER_NODE = 256
"""The most pods of one class counted onto one node's devices."""


@dataclass(frozen=True)
class DynamicResources:
    allocator: Allocator = field(compare=False)
    claims: Mapping[str, PodDeviceClaims] = field(default_factory=dict)
    """Pending pod key -> its claims (pods with claims only)."""
    waits: Mapping[str, str] = field(default_factory=dict)
    """Pending pod key -> why it waits for an earlier pod (a shared claim it allocates)."""
    usage: Usage = field(default_factory=Usage, compare=False)
    """What the claims already allocated hold."""
    name: str = NAME
    reason: str = CANNOT_ALLOCATE

    def _claims(self, pod: Pod) -> PodDeviceClaims:
        return self.claims.get(pod.key, PodDeviceClaims())

    def pod_key(self, pod: Pod) -> Hashable:
        claims = self._claims(pod)
        if not claims.any:
            return None
        allocated = tuple(c.allocation.node_selector for c in claims.allocated if c.allocation is not None)
        return (claims.rejection, self.waits.get(pod.key, ""), allocated,
                tuple((c.requests, c.constraints) for c in claims.to_allocate))

    def node_key(self, node: Node) -> Hashable:
        return node.name if self.claims else None

    def unmodelled(self, pod: Pod) -> tuple[str, ...]:
        """Claims using request features kubeplace does not model (adminAccess, device
        tolerations, consumable capacity): the pod is left to the default scheduler."""
        found = sorted({o.unsupported for c in self._claims(pod).to_allocate for r in c.requests
                        for o in (r.alternatives or (r,)) if o.unsupported})
        return tuple(f"dynamic resource claims: {what}" for what in found)

    def rejection(self, pod: Pod) -> str:
        return self._claims(pod).rejection or self.waits.get(pod.key, "")

    def filter(self, pod: Pod, nodes: Sequence[Node]) -> BoolArray:
        if not self._claims(pod).any:
            return np.ones(len(nodes), dtype=np.bool_)
        return np.array([not reasons for reasons in self.node_reasons(pod, nodes)], dtype=np.bool_)

    def node_reasons(self, pod: Pod, nodes: Sequence[Node]) -> list[tuple[str, ...]]:
        claims = self._claims(pod)
        if self.rejection(pod):
            return [(self.rejection(pod),) for _ in nodes]
        out: list[tuple[str, ...]] = []
        for node in nodes:
            if not all(usable_on(c, node) for c in claims.allocated):
                out.append((NOT_AVAILABLE,))
                continue
            if claims.to_allocate:
                found, why = try_allocate(self.allocator, claims.to_allocate, node, self.usage)
                out.append(() if found is not None else (why,))
            else:
                out.append(())
        return out

    # ------------------------------------------------------------------ constraint

    def constraints(self, view: ClassView) -> Sequence[GroupCap | Gang]:
        needing = [c for c, pod in enumerate(view.class_pods)
                   if self._claims(pod).to_allocate and not self.rejection(pod)]
        if not needing:
            return []
        nodes = view.nodes
        caps: list[GroupCap | Gang] = []
        reach: dict[int, list[frozenset[DeviceId]]] = {}
        most: dict[int, list[int]] = {}
        for c in needing:
            pod = view.class_pods[c]
            counts, sets, need = self._repeat(pod, nodes)
            caps.append(GroupCap(f"devices of {pod.key}'s claims", (c,), counts, NAME))
            reach[c], most[c] = sets, need
        shares = {(a, b) for a, b in itertools.combinations(needing, 2)
                  if any(reach[a][i] & reach[b][i] for i in range(len(nodes)))}
        for component in _components(needing, shares):
            if len(component) < 2:
                continue
            for extra in component[MAX_SHARING:]:
                caps.append(GroupCap(f"devices: more than {MAX_SHARING} pod classes sharing them", (extra,),
                                     np.array([0 if any(reach[extra][i] & reach[o][i] for o in component if o != extra)
                                               else MAX_PER_NODE for i in range(len(nodes))], dtype=np.int64), NAME))
            kept = component[:MAX_SHARING]
            for size in range(2, len(kept) + 1):
                for subset in itertools.combinations(kept, size):
                    cap = np.array([len(frozenset().union(*(reach[c][i] for c in subset)))
                                    // max(1, *(most[c][i] for c in subset)) for i in range(len(nodes))],
                                   dtype=np.int64)
                    caps.append(GroupCap("devices shared by " + ", ".join(view.class_pods[c].key for c in subset),
                                         tuple(subset), cap, NAME))
        return caps

    def _repeat(self, pod: Pod, nodes: Sequence[Node]) -> tuple[IntArray, list[frozenset[DeviceId]], list[int]]:
        """Per node: how many such pods the allocator fits one after another, the free devices
        they may take, and the most devices one of them takes there."""
        claims = self._claims(pod).to_allocate
        counts = np.zeros(len(nodes), dtype=np.int64)
        sets: list[frozenset[DeviceId]] = []
        need = [0] * len(nodes)
        for i, node in enumerate(nodes):
            candidates: set[DeviceId] = set()
            try:
                for claim in claims:
                    for request in claim.requests:
                        for option in request.alternatives or (request,):
                            candidates |= {d.id for d in self.allocator.candidates(option, node)}
            except ValueError:
                candidates = set()
            sets.append(frozenset(candidates - self.usage.in_use))
            if not all(usable_on(c, node) for c in self._claims(pod).allocated) or not candidates:
                continue
            usage = self.usage.copy()
            while counts[i] < MAX_PER_NODE:
                found, _ = try_allocate(self.allocator, claims, node, usage)
                if found is None:
                    break
                taken = [r.device for a in found for r in a.results]
                need[i] = max(need[i], len(taken))
                for device_id in taken:
                    usage.take(self.allocator.devices.devices.get(device_id), device_id)
                counts[i] += 1
        return counts, sets, need

    # ------------------------------------------------------------------ choosing devices

    def choose(self, placed: Sequence[tuple[Pod, Node]]) -> tuple[dict[str, tuple[ClaimAllocation, ...]],
                                                                  dict[str, str]]:
        """The devices of each placed pod's claims to allocate, and the pods whose claims cannot
        be allocated on their node after all, with the reason. Node by node, the claims of all
        its pods are allocated together (one search: the exact answer to whether they all fit);
        when that fails, pod by pod in queue order, and the pods that do not fit are left out."""
        by_node: dict[str, list[Pod]] = {}
        nodes: dict[str, Node] = {}
        for pod, node in placed:
            if self._claims(pod).to_allocate:
                by_node.setdefault(node.name, []).append(pod)
                nodes[node.name] = node
        usage = self.usage.copy()
        chosen: dict[str, tuple[ClaimAllocation, ...]] = {}
        failed: dict[str, str] = {}
        for name in sorted(by_node):
            pods = queue_order(by_node[name])
            claims = [c for pod in pods for c in self._claims(pod).to_allocate]
            together, _ = try_allocate(self.allocator, claims, nodes[name], usage)
            if together is not None:
                found = iter(together)
                for pod in pods:
                    chosen[pod.key] = self._record(pod, [next(found) for _ in self._claims(pod).to_allocate], usage)
                continue
            for pod in pods:
                one, why = try_allocate(self.allocator, self._claims(pod).to_allocate, nodes[name], usage)
                if one is None:
                    failed[pod.key] = why
                else:
                    chosen[pod.key] = self._record(pod, one, usage)
        return chosen, failed

    def _record(self, pod: Pod, found: Sequence[Allocation], usage: Usage) -> tuple[ClaimAllocation, ...]:
        for allocation in found:
            for result in allocation.results:
                usage.take(self.allocator.devices.devices.get(result.device), result.device)
        return tuple(ClaimAllocation(c.name, a) for c, a in zip(self._claims(pod).to_allocate, found, strict=True))


def _components(items: Sequence[int], links: set[tuple[int, int]]) -> list[list[int]]:
    parent = {i: i for i in items}

    def root(i: int) -> int:
        while parent[i] != i:
            i = parent[i]
        return i

    for a, b in links:
        parent[root(a)] = root(b)
    groups: dict[int, list[int]] = {}
    for i in items:
        groups.setdefault(root(i), []).append(i)
    return list(groups.values())


def build(_args: None, ctx: RunContext) -> DynamicResources:
    snapshot = ctx.snapshot
    devices = snapshot.devices
    pending = [p for p in snapshot.pending if p.resource_claims and not p.unmodelled]
    claims = {p.key: resolve(p, devices) for p in pending}
    owner: dict[str, str] = {}
    waits: dict[str, str] = {}
    for pod in queue_order(pending):
        pod_claims = claims[pod.key]
        if pod_claims.rejection:
            continue
        shared = [c for c in pod_claims.to_allocate if owner.setdefault(c.key, pod.key) != pod.key]
        if shared:
            waits[pod.key] = f"resource claim {shared[0].key} is in the process of being allocated"
    return DynamicResources(Allocator(devices), claims, waits, Usage.of(devices))
