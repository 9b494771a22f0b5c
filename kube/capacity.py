"""The nodes Karpenter could add: one candidate, a :class:`NodeTemplate`, per (NodePool, instance
type, zone, capacity type) the NodePool's requirements admit, with the :class:`Node` it would
register as.

A candidate's allocatable is what Karpenter packs pods against: the instance type's capacity less
its overhead (kube-reserved, system-reserved, eviction threshold: ``InstanceType.Allocatable``)
and less the requests of the DaemonSet pods that would run on it (``getDaemonOverhead``: a
DaemonSet whose pod template tolerates the NodePool's taints, PreferNoSchedule ignored, and whose
node selector and required node affinity the node's labels satisfy). Karpenter decides the
DaemonSets per NodePool on its requirements; here they are decided on the labels of each
candidate, which is what the DaemonSet controller will do once the node exists.

A static NodePool (``spec.replicas`` set) has no candidate: Karpenter's provisioner leaves it out
(``nodepoolutils.IsStatic``). A NodePool with ``minValues`` on a key has candidates only when its
admitted offerings hold at least that many distinct values of the key (else Karpenter skips it:
"NodePool requirements filtered out all compatible available instance types due to minValues
incompatibility"), and each candidate carries the *alternatives* its NodeClaim lists beside it to
keep those values (:func:`with_alternatives`).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, TypeVar

from kubeplace.kube import node_claims
from kubeplace.kube.catalogue import InstanceType, Offering
from kubeplace.kube.errors import InputError, expect_mapping, expect_name, expect_namespace, unique_objects
from kubeplace.kube.karpenter import (
    ARCH_LABEL,
    GROUP,
    GTE,
    HOSTNAME_LABEL,
    INSTANCE_TYPE_LABEL,
    LTE,
    NODE_CLAIM,
    NODE_POOL,
    NODEPOOL_LABEL,
    OS_LABEL,
    parse_node_claim,
    parse_node_pool,
)
from kubeplace.kube.node_selector import Requirement
from kubeplace.kube.objects import Node, NodeClaim, NodePool, Pod, Taint
from kubeplace.kube.price import Price
from kubeplace.kube.selectors import IN, requirement_matches, terms_match
from kubeplace.kube.taints import untolerated

DAEMON_SET = ("apps", "DaemonSet")
CAPACITY_APIS = (("karpenter.sh", "v1", "nodepools"), ("karpenter.sh", "v1", "nodeclaims"),
                 ("apps", "v1", "daemonsets"))
"""What adding nodes reads from a cluster (group, version, plural): Karpenter's NodePools and
NodeClaims and the DaemonSets; a cluster without Karpenter's CRDs lists no NodePool."""
T = TypeVar("T")


