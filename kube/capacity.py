"""The nodes Karpenter could add: one candidate per (NodePool, instance type, zone, capacity type)
the NodePool's requirements admit, typed as the :class:`Node` it would register as.

A candidate's allocatable is what Karpenter packs pods against: the instance type's capacity less
its overhead (kube-reserved, system-reserved, eviction threshold: ``InstanceType.Allocatable``)
and less the requests of the DaemonSet pods that would run on it (``getDaemonOverhead``: a
DaemonSet whose pod template tolerates the NodePool's taints, PreferNoSchedule ignored, and whose
node selector and required node affinity the node's labels satisfy). Karpenter decides the
DaemonSets per NodePool on its requirements; here they are decided on the labels of each
candidate, which is what the DaemonSet controller will do once the node exists.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from kubeplace.kube.catalogue import InstanceType, Offering
from kubeplace.kube.errors import InputError, expect_mapping, expect_name, expect_namespace, unique_objects
from kubeplace.kube.karpenter import (
    ARCH_LABEL,
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
from kubeplace.kube.selectors import IN, requirement_matches, terms_match
from kubeplace.kube.taints import untolerated

DAEMON_SET = ("apps", "DaemonSet")
CAPACITY_APIS = (("karpenter.sh", "v1", "nodepools"), ("karpenter.sh", "v1", "nodeclaims"),
                 ("apps", "v1", "daemonsets"))
"""What adding nodes reads from a cluster (group, version, plural): Karpenter's NodePools and
NodeClaims and the DaemonSets; a cluster without Karpenter's CRDs lists no NodePool."""
T = TypeVar("T")


@dataclass(frozen=True)
class Candidate:
    """A node Karpenter could launch for ``node_pool`` as ``instance_type`` bought as ``offering``."""

    node_pool: NodePool
    instance_type: InstanceType
    offering: Offering
    node: Node
    """As it would register: labels, taints (the NodePool's and its startup taints) and the
    allocatable left for pending pods once its DaemonSet pods run."""
    daemon_overhead: Mapping[str, int]
    """The requests of the DaemonSet pods that would run on it (``pods`` counts them)."""

    @property
    def startup_taints(self) -> tuple[Taint, ...]:
        """Taints the node registers with that a daemon removes once it is ready: Karpenter
        packs pods without asking them to tolerate these."""
        return self.node_pool.startup_taints


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
                   daemon_pods: Sequence[Pod] = ()) -> Candidate:
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
    return Candidate(pool, instance_type, offering, node, overhead)

def candidate_nodes(pools: Iterable[NodePool], catalogue: Sequence[InstanceType],
                    daemon_pods: Sequence[Pod] = ()) -> list[Candidate]:
    """Every candidate: one per (NodePool, instance type, zone, capacity type) admitted, NodePools
    by descending weight then name (Karpenter's order), offerings in catalogue order."""
    ordered = sorted(pools, key=lambda pool: (-pool.weight, pool.name))
    return [candidate_node(pool, instance_type, offering, daemon_pods)
            for pool in ordered for instance_type, offering in admitted_offerings(pool, catalogue)]


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
