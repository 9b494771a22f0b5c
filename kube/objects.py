"""Typed cluster objects: the part of Nodes, Pods, gangs and the snapshot holding them that placement
reads (the storage objects are in ``kube.storage_objects``).

Everything downstream of parsing works on these frozen dataclasses, never on raw
dicts. Quantities are already exact integers here: milli-CPU for ``cpu``, bytes for
``memory`` and ``ephemeral-storage``, plain counts for ``pods`` and extended
resources, and milli-GPU shares for GPU-sharing requests (see ``kube.resources``).
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property

from kubeplace.kube.dra import ContainerRequests, Devices, PodClaim
from kubeplace.kube.memo import LastOf
from kubeplace.kube.node_selector import Requirement as Requirement
from kubeplace.kube.node_selector import SelectorTerm as SelectorTerm
from kubeplace.kube.storage_objects import Storage

CPU = "cpu"
MEMORY = "memory"
PODS = "pods"
GPU = "nvidia.com/gpu"

MIRROR_ANNOTATION = "kubernetes.io/config.mirror"
"""Set by the kubelet on the API copy (mirror) of a static pod."""
SOURCE_ANNOTATION = "kubernetes.io/config.source"
"""Where the kubelet got a pod from: ``api``, or a file or URL for a static pod."""
SYSTEM_CRITICAL_PRIORITY = 2_000_000_000
"""The kubelet's ``SystemCriticalPriority``: pods at or above it are system-critical."""

NO_SCHEDULE = "NoSchedule"
NO_EXECUTE = "NoExecute"
PREFER_NO_SCHEDULE = "PreferNoSchedule"

FINISHED = ("Succeeded", "Failed")
"""The phases of a pod that has finished (it holds nothing any more)."""


class SpecRule(enum.Enum):
    """Placement rules a pod spec may hold that only the plugin owning them interprets (each
    plugin says through ``unmodelled`` whether kubeplace models it); the value is the field."""

    REQUIRED_POD_AFFINITY = "spec.affinity.podAffinity.requiredDuringSchedulingIgnoredDuringExecution"
    REQUIRED_POD_ANTI_AFFINITY = "spec.affinity.podAntiAffinity.requiredDuringSchedulingIgnoredDuringExecution"
    HARD_TOPOLOGY_SPREAD = "spec.topologySpreadConstraints[].whenUnsatisfiable: DoNotSchedule"
    RESOURCE_CLAIMS = "spec.resourceClaims"
    INLINE_DISKS = "spec.volumes[].gcePersistentDisk|awsElasticBlockStore|rbd|iscsi"


@dataclass(frozen=True)
class Taint:
    key: str
    value: str
    effect: str


@dataclass(frozen=True)
class Toleration:
    key: str
    operator: str  # "Equal" or "Exists"
    value: str
    effect: str  # "" tolerates every effect


@dataclass(frozen=True)
class PodAffinityTerm:
    """An inter-pod (anti-)affinity term: the pods ``selector`` matches, in the namespaces
    the term names, within one ``topology_key`` domain (types.go ``newAffinityTerm``).

    ``selector`` None is a null labelSelector, which matches no pod; ``()`` (``{}``) matches
    every pod. It already holds ``key In [v]`` / ``key NotIn [v]`` for ``match_label_keys`` /
    ``mismatch_label_keys``, merged at parse time as the API server does at create (only into
    a non-null selector; the keys are kept for reference). The namespace scope is the owner's
    namespace when ``namespaces`` is empty and ``namespace_selector`` is None; otherwise the
    pods in ``namespaces`` plus those in namespaces whose labels ``namespace_selector``
    matches (``()``: every namespace; None: none by labels). ``weight`` is 1..100 for a
    preferred term and 0 for a required one."""

    selector: tuple[Requirement, ...] | None
    namespaces: tuple[str, ...] = ()
    namespace_selector: tuple[Requirement, ...] | None = None
    topology_key: str = ""
    match_label_keys: tuple[str, ...] = ()
    mismatch_label_keys: tuple[str, ...] = ()
    weight: int = 0


DO_NOT_SCHEDULE = "DoNotSchedule"
SCHEDULE_ANYWAY = "ScheduleAnyway"
HONOR = "Honor"
IGNORE = "Ignore"