@dataclass(frozen=True)
class NodeTemplate:
    """A node Karpenter could launch for ``node_pool`` as ``instance_type`` bought as ``offering``:
    Karpenter's ``NodeClaimTemplate`` narrowed to one instance type and offering. It is what the
    provisioning buys, what a plan's new node carries, the node the model places pods on
    (:meth:`to_node`) and the NodeClaim that launches it (:meth:`to_nodeclaim`)."""

    node_pool: NodePool
    instance_type: InstanceType
    offering: Offering
    node: Node
    """As it would register: labels, taints (the NodePool's and its startup taints) and the
    allocatable left for pending pods once its DaemonSet pods run."""
    daemon_overhead: Mapping[str, int]
    """The requests of the DaemonSet pods that would run on it (``pods`` counts them)."""
    alternatives: tuple[NodeTemplate, ...] = ()
    """With ``minValues`` in its NodePool: the other (instance type, offering) its NodeClaim admits
    (none cheaper, so that the provider still launches this instance type), which keep at least
    minValues distinct values of each such key; ``node``'s allocatable is the least of theirs and
    its own."""

    @property
    def startup_taints(self) -> tuple[Taint, ...]:
        """Taints the node registers with that a daemon removes once it is ready: Karpenter
        packs pods without asking them to tolerate these."""
        return self.node_pool.startup_taints

    @property
    def price(self) -> Price:
        return self.offering.price

    def to_node(self, name: str = "") -> Node:
        """The node as its pods see it once it is ready (the startup taints removed); named
        ``name`` (its hostname label too) when given, as a plan's new node ``<nodePool>-<n>``."""
        node = replace(self.node, taints=self.node_pool.taints)
        return replace(node, name=name, labels={**node.labels, HOSTNAME_LABEL: name}) if name else node

    def to_nodeclaim(self, planned_node: str, pods_requests: Mapping[str, int],
                     pool: node_claims.PoolIdentity) -> dict[str, Any]:
        """The NodeClaim (a ``karpenter.sh/v1`` object, ready to create) for the new node
        ``planned_node`` of a plan, as ``kube.node_claims`` says; ``pods_requests`` are the
        summed requests of the pods planned on it (integer units)."""
        node_pool = self.node_pool
        ref = node_pool.node_class_ref
        labels = {**node_pool.labels, NODEPOOL_LABEL: node_pool.name}
        if ref is not None:
            labels[node_claims.node_class_label(ref.group, ref.kind)] = ref.name
        hashes = node_claims.HASH_ANNOTATIONS
        annotations = {key: pool.annotations[key] for key in hashes if key in pool.annotations}
        annotations[node_claims.PLANNED_NODE_ANNOTATION] = planned_node
        annotations[node_claims.DO_NOT_DISRUPT] = "true"
        requests = dict(pods_requests)
        for resource, amount in self.daemon_overhead.items():
            requests[resource] = requests.get(resource, 0) + amount
        spec: dict[str, Any] = {
            "requirements": node_claims.claim_requirements(node_pool, {**self.node.labels, **labels},
                                                           [a.node.labels for a in self.alternatives]),
            "resources": {"requests": {r: node_claims.quantity(r, a) for r, a in sorted(requests.items())}},
            "expireAfter": node_pool.expire_after,
        }
        if node_pool.taints:
            spec["taints"] = [node_claims.taint_object(t) for t in node_pool.taints]
        if node_pool.startup_taints:
            spec["startupTaints"] = [node_claims.taint_object(t) for t in node_pool.startup_taints]
        if ref is not None:
            spec["nodeClassRef"] = {"group": ref.group, "kind": ref.kind, "name": ref.name}
        return {
            "apiVersion": f"{GROUP}/{node_claims.VERSION}", "kind": "NodeClaim",
            "metadata": {
                "generateName": f"{node_pool.name}-", "labels": dict(sorted(labels.items())),
                "annotations": annotations,
                "ownerReferences": [{"apiVersion": f"{GROUP}/{node_claims.VERSION}", "kind": "NodePool",
                                     "name": node_pool.name, "uid": pool.uid, "blockOwnerDeletion": True}],
            },
            "spec": spec,
        }


def capacity_objects(kinds: Mapping[tuple[str, str], Sequence[tuple[Mapping[str, Any], str]]], nodes: Sequence[Node],
                     parse_pod: Callable[[Mapping[str, Any], str], Pod], label: Callable[[Mapping[str, Any]], str],
                     ) -> tuple[tuple[NodePool, ...], tuple[NodeClaim, ...], tuple[Pod, ...]]:
    """A snapshot's NodePools and NodeClaims and each DaemonSet's pod: what adding nodes reads.
    Limits are not checked against the nodes here (``kube.karpenter.check_limits`` is, by what
    adds nodes): Karpenter's in-flight launches may overshoot a limit, and a plan that adds no
    node has no reason to refuse such a cluster. ``parse_pod`` and ``label`` are
    ``kube.parse``'s (which reads these objects through this function)."""
    def located(parse: Callable[[Mapping[str, Any], str], T], obj: Mapping[str, Any], where: str) -> T:
        try:
            return parse(obj, where)
        except InputError as error:
            raise error.located(file=where, obj=label(obj)) from None

    pools = unique_objects((located(parse_node_pool, obj, where) for obj, where in kinds.get(NODE_POOL, [])),
                           lambda pool: pool.name, "NodePool")
    claims = unique_objects((located(parse_node_claim, obj, where) for obj, where in kinds.get(NODE_CLAIM, [])),
                            lambda claim: claim.name, "NodeClaim")
    daemons = [located(lambda raw, at: daemon_set_pod(raw, lambda pod: parse_pod(pod, at)), obj, where)
               for obj, where in kinds.get(DAEMON_SET, [])]
    return tuple(pools.values()), tuple(claims.values()), tuple(sorted(daemons, key=lambda pod: pod.key))


