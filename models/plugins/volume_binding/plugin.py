"""VolumeBinding: a pod's PersistentVolumeClaims, as the kube-scheduler's VolumeBinding plugin
decides them (pkg/scheduler/framework/plugins/volumebinding).

Per pod (its PreFilter, :func:`models.volumes.resolve`): a claim missing, lost or being deleted,
an ephemeral volume whose claim does not exist yet, or an unbound claim of Immediate binding mode
rejects the pod on every node with the kube-scheduler's message. Per node (its Filter): a bound
claim's volume must admit the node ("didn't match PersistentVolume's node affinity", or "bound to
non-existent pv(s)"); a delayed claim (unbound, WaitForFirstConsumer) needs a free static volume
there or dynamic provisioning allowed there ("didn't find available persistent volumes to bind",
"did not have enough free storage").

A static volume must never go to two claims. How that is kept across the batch depends on the
claim's storage class:

- a class with a provisioner: a claim goes where provisioning is allowed (a free static volume
  that matches is still preferred when volumes are chosen, as the kube-scheduler does);
- a class without one whose free volumes each admit one node (local volumes): a group rule per
  node and per set of claim shapes that share volumes caps the pods to what the free volumes there
  can serve (Hall's condition, with each pod counted for its most claims of the set);
- a class without one whose volumes admit several nodes (zonal, or no node affinity): each claim,
  in queue order, reserves one free volume that matches it, and may go only where that volume can.

An unbound delayed claim shared by several pending pods (a ReadWriteOncePod one aside:
VolumeRestrictions refuses the others) is bound once, for the first of them in queue order (its
owner): the kube-scheduler assumes its volume (or, provisioned, its selected node) when it places
the owner, and then finds that volume pre-bound to the claim for each other pod. So the others
(its followers) go where the owner goes: a rule of the batch puts each follower on a node holding
its owner (the owner's volume is node-local, or provisioned for the owner's node; a zonal one
could serve more nodes, a sound simplification), and the claim counts once against the free
volumes. After the plan, :meth:`VolumeBinding.choose` names the volume each placed claim binds to,
or provisioning on the pod's node, one choice per claim.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property

import numpy as np

from kubeplace.kube.objects import Node, Pod
from kubeplace.kube.selectors import terms_match
from kubeplace.kube.storage_objects import (
    READ_WRITE_ONCE_POD,
    ClaimChoice,
    PersistentVolume,
    PersistentVolumeClaim,
    Storage,
)
from kubeplace.models.framework import ClassView, RunContext
from kubeplace.models.plugins.volume_binding.pools import VolumeReach, local_caps, match_on_node
from kubeplace.models.problem import Attraction, BoolArray, Gang, GroupCap
from kubeplace.models.volumes import (
    BIND_CONFLICT,
    NODE_CONFLICT,
    NOT_ENOUGH_SPACE,
    PV_NOT_EXIST,
    PodClaims,
    can_provision,
    fits,
    prebound_to,
    provisioning,
    queue_order,
    reaches,
    registered_drivers,
    resolve,
    shape,
    static_match,
)

NAME = "VolumeBinding"
NO_CLAIMS = PodClaims()
"""A pod without claims (shared: frozen)."""
NO_CLAIMS_KEY = ("", (), (), (), ())
"""The pod key of a pod without claims, followed or owned claims (what ``pod_key`` spells out)."""
PROVISION, LOCAL, POOLED = "provision", "local", "pooled"
"""How a storage class's claims get static volumes (see the module docstring)."""