@dataclass(frozen=True)
class SpreadConstraint:
    """One topologySpreadConstraints entry (``hard``: whenUnsatisfiable DoNotSchedule).

    ``selector`` None is a null labelSelector (matches no pod, counts nothing); ``()`` is
    ``{}``, which the kube-scheduler counts as 0 everywhere yet matches the incoming pod
    itself. ``selector`` already holds ``key In [pod's value]`` for each ``match_label_keys``
    entry the pod has a label for (the API server's merge at create; the kube-scheduler's own
    merge gives the same selector). Field defaults are the kube-scheduler's: minDomains 1,
    nodeAffinityPolicy Honor, nodeTaintsPolicy Ignore."""

    max_skew: int
    topology_key: str
    hard: bool
    selector: tuple[Requirement, ...] | None
    match_label_keys: tuple[str, ...] = ()
    min_domains: int = 1
    node_affinity_policy: str = HONOR
    node_taints_policy: str = IGNORE
    system_default: bool = False
    """One of the kube-scheduler's system default constraints (filled in by the profile, never
    parsed): a node is scored without holding every key of them (``requireAllTopologies`` false)."""


@dataclass(frozen=True)
class PreferredNodeTerm:
    """A preferredDuringSchedulingIgnoredDuringExecution node affinity term: ``weight``
    (1..100) counts for every node ``term`` matches."""

    weight: int
    term: SelectorTerm


@dataclass(frozen=True)
class HostPort:
    port: int
    protocol: str = "TCP"
    ip: str = ""  # "" and "0.0.0.0" mean every address


@dataclass(frozen=True)
class PodVolume:
    """A pod volume backed by a PersistentVolumeClaim of the pod's namespace: a
    ``persistentVolumeClaim`` volume, or a generic ``ephemeral`` one, whose claim the ephemeral
    volume controller creates as ``<pod>-<volume>``, owned by the pod."""

    name: str
    claim: str
    ephemeral: bool = False


@dataclass(frozen=True)
class Node:
    name: str
    uid: str = ""
    labels: Mapping[str, str] = field(default_factory=dict)
    taints: tuple[Taint, ...] = ()
    unschedulable: bool = False
    allocatable: Mapping[str, int] = field(default_factory=dict)
    source: str = field(default="", compare=False)
    """Where it was read from, for messages; not part of equality (files and API agree)."""
    provider_id: str = ""
    """``spec.providerID``: the machine, as its cloud names it (Karpenter matches its NodeClaims by it)."""