def daemon_set_pod(obj: Mapping[str, Any], parse_pod: Any) -> Pod:
    """The pod an apps/v1 DaemonSet runs on each node, from its template, as Karpenter builds it
    (``PodForDaemonSet``: the template's spec, limits standing in for missing requests, which
    ``parse_pod`` does for every pod). Named after the DaemonSet."""
    metadata = expect_mapping(obj.get("metadata"), "metadata")
    template = expect_mapping(expect_mapping(obj.get("spec"), "spec").get("template"), "spec.template")
    template_metadata = expect_mapping(template.get("metadata"), "spec.template.metadata")
    pod = {"apiVersion": "v1", "kind": "Pod",
           "metadata": {**template_metadata, "name": expect_name(metadata), "namespace": expect_namespace(metadata)},
           "spec": expect_mapping(template.get("spec"), "spec.template.spec")}
    try:
        found: Pod = parse_pod(pod)
    except InputError as error:
        raise InputError(error.problem, field=_template_field(error.field), expected=error.expected) from None
    return found


def _template_field(field: str) -> str:
    if field.startswith("metadata.") and not field.startswith(("metadata.name", "metadata.namespace")):
        return f"spec.template.{field}"
    return f"spec.template.{field}" if field.startswith("spec") else field


def admitted_offerings(pool: NodePool, catalogue: Iterable[InstanceType]) -> list[tuple[InstanceType, Offering]]:
    """The (instance type, available offering) pairs ``pool``'s requirements admit, in catalogue
    order. A requirement on a label the instance type and offering do not define constrains
    nothing here: the NodePool sets that label itself (a single-value In) or leaves it unset."""
    found = []
    for instance_type in catalogue:
        for offering in instance_type.offerings:
            if not offering.available:
                continue
            defined = defined_labels(instance_type, offering)
            if all(_admits(requirement, defined) for requirement in pool.requirements):
                found.append((instance_type, offering))
    return found


def defined_labels(instance_type: InstanceType, offering: Offering) -> dict[str, str]:
    """The labels the instance type and offering fix (name, architecture, the one OS if single,
    family/size..., zone, capacity type)."""
    labels = {**instance_type.labels, INSTANCE_TYPE_LABEL: instance_type.name, ARCH_LABEL: instance_type.architecture,
              **offering.labels}
    if len(instance_type.operating_systems) == 1:
        labels[OS_LABEL] = instance_type.operating_systems[0]
    return labels


def _admits(requirement: Requirement, defined: Mapping[str, str]) -> bool:
    """Whether a NodePool requirement allows the instance type and offering. The OS of a type with
    several is allowed when any of them is (``os`` is then absent from ``defined``)."""
    if requirement.key not in defined:
        return True
    value = defined[requirement.key]
    if requirement.operator in (GTE, LTE):
        if not value.lstrip("-").isdigit():
            return False
        bound = int(requirement.values[0])
        return int(value) >= bound if requirement.operator == GTE else int(value) <= bound
    return requirement_matches(requirement, {requirement.key: value})


def candidate_node(pool: NodePool, instance_type: InstanceType, offering: Offering,
                   daemon_pods: Sequence[Pod] = ()) -> NodeTemplate:
    """The node Karpenter would register for one admitted (instance type, offering) of ``pool``
    (kwok's ``addInstanceLabels``: the NodePool's template labels and ``karpenter.sh/nodepool``,
    its single-value In requirements, the instance type's and the offering's labels, the
    hostname), with allocatable net of overhead and DaemonSet pods."""
    labels: dict[str, str] = {**pool.labels, NODEPOOL_LABEL: pool.name}
    labels.update({r.key: r.values[0] for r in pool.requirements if r.operator == IN and len(r.values) == 1})
    labels.update(defined_labels(instance_type, offering))
    systems = _operating_systems(pool, instance_type)
    if len(systems) == 1:
        labels[OS_LABEL] = systems[0]
    name = candidate_name(pool.name, instance_type.name, offering)
    labels[HOSTNAME_LABEL] = name
    labels = dict(sorted(labels.items()))
    overhead = daemon_overhead(name, labels, pool.taints, daemon_pods)
    allocatable = {resource: max(0, amount - overhead.get(resource, 0))
                   for resource, amount in instance_type.allocatable().items()}
    node = Node(name=name, labels=labels, taints=(*pool.taints, *pool.startup_taints), allocatable=allocatable,
                source=instance_type.source)
    return NodeTemplate(pool, instance_type, offering, node, overhead)