@dataclass(frozen=True)
class VolumeBinding:
    storage: Storage
    claims: Mapping[str, PodClaims]
    """Pending pod key -> its claims."""
    follows: Mapping[str, tuple[tuple[str, str], ...]] = field(default_factory=dict)
    """Pending pod key -> (claim key, owner pod key) of each shared unbound claim an earlier pod owns."""
    owns: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    """Pending pod key -> the shared unbound claims it owns (binds for the pods that follow it)."""
    modes: Mapping[str, str] = field(default_factory=dict)
    """Storage class -> PROVISION, LOCAL or POOLED."""
    prebound: Mapping[str, PersistentVolume] = field(default_factory=dict)
    """Claim key -> the free volume whose claimRef already names it."""
    tickets: Mapping[str, str] = field(default_factory=dict)
    """Claim key -> the volume it reserved (POOLED classes)."""
    reach: VolumeReach = field(default_factory=VolumeReach)
    drivers: frozenset[str] = frozenset()
    label_keys: tuple[str, ...] = ()
    uses_name: bool = False
    name: str = NAME
    reason: str = BIND_CONFLICT

    # ------------------------------------------------------------------ filter

    @cached_property
    def _without_claims(self) -> bool:
        """No pending pod has a claim (the common case): no pod's key to spell per call."""
        return all(claims == NO_CLAIMS for claims in self.claims.values())

    def _claims(self, pod: Pod) -> PodClaims:
        if self._without_claims:
            return NO_CLAIMS
        return self.claims.get(pod.key, NO_CLAIMS)

    def pod_key(self, pod: Pod) -> Hashable:
        if self._without_claims and not self.follows and not self.owns:
            return NO_CLAIMS_KEY
        claims = self._claims(pod)
        bound = tuple(("missing",) if pv is None else (pv.node_affinity,) for _, pv in claims.bound)
        return (claims.rejection, self.follows.get(pod.key, ()), self.owns.get(pod.key, ()), bound,
                tuple(map(self._delayed_key, claims.delayed)))

    def _delayed_key(self, claim: PersistentVolumeClaim) -> Hashable:
        """Pods whose claims have equal keys fit the same nodes: a pre-bound or reserved volume
        counts by where it can be used (its node affinity), not by name."""
        pre = self.prebound.get(claim.key)
        ticket = self.storage.volumes.get(self.tickets.get(claim.key, ""))
        return (claim.selected_node, shape(claim), (pre.node_affinity,) if pre else None,
                (ticket.node_affinity,) if ticket else None, self.modes.get(claim.storage_class, PROVISION))

    def node_key(self, node: Node) -> Hashable:
        labels = tuple(node.labels.get(k) for k in self.label_keys)
        csi = self.storage.csi_nodes.get(node.name)
        drivers = tuple(d for d in csi.drivers if d.name in self.drivers) if csi is not None else ()
        return (labels, drivers, node.name if self.uses_name else "")

    def node_key_basis(self) -> object:
        return (self.label_keys, self.storage.csi_nodes, self.drivers, self.uses_name)

    def rejection(self, pod: Pod) -> str:
        return self._claims(pod).rejection

    def filter(self, pod: Pod, nodes: Sequence[Node]) -> BoolArray:
        if self.rejection(pod):
            return np.zeros(len(nodes), dtype=np.bool_)
        return np.array([not reasons for reasons in self.node_reasons(pod, nodes)], dtype=np.bool_)

    def node_reasons(self, pod: Pod, nodes: Sequence[Node]) -> list[tuple[str, ...]]:
        """Per node, the reasons the kube-scheduler's Filter gives (FindPodVolumes), in its order."""
        claims = self._claims(pod)
        return [self._reasons(claims, node) for node in nodes]

    def _reasons(self, claims: PodClaims, node: Node) -> tuple[str, ...]:
        bound_ok, volumes_exist = True, True
        for _, volume in claims.bound:
            if volume is None:
                volumes_exist = False
                break
            if not reaches(volume, node):
                bound_ok = False
                break
        unbound_ok, enough = True, True
        if any(c.selected_node is not None and c.selected_node != node.name for c in claims.delayed):
            unbound_ok = False
        elif claims.delayed:
            chosen: set[str] = set()
            to_provision = [c for c in claims.delayed if c.selected_node is not None]
            for claim in (c for c in claims.delayed if c.selected_node is None):
                volume = self._static(claim, node, chosen)
                if volume is None:
                    to_provision.append(claim)
                else:
                    chosen.add(volume.name)
            if to_provision:
                unbound_ok, enough = provisioning(to_provision, self.storage, node, self.drivers)
        flags = ((not bound_ok, NODE_CONFLICT), (not unbound_ok, BIND_CONFLICT), (not enough, NOT_ENOUGH_SPACE),
                 (not volumes_exist, PV_NOT_EXIST))
        return tuple(reason for failed, reason in flags if failed)

    def _static(self, claim: PersistentVolumeClaim, node: Node, chosen: set[str]) -> PersistentVolume | None:
        """The static volume the claim would bind to on ``node`` for this pod alone, if any."""
        pre = self.prebound.get(claim.key)
        if pre is not None:
            return pre if reaches(pre, node) and pre.name not in chosen else None
        mode = self.modes.get(claim.storage_class, PROVISION)
        if mode == POOLED:
            ticket = self.storage.volumes.get(self.tickets.get(claim.key, ""))
            return ticket if ticket is not None and ticket.name not in chosen and reaches(ticket, node) else None
        if mode == LOCAL:
            return next((v for v in self.reach.local(claim.storage_class, node.name)
                         if v.name not in chosen and static_match(claim, v)), None)
        return None  # a provisioned class: placed where provisioning is allowed

    # ------------------------------------------------------------------ constraint

    def constraints(self, view: ClassView) -> Sequence[GroupCap | Gang | Attraction]:
        """Per class of local volumes: caps by node so that the placed claims can all have one;
        per shared unbound claim: its followers on a node holding its owner."""
        caps: list[GroupCap | Gang | Attraction] = []
        for class_name in sorted(c for c, mode in self.modes.items() if mode == LOCAL):
            needs = [self._local_needs(pod, class_name) for pod in view.class_pods]
            caps += local_caps(class_name, needs, view.nodes, self.reach)
        return caps + self._with_owners(view)

    def _local_needs(self, pod: Pod, class_name: str) -> list[PersistentVolumeClaim]:
        claims = self._claims(pod)
        followed = {key for key, _ in self.follows.get(pod.key, ())}
        return [c for c in claims.delayed if c.storage_class == class_name and c.selected_node is None
                and c.key not in self.prebound and c.key not in followed]

    def _with_owners(self, view: ClassView) -> list[Attraction]:
        """Per shared claim: its followers' classes may go only to a node holding its owner's
        (the owner's class holds the owner alone: its key names the claims it owns)."""
        followers: dict[str, list[int]] = defaultdict(list)
        owner_class: dict[str, int] = {}
        for c, pod in enumerate(view.class_pods):
            for claim_key, _ in self.follows.get(pod.key, ()):
                followers[claim_key].append(c)
            for claim_key in self.owns.get(pod.key, ()):
                owner_class[claim_key] = c
        n = len(view.nodes)
        node_index = np.arange(n, dtype=np.int64)
        return [Attraction(f"shared claim {claim_key}", tuple(carriers),
                           (owner_class[claim_key],) if claim_key in owner_class else (), (node_index,),
                           (np.zeros(n, dtype=np.bool_),), node_index)
                for claim_key, carriers in sorted(followers.items())]

    # ------------------------------------------------------------------ choosing volumes

    def choose(self, placed: Sequence[tuple[Pod, Node]]) -> dict[str, tuple[ClaimChoice, ...]]:
        """For each placed pod with delayed claims, the volume each binds to ("" = provisioned
        for its node), the volumes of the whole plan distinct. A claim with no volume it may take
        is left out: the verifier then refuses that placement."""
        if self._without_claims:
            return {}
        reserved = {*self.tickets.values(), *(v.name for v in self.prebound.values())}
        chosen: dict[str, str] = {}  # claim key -> volume ("" provision): one choice per claim, shared by its pods
        local: dict[tuple[str, str], list[PersistentVolumeClaim]] = defaultdict(list)
        later: list[tuple[PersistentVolumeClaim, Node]] = []
        seen: set[str] = set()
        for pod, node in self._owners_first(placed):
            for claim in self._claims(pod).delayed:
                if claim.key in seen:
                    continue  # bound once: the first placed pod of the claim (its owner) chooses
                seen.add(claim.key)
                fixed = self._fixed_choice(claim, node)
                mode = self.modes.get(claim.storage_class, PROVISION)
                if fixed is not None:
                    chosen[claim.key] = fixed
                elif mode == LOCAL:
                    local[(node.name, claim.storage_class)].append(claim)
                elif mode == PROVISION:
                    later.append((claim, node))
        for (node_name, class_name), wanted in local.items():
            free = [v for v in self.reach.local(class_name, node_name) if v.name not in reserved]
            for claim, volume in zip(wanted, match_on_node(wanted, free), strict=True):
                if volume is not None:
                    chosen[claim.key] = volume.name
                    reserved.add(volume.name)
        for claim, node in later:
            static = self._free_static(claim, node, reserved)
            chosen[claim.key] = "" if static is None else static.name
            if static is not None:
                reserved.add(static.name)
        out: dict[str, list[ClaimChoice]] = defaultdict(list)
        for pod, _ in placed:
            for claim in {c.key: c for c in self._claims(pod).delayed}.values():
                if claim.key in chosen:
                    out[pod.key].append(ClaimChoice(claim.name, chosen[claim.key]))
        return {key: tuple(sorted(choices, key=lambda c: c.claim)) for key, choices in out.items()}

    def _owners_first(self, placed: Sequence[tuple[Pod, Node]]) -> list[tuple[Pod, Node]]:
        """The placed pods, those following a shared claim's owner after the others."""
        return sorted(placed, key=lambda pair: pair[0].key in self.follows)

    def _fixed_choice(self, claim: PersistentVolumeClaim, node: Node) -> str | None:
        """The choice that does not depend on the other claims: provisioning for a claim already
        selected for the node, the pre-bound volume, the reserved one; None otherwise."""
        if claim.selected_node is not None:
            return ""
        pre = self.prebound.get(claim.key)
        if pre is not None:
            return pre.name if reaches(pre, node) else ""
        if self.modes.get(claim.storage_class) == POOLED:
            ticket = self.tickets.get(claim.key)
            return ticket if ticket is not None else None
        return None

    def _free_static(self, claim: PersistentVolumeClaim, node: Node, reserved: set[str]) -> PersistentVolume | None:
        free = [v for v in self.reach.of_class(claim.storage_class)
                if v.name not in reserved and static_match(claim, v) and reaches(v, node)]
        return min(free, key=lambda v: (v.capacity, v.name), default=None)