@dataclass(frozen=True, slots=True, weakref_slot=True)
class Pod:
    namespace: str
    name: str
    uid: str = ""
    labels: Mapping[str, str] = field(default_factory=dict)
    annotations: Mapping[str, str] = field(default_factory=dict)
    node_name: str = ""
    scheduler_name: str = "default-scheduler"
    priority: int = 0
    requests: Mapping[str, int] = field(default_factory=dict)
    """Effective requests per resource (init containers, sidecars, overhead applied);
    always includes ``pods: 1``. For a pod bound to a node, what the kube-scheduler counts there:
    the resources its status reports weigh in (in-place resize, ``kube.requests``)."""
    node_selector: Mapping[str, str] = field(default_factory=dict)
    required_terms: tuple[SelectorTerm, ...] | None = None
    """Required node affinity terms; None when the pod has none (matches every node)."""
    tolerations: tuple[Toleration, ...] = ()
    host_ports: tuple[HostPort, ...] = ()
    anti_affinity: tuple[PodAffinityTerm, ...] = ()
    """Required pod anti-affinity terms; they bind pods placed near this one once it runs.
    Terms with a null labelSelector are dropped: they match nothing and change nothing."""
    affinity: tuple[PodAffinityTerm, ...] = ()
    """Required pod affinity terms, ANDed; a null-selector term is kept (it matches no pod, so
    the pod fits nowhere)."""
    preferred_affinity: tuple[PodAffinityTerm, ...] = ()
    """Preferred pod affinity terms, each with its weight."""
    preferred_anti_affinity: tuple[PodAffinityTerm, ...] = ()
    """Preferred pod anti-affinity terms, each with its weight."""
    spread: tuple[SpreadConstraint, ...] = ()
    """topologySpreadConstraints, hard and soft, in spec order."""
    preferred_node_terms: tuple[PreferredNodeTerm, ...] = ()
    """Preferred node affinity terms."""
    phase: str = "Pending"
    deleting: bool = False
    scheduling_gates: tuple[str, ...] = ()
    spec_rules: frozenset[SpecRule] = frozenset()
    """Which of those rules the spec holds."""
    volumes: tuple[PodVolume, ...] = ()
    """The volumes backed by PersistentVolumeClaims, in spec order."""
    resource_claims: tuple[PodClaim, ...] = ()
    """``spec.resourceClaims``, in spec order."""
    generated_claims: Mapping[str, str] = field(default_factory=dict)
    """``status.resourceClaimStatuses``: entry name -> the claim generated from its template."""
    container_requests: tuple[ContainerRequests, ...] = ()
    """The containers' requests of extended resources (which DRA may serve), init containers first."""
    unmodelled: tuple[str, ...] = ()
    """Rules kubeplace does not model for this pod, as the profile's plugins say (empty as
    parsed: :meth:`models.framework.PluginSet.mark_unmodelled` fills it in for a run);
    non-empty means it is left to the default scheduler, with these reasons."""
    owner_kind: str = ""
    owner_name: str = ""
    owner_api_version: str = ""
    """The controller's ``ownerReferences`` entry (kind, name, apiVersion); "" without one."""
    creation: str = ""
    preemption_policy: str = "PreemptLowerPriority"
    """``spec.preemptionPolicy``, else its PriorityClass's: ``Never`` pods never preempt."""
    nominated_node: str = ""
    """``status.nominatedNodeName``: the node a preemption made room on for it."""
    scheduling_group: str = ""
    """``spec.schedulingGroup.podGroupName``: the Workload API PodGroup it belongs to ("" = none)."""
    reserved_for: str = ""
    """Set only on a stand-in for a pod that does not exist yet (a follower created once its leader
    is scheduled): the leader's ``namespace/name``. Stand-ins are planned, never bound."""
    copies: int = 1
    """How many identical pods this object stands for: 1, but for a leader's stand-in followers,
    which are one object however many they are (``kube.followers``): memory and time grow with
    the leaders, not with their jobs' sizes. The model counts it ``copies`` times in its class,
    the plan reserves it as counts per node."""
    source: str = field(default="", compare=False)
    """Where it was read from, for messages; not part of equality (files and API agree)."""
    key: str = field(init=False, repr=False, compare=False)
    """``namespace/name``; spelled once per object (every step of a plan asks for it, per pod)."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "key", f"{self.namespace}/{self.name}")

    @property
    def finished(self) -> bool:
        return self.phase in FINISHED


@dataclass(frozen=True, order=True)
class GangKey:
    """A gang's identity: its namespace and its name there (a PodGroup's, or the group name its
    member pods carry). Printed as ``namespace/name``."""

    namespace: str
    name: str

    def __str__(self) -> str:
        return f"{self.namespace}/{self.name}"


DEFAULT_GANG_TIMEOUT_SECONDS = 60


@dataclass(frozen=True)
class PodGroup:
    """A gang as declared: a PodGroup object (``kube.gangs`` reads every flavour) or, for a
    CRD-free gang, the labels and annotations of its pods."""

    namespace: str
    name: str
    min_member: int
    """The PodGroup's minMember: members that must run together (running ones count)."""
    min_resources: Mapping[str, int] = field(default_factory=dict)
    """Its ``minResources``, per resource: not a placement condition, only what its scheduler
    checks against the cluster's free room before it admits the group (``kube.gangs.admission``)."""
    timeout_seconds: int = DEFAULT_GANG_TIMEOUT_SECONDS
    created: str = ""
    origin: str = ""  # the API group, or "label" for the CRD-free form
    topology_key: str = ""
    """A node label key: all members on nodes with one value of it ("" = anywhere)."""
    preferred_topology_key: str = ""
    """A node label key: members on as few of its values as they can ("" = no preference)."""
    phase: str = ""
    """Its ``status.phase`` ("" when it has none): a Volcano PodGroup past ``Pending`` is admitted."""
    unreadable: str = ""
    """Why its pods are never placed: kubeplace cannot read its rules (an API version it does not
    know), or it is larger than any domain could hold (``kube.followers``) ("" = plannable)."""

    @property
    def key(self) -> GangKey:
        return GangKey(self.namespace, self.name)


@dataclass(frozen=True)
class NodeMetrics:
    """A node's measured usage (``metrics.k8s.io`` NodeMetrics): milli-CPU and bytes of memory
    (working set), measured at ``timestamp`` (seconds since the epoch)."""

    node: str
    usage: Mapping[str, int]
    timestamp: float
    source: str = field(default="", compare=False)


@dataclass(frozen=True)
class PodMetrics:
    """A pod's measured usage (``metrics.k8s.io`` PodMetrics), its containers summed."""

    namespace: str
    name: str
    usage: Mapping[str, int]
    timestamp: float
    source: str = field(default="", compare=False)

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"