def candidate_nodes(pools: Iterable[NodePool], catalogue: Sequence[InstanceType],
                    daemon_pods: Sequence[Pod] = ()) -> list[NodeTemplate]:
    """Every candidate: one per (NodePool, instance type, zone, capacity type) admitted, NodePools
    by descending weight then name (Karpenter's order), offerings in catalogue order; none of a
    static NodePool or of one whose minValues the catalogue cannot meet (:func:`unused_pools`)."""
    ordered = sorted(pools, key=lambda pool: (-pool.weight, pool.name))
    found: list[NodeTemplate] = []
    for pool in ordered:
        if pool.replicas is not None:
            continue
        admitted = admitted_offerings(pool, catalogue)
        if unmet_min_values(pool, admitted):
            continue
        found += with_alternatives(pool, [candidate_node(pool, t, o, daemon_pods) for t, o in admitted])
    return found


STATIC_POOL = ("NodePool {} is not used: it is static (spec.replicas), and Karpenter's provisioner launches no node "
               "for it")
MIN_VALUES_POOL = ("NodePool {} is not used: NodePool requirements filtered out all compatible available instance "
                   "types due to minValues incompatibility (minValues requirement is not met for label(s) {})")


def unused_pools(pools: Iterable[NodePool], catalogue: Sequence[InstanceType]) -> list[str]:
    """Why each NodePool that :func:`candidate_nodes` leaves out is left out, in Karpenter's words."""
    out = []
    for pool in sorted(pools, key=lambda pool: (-pool.weight, pool.name)):
        if pool.replicas is not None:
            out.append(STATIC_POOL.format(pool.name))
            continue
        unmet = unmet_min_values(pool, admitted_offerings(pool, catalogue))
        if unmet:
            out.append(MIN_VALUES_POOL.format(pool.name, sorted(unmet)))
    return out


def key_values(instance_type: InstanceType, offering: Offering, key: str) -> set[str]:
    """The values of label ``key`` an (instance type, offering) defines: its label, or every OS
    of a type with several; none for a key it does not define (which therefore never meets a
    minValues, as in Karpenter)."""
    if key == OS_LABEL:
        return set(instance_type.operating_systems)
    value = defined_labels(instance_type, offering).get(key)
    return set() if value is None else {value}


def unmet_min_values(pool: NodePool, admitted: Sequence[tuple[InstanceType, Offering]]) -> dict[str, int]:
    """Key -> distinct values found, for each ``minValues`` of ``pool`` the admitted offerings do
    not meet (``InstanceTypes.SatisfiesMinValues``, counting the values admitted)."""
    unmet = {}
    for key, least in pool.min_values.items():
        found = set().union(*(key_values(t, o, key) for t, o in admitted))
        if len(found) < least:
            unmet[key] = len(found)
    return unmet


def with_alternatives(pool: NodePool, candidates: Sequence[NodeTemplate]) -> list[NodeTemplate]:
    """The candidates of ``pool`` with the alternatives their NodeClaims list to keep the NodePool's
    minValues (see :class:`NodeTemplate`), and their allocatable the least of all of them: pods
    packed on the node then fit every alternative, as Karpenter's minValues asks of a NodeClaim.
    A candidate for which no such set exists (the dearest types, whose alternatives would be
    cheaper and launched instead) is left out."""
    if not pool.min_values:
        return list(candidates)
    found = _Found(candidates, pool.min_values)
    out = []
    for candidate in candidates:
        alternatives = _alternatives(pool, candidate, found)
        if alternatives is None:
            continue
        allocatable = dict(candidate.node.allocatable)
        for other in alternatives:
            for resource in allocatable:
                allocatable[resource] = min(allocatable[resource], other.node.allocatable.get(resource, 0))
        out.append(replace(candidate, node=replace(candidate.node, allocatable=allocatable),
                           alternatives=tuple(alternatives)))
    return out


class _Found:
    """A NodePool's candidates indexed for :func:`_alternatives`: by instance type, cheapest
    first, with their label keys and the values of each minValues key."""

    def __init__(self, candidates: Sequence[NodeTemplate], keys: Iterable[str]) -> None:
        self.by_type: dict[str, list[NodeTemplate]] = {}
        for candidate in candidates:
            self.by_type.setdefault(candidate.instance_type.name, []).append(candidate)
        self.shape = {c.node.name: frozenset(c.node.labels) - {HOSTNAME_LABEL} for c in candidates}
        self.peers: dict[tuple[frozenset[str], frozenset[tuple[str, str]] | None], list[NodeTemplate]] = {}
        for candidate in sorted(candidates, key=lambda c: c.offering.price):
            shape = self.shape[candidate.node.name]
            self.peers.setdefault((shape, None), []).append(candidate)
            self.peers.setdefault((shape, frozenset(candidate.offering.labels.items())), []).append(candidate)
        self.values = {c.node.name: {key: key_values(c.instance_type, c.offering, key) for key in keys}
                       for c in candidates}

    def admitted(self, group: Sequence[NodeTemplate]) -> list[NodeTemplate]:
        """The candidates of ``group[0]``'s label keys a NodeClaim listing ``group`` admits: their
        instance types crossed with their offerings' zones and capacity types."""
        shape = self.shape[group[0].node.name]
        zones = {c.offering.zone for c in group}
        capacity_types = {c.offering.capacity_type for c in group}
        return [c for name in dict.fromkeys(c.instance_type.name for c in group) for c in self.by_type[name]
                if c.offering.zone in zones and c.offering.capacity_type in capacity_types
                and self.shape[c.node.name] == shape]