def build(_args: None, ctx: RunContext) -> VolumeBinding:
    snapshot = ctx.snapshot
    storage = snapshot.storage
    pending = [p for p in snapshot.pending if not p.unmodelled]
    claims = {p.key: resolve(p, storage) for p in pending}
    reach = VolumeReach.of(storage, snapshot.nodes)
    modes = {name: _mode(name, storage, reach) for name in storage.classes}
    prebound = _prebound(claims.values(), storage)
    with_claims = [p for p in pending if claims[p.key] != NO_CLAIMS]  # (the others own, follow, reserve nothing)
    follows, tickets = _reserve(queue_order(with_claims), claims, modes, prebound, reach, snapshot.nodes)
    owns: dict[str, list[str]] = defaultdict(list)
    for followed in follows.values():
        for claim_key, owner in followed:
            if claim_key not in owns[owner]:
                owns[owner].append(claim_key)
    keys = {r.key for v in storage.volumes.values() for t in v.node_affinity or () for r in t.match_expressions}
    keys |= {r.key for c in storage.classes.values() for t in c.allowed_topologies for r in t.match_expressions}
    keys |= {r.key for c in storage.capacities for r in c.node_topology or ()}
    keys |= {k for n in storage.csi_nodes.values() for d in n.drivers for k in d.topology_keys}
    selected = any(c.selected_node is not None for pc in claims.values() for c in pc.delayed)
    uses_name = selected or LOCAL in modes.values()
    return VolumeBinding(storage, claims, follows, {k: tuple(sorted(v)) for k, v in owns.items()}, modes, prebound,
                         tickets, reach, registered_drivers(storage), tuple(sorted(keys)), uses_name)