@dataclass(frozen=True)
class DisruptionBudget:
    """A PodDisruptionBudget (policy/v1): the pods it selects in its namespace may be disrupted
    at most ``allowed`` more times now (``status.disruptionsAllowed``)."""

    namespace: str
    name: str
    selector: tuple[Requirement, ...] | None
    """None selects no pod (a null selector); () selects every pod of the namespace."""
    allowed: int
    disrupted: frozenset[str] = frozenset()
    """``status.disruptedPods``: pods already counted as disrupted (they do not count again)."""

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"


@dataclass(frozen=True)
class Controller:
    """A Service, ReplicationController, ReplicaSet or StatefulSet, as the default spread selector
    reads it (``kube.workloads``): its selector (a Service's or an RC's label map as ``In``
    requirements); None for a nil selector, which selects nothing."""

    kind: str
    namespace: str
    name: str
    selector: tuple[Requirement, ...] | None


# Karpenter's objects (read and checked by kube.karpenter)

@dataclass(frozen=True)
class NodePoolBudget:
    """One of ``spec.disruption.budgets``: at most ``nodes`` (a count, or a percentage of the
    NodePool's nodes, ``10%``) disrupted at once, for ``reasons`` (all when empty), during
    ``duration`` from each ``schedule`` (cron) time, or always without a schedule."""

    nodes: str = "10%"
    reasons: tuple[str, ...] = ()
    schedule: str = ""
    duration: str = ""

    def allowed(self, total: int) -> int:
        """How many of ``total`` nodes this budget lets be disrupted at once (a percentage
        rounds up, as ``GetAllowedDisruptionsByReason`` does with ``GetScaledValueFromIntOrPercent``)."""
        if self.nodes.endswith("%"):
            return -(-total * int(self.nodes[:-1]) // 100)
        return int(self.nodes)


@dataclass(frozen=True)
class NodeClassRef:
    group: str
    kind: str
    name: str


@dataclass(frozen=True)
class NodePool:
    name: str
    labels: Mapping[str, str] = field(default_factory=dict)
    """``spec.template.metadata.labels``: on every node of the pool."""
    taints: tuple[Taint, ...] = ()
    startup_taints: tuple[Taint, ...] = ()
    """Taints the node registers with and that a daemon removes once it is ready; pods need not
    tolerate them (Karpenter ignores them when packing)."""
    requirements: tuple[Requirement, ...] = ()
    """Key normalised (``NORMALIZED_LABELS``); operators of :data:`OPERATORS`."""
    min_values: Mapping[str, int] = field(default_factory=dict)
    """``minValues`` by requirement key: how many distinct values the launch must keep open."""
    limits: Mapping[str, int] = field(default_factory=dict)
    """Most capacity of all its nodes together per resource (integer units; ``nodes`` a count)."""
    weight: int = 0
    """1-100, higher tried first; 0 when unset (tried after every weighted NodePool)."""
    consolidation_policy: str = "WhenEmptyOrUnderutilized"
    consolidate_after: str = "0s"
    """A duration (``30s``, ``1h30m``) or ``Never``; see ``kube.karpenter_disruption``."""
    budgets: tuple[NodePoolBudget, ...] = (NodePoolBudget(),)
    node_class_ref: NodeClassRef | None = None
    expire_after: str = "720h"
    replicas: int | None = None
    """Static NodePools keep this many nodes; None for dynamic ones."""
    source: str = field(default="", compare=False)


@dataclass(frozen=True)
class NodeClaim:
    name: str
    node_pool: str
    """Its ``karpenter.sh/nodepool`` label; "" for a claim no NodePool owns."""
    labels: Mapping[str, str] = field(default_factory=dict)
    requirements: tuple[Requirement, ...] = ()
    taints: tuple[Taint, ...] = ()
    startup_taints: tuple[Taint, ...] = ()
    requests: Mapping[str, int] = field(default_factory=dict)
    capacity: Mapping[str, int] = field(default_factory=dict)
    """``status.capacity``: what counts against its NodePool's limits once launched."""
    allocatable: Mapping[str, int] = field(default_factory=dict)
    node_name: str = ""
    initialized_at: float | None = None
    """When its ``Initialized`` condition turned True (seconds since the epoch); None while not."""
    last_pod_event: float | None = None
    """``status.lastPodEventTime``: when a pod was last bound to its node or gone from it."""
    source: str = field(default="", compare=False)
    provider_id: str = ""
    """``status.providerID``: the machine launched for it, once launched."""


@dataclass(frozen=True)
class Snapshot:
    """Everything one planning run sees, taken at one moment."""

    nodes: tuple[Node, ...]
    pending: tuple[Pod, ...]
    """Pods that are ours to place: unbound, not terminating, ungated, our scheduler name."""
    bound: tuple[Pod, ...]
    """Pods with a node, not finished: they use capacity."""
    namespace_labels: Mapping[str, Mapping[str, str]] = field(default_factory=dict)
    pod_groups: tuple[PodGroup, ...] = ()
    """Gangs (PodGroup objects, or declared by pod labels) the pending pods may belong to."""
    source: str = field(default="", compare=False)
    skipped_kinds: Mapping[str, int] = field(default_factory=dict, compare=False)
    """Objects of kinds placement does not read, counted per ``Kind.group`` (``Kind`` for core)."""
    storage: Storage = field(default_factory=lambda: Storage())
    """PersistentVolumeClaims, PersistentVolumes, StorageClasses and the CSI objects."""
    node_metrics: Mapping[str, NodeMetrics] = field(default_factory=dict)
    """Measured usage by node name (``kube.metrics``); empty without (fresh) metrics."""
    pod_metrics: Mapping[str, PodMetrics] = field(default_factory=dict)
    """Measured usage by pod key ``namespace/name``."""
    notes: tuple[str, ...] = field(default=(), compare=False)
    """Warnings about how it was read, one line each (metrics API missing, stale metrics)."""
    disruption_budgets: tuple[DisruptionBudget, ...] = ()
    """PodDisruptionBudgets (files, or the cluster when read for preemption or rebalancing)."""
    reserved: tuple[Pod, ...] = ()
    """Stand-ins for followers that do not exist yet (``kube.followers``, one object per leader
    counting its followers, ``Pod.copies``) and for pods Kueue still gates (``kube.kueue``):
    planned with their leader, in its gang, never bound."""
    controllers: tuple[Controller, ...] = ()
    """Services, ReplicationControllers, ReplicaSets and StatefulSets (the default spread selector)."""
    devices: Devices = field(default_factory=lambda: Devices())
    """DeviceClasses, ResourceSlices' devices, ResourceClaims and templates (``kube.dra``)."""
    nominated: tuple[Pod, ...] = ()
    """Pods outside ``pending`` waiting for the node they are nominated to (``kube.nominated``):
    they hold its room against pods of lower or equal priority."""
    node_pools: tuple[NodePool, ...] = ()
    """Karpenter's NodePools (``kube.karpenter``): the nodes that could be added."""
    node_claims: tuple[NodeClaim, ...] = ()
    """Karpenter's NodeClaims: nodes launched or being launched for a NodePool."""
    daemon_pods: tuple[Pod, ...] = ()
    """The pod each DaemonSet runs on every node it selects (``kube.capacity.daemon_set_pod``):
    what a new node loses to DaemonSets before pending pods land."""

    @cached_property
    def bound_by_node(self) -> Mapping[str, tuple[Pod, ...]]:
        """The bound pods by node name, in snapshot order: indexed once per snapshot for every
        reader (the verifier's checks, the plan view), not once each; and once for the snapshots
        a plan derives from one another (defaulted, marked: the same ``bound`` tuple), not once
        per copy (``kube.memo.LastOf``)."""
        return _BOUND_BY_NODE(self.bound)

    @cached_property
    def node_by_name(self) -> Mapping[str, Node]:
        """The nodes by name, for every reader of the snapshot and of the snapshots derived from it
        (the same ``nodes`` tuple), and of the next cycle's on the same node objects, once."""
        return _NODE_BY_NAME(self.nodes)


def _by_node(bound: tuple[Pod, ...]) -> Mapping[str, tuple[Pod, ...]]:
    by_node: dict[str, list[Pod]] = {}
    for pod in bound:
        by_node.setdefault(pod.node_name, []).append(pod)
    return {name: tuple(pods) for name, pods in by_node.items()}


_BOUND_BY_NODE: LastOf[Mapping[str, tuple[Pod, ...]]] = LastOf(_by_node, kept=2)
"""``Snapshot.bound_by_node`` of the last bound tuple (shared: read-only)."""


def _by_name(nodes: tuple[Node, ...]) -> Mapping[str, Node]:
    return {node.name: node for node in nodes}


_NODE_BY_NAME: LastOf[Mapping[str, Node]] = LastOf(_by_name, kept=1)
"""``Snapshot.node_by_name`` of the last nodes (shared: read-only)."""