def _alternatives(pool: NodePool, chosen: NodeTemplate, found: _Found) -> list[NodeTemplate] | None:
    """Alternatives for ``chosen`` (:class:`NodeTemplate`), taken greedily: each brings a value a
    minValues still lacks, keeps everything the NodeClaim admits at least as dear as ``chosen``
    (the kwok provider launches the instance type whose cheapest offering is cheapest, the first
    listed, ``chosen``'s, on a tie), and registers the same label keys; those holding as much as
    ``chosen`` first, then those other than ``chosen``'s type at its price (between offerings
    of one type at one price the provider picks at random), then the cheapest. Unless a minValues
    is on an offering's label (zone, capacity type), only offerings with ``chosen``'s are taken.
    None when no set meets every minValues."""
    name, price = chosen.node.name, chosen.offering.price
    elsewhere = any(key in chosen.offering.labels for key in pool.min_values)  # else pinned: zone, capacity type
    peers = found.peers[(found.shape[name], None if elsewhere else frozenset(chosen.offering.labels.items()))]
    options = sorted((c for c in peers if c.offering.price >= price and c.node.name != name),
                     key=lambda c: (not _holds(c, chosen), c.instance_type.name == chosen.instance_type.name
                                    and c.offering.price == price, c.offering.price))
    group = [chosen]
    while True:
        admitted = found.admitted(group)
        have = {key: set().union(*(found.values[c.node.name][key] for c in admitted)) for key in pool.min_values}
        lacking = [key for key, least in pool.min_values.items() if len(have[key]) < least]
        if not lacking:
            return [c for c in admitted if c.node.name != name]
        listed = {c.node.name for c in admitted}
        taken = next((c for c in options if c.node.name not in listed
                      and any(found.values[c.node.name][key] - have[key] for key in lacking)
                      and all(o.offering.price >= price for o in found.admitted([*group, c]))), None)
        if taken is None:
            return None
        group.append(taken)


def _holds(candidate: NodeTemplate, chosen: NodeTemplate) -> bool:
    """Whether ``candidate``'s allocatable is at least ``chosen``'s in every resource."""
    return all(candidate.node.allocatable.get(r, 0) >= amount for r, amount in chosen.node.allocatable.items())


def _operating_systems(pool: NodePool, instance_type: InstanceType) -> list[str]:
    """The instance type's operating systems the NodePool's OS requirements allow."""
    return [system for system in instance_type.operating_systems
            if all(requirement_matches(r, {OS_LABEL: system}) for r in pool.requirements if r.key == OS_LABEL)]


_NAME_UNSAFE = re.compile(r"[^a-z0-9.-]+")


def candidate_name(pool: str, instance_type: str, offering: Offering) -> str:
    """A node name (a DNS-1123 subdomain) that says which candidate it is."""
    raw = "-".join((pool, instance_type, offering.zone, offering.capacity_type)).lower()
    return _NAME_UNSAFE.sub("-", raw).strip("-.")[:253].rstrip("-.")


def daemon_overhead(node_name: str, labels: Mapping[str, str], taints: Sequence[Taint],
                    daemon_pods: Sequence[Pod]) -> dict[str, int]:
    """The summed requests of the DaemonSet pods that would run on a node of these labels: those
    tolerating the NodePool's ``taints`` (not its startup taints, as ``isDaemonPodCompatible``)
    whose node selector and required node affinity the labels satisfy."""
    total: dict[str, int] = {}
    for pod in daemon_pods:
        if untolerated(pod.tolerations, taints):
            continue
        if not all(requirement_matches(Requirement(k, IN, (v,)), labels) for k, v in pod.node_selector.items()):
            continue
        if not terms_match(pod.required_terms, labels, node_name):
            continue
        for resource, amount in pod.requests.items():
            total[resource] = total.get(resource, 0) + amount
    return dict(sorted(total.items()))