def _mode(class_name: str, storage: Storage, reach: VolumeReach) -> str:
    if can_provision(storage.classes[class_name].provisioner):
        return PROVISION
    return LOCAL if all(len(reach.nodes(v)) <= 1 for v in reach.of_class(class_name)) else POOLED


def _prebound(all_claims: Iterable[PodClaims], storage: Storage) -> dict[str, PersistentVolume]:
    """Delayed claims whose name a volume's claimRef already holds (a volume pre-bound by a user,
    or by an earlier binding of kubeplace or the kube-scheduler that did not finish)."""
    by_ref: dict[tuple[str, str], list[PersistentVolume]] = defaultdict(list)
    for volume in storage.volumes.values():
        if volume.claim_ref is not None:
            by_ref[(volume.claim_ref.namespace, volume.claim_ref.name)].append(volume)
    found: dict[str, PersistentVolume] = {}
    for pod_claims in all_claims:
        for claim in pod_claims.delayed:
            for volume in by_ref.get((claim.namespace, claim.name), ()):
                if prebound_to(volume, claim) and fits(claim, volume):
                    found[claim.key] = volume
    return found


def _reserve(order: Sequence[Pod], claims: Mapping[str, PodClaims], modes: Mapping[str, str],
             prebound: Mapping[str, PersistentVolume], reach: VolumeReach,
             nodes: Sequence[Node]) -> tuple[dict[str, tuple[tuple[str, str], ...]], dict[str, str]]:
    """In queue order: the first pod of a shared unbound claim owns it (the others follow it:
    (claim key, owner) per pod), and each claim of a POOLED class reserves, once, the smallest
    free volume that matches it and can be used on a node the owner's node selector and affinity
    admit."""
    owner: dict[str, str] = {}
    follows: dict[str, tuple[tuple[str, str], ...]] = {}
    tickets: dict[str, str] = {}
    taken: set[str] = set(v.name for v in prebound.values())
    admitted: dict[Hashable, set[str]] = {}  # node selector and affinity -> the nodes they admit
    for pod in order:
        pod_claims = claims[pod.key]
        if pod_claims.rejection:
            continue
        shared = {c.key for c in pod_claims.delayed if owner.setdefault(c.key, pod.key) != pod.key
                  and READ_WRITE_ONCE_POD not in c.access_modes}  # those: VolumeRestrictions' conflict
        if shared:
            follows[pod.key] = tuple((key, owner[key]) for key in sorted(shared))
        pooled = [c for c in {c.key: c for c in pod_claims.delayed}.values()
                  if modes.get(c.storage_class) == POOLED and c.key not in prebound and c.selected_node is None
                  and owner[c.key] == pod.key and c.key not in tickets]
        if not pooled:
            continue
        rule = (tuple(sorted(pod.node_selector.items())), pod.required_terms)
        if rule not in admitted:
            admitted[rule] = {n.name for n in nodes if _admits(pod, n)}
        allowed = admitted[rule]
        for claim in pooled:
            found = next((v for v in reach.of_class(claim.storage_class)  # smallest first
                          if v.name not in taken and static_match(claim, v)
                          and any(name in allowed for name in reach.nodes(v))), None)
            if found is not None:
                tickets[claim.key] = found.name
                taken.add(found.name)
    return follows, tickets


def _admits(pod: Pod, node: Node) -> bool:
    """The pod's node selector and required node affinity admit the node."""
    return (all(node.labels.get(k) == v for k, v in pod.node_selector.items())
            and terms_match(pod.required_terms, node.labels, node.name))


