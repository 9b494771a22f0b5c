"""The backend-neutral placement problem, aggregated by pod class.

Pods with identical requests and identical eligibility are interchangeable, so the
problem counts them: ``y[c, i]`` = number of class-c pods put on node i. Every array
is indexed by class (K), node (N) and resource (R) in that order.

Capacity is the kubelet's rule, for every resource: the raw requests of a node's pods add
up to at most its allocatable, checked only for the resources a pod requests more than zero
of (an overcommitted node still takes pods that do not use the overcommitted resource). The
GPU device model (``gpu_count``, ``gpu_milli``, ``device_free``) is a rule on top.

Quantities are int64. A single request or allocatable is at most QUANTITY_LIMIT (the parser
refuses more; typed objects beyond are clamped: a request to "more than any node has", an
allocatable to the limit), and sums of requests saturate at FULL instead of wrapping around.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property

import numpy as np
import numpy.typing as npt

from kubeplace.kube.gpu_conventions import DEFAULT_CONVENTIONS, GpuConventions
from kubeplace.kube.objects import GangKey

IntArray = npt.NDArray[np.int64]
BoolArray = npt.NDArray[np.bool_]
FloatArray = npt.NDArray[np.float64]

QUANTITY_LIMIT = (1 << 53) - 1
"""The largest request or allocatable of one resource (milli-CPU, bytes, counts) modelled exactly."""
FULL = 1 << 55
"""What a sum of requests saturates at: more than any node's allocatable (a full node), and
far enough below 2^63 that a node's free capacity minus a request never wraps either."""


def clamp_request(amount: int) -> int:
    """A request in the modelled range; beyond it, more than any node has."""
    return min(max(amount, 0), QUANTITY_LIMIT + 1)


def clamp_allocatable(amount: int) -> int:
    return min(max(amount, 0), QUANTITY_LIMIT)


def saturated(exact: IntArray, approx: FloatArray) -> IntArray:
    """``exact`` int64 sums where their float estimate ``approx`` stays below FULL, FULL where
    it does not (there the int64 sum may have wrapped)."""
    return np.where(approx >= FULL, FULL, np.minimum(exact, FULL)).astype(np.int64)


def total_requests(counts: IntArray, demand: IntArray) -> IntArray:
    """``counts @ demand`` (requests of ``counts[a, k]`` pods of class k, per row a), saturated."""
    exact = counts @ demand
    return saturated(exact, counts.astype(np.float64) @ demand.astype(np.float64))


def summed_rows(n_rows: int, index: IntArray, amounts: IntArray, times: IntArray | None = None) -> IntArray:
    """(n_rows, R): row k of ``amounts`` (times ``times[k]``) added into row ``index[k]``, saturated."""
    exact = np.zeros((n_rows, amounts.shape[1]), dtype=np.int64)
    approx = np.zeros((n_rows, amounts.shape[1]), dtype=np.float64)
    factor = np.ones(len(index), dtype=np.int64) if times is None else times
    np.add.at(exact, index, amounts * factor[:, None])
    np.add.at(approx, index, amounts.astype(np.float64) * factor[:, None])
    return saturated(exact, approx)


def exact_sum(values: IntArray) -> int:
    """The exact sum of int64 values, past int64 if need be (Python ints then)."""
    if len(values) == 0:
        return 0
    if int(np.abs(values).max()) * len(values) < (1 << 63):
        return int(values.sum())
    return sum(int(v) for v in values.tolist())


def fits(free: IntArray, demand: IntArray) -> BoolArray:
    """The kubelet's resource rule (last axis: resources): every resource requested (> 0) is
    free; a resource not requested is not checked, even where the node is overcommitted."""
    return np.asarray(((free >= demand) | (demand <= 0)).all(axis=-1), dtype=np.bool_)


@dataclass(frozen=True)
class GroupCap:
    """At most ``cap[i]`` pods of ``classes`` together on node i (host ports, ...); with a
    ``domain``, at most ``cap[d]`` together on the nodes of domain d (a topology key's value:
    anti-affinity among the pods of one class, a fixed-floor spread)."""

    name: str
    classes: tuple[int, ...]
    cap: IntArray  # (N,), or (D,) with a domain
    plugin: str = ""
    """The constraint plugin that set it (explanations count its nodes under that plugin)."""
    domain: IntArray | None = None
    """(N,) each node's domain, an index into ``cap``; -1: the cap does not reach that node."""


UNCAPPED = 1 << 40
"""A cap no count reaches."""


@dataclass(frozen=True)
class Exclusion:
    """Required anti-affinity with pods of the batch on both sides (one term): in a domain
    (the term's topology key's value) holding a pod of ``carriers``, no other pod of
    ``matched`` (the classes the term selects). Carriers that match it themselves (in both
    lists) are at most one per domain; others may share one. Running pods on either side
    are filters, not this rule."""

    name: str
    carriers: tuple[int, ...]
    matched: tuple[int, ...]
    domain: IntArray  # (N,) -1: the node lacks the key (no domain, no rule)
    plugin: str = ""


@dataclass(frozen=True)
class Attraction:
    """Required pod affinity of one group (the carrier classes with the same term list): each
    carrier runs where every term's domain holds a supporter, a pod matching all the terms.
    Supporters are running pods (``bound_support``), planned pods of ``supporters`` (classes
    with no required affinity of their own), or the group's *starter*: when one is possible
    (``starters``: carriers that match the terms, while no running pod does), one cell (a
    domain per term) holding a starter may hold carriers without other support, as the
    kube-scheduler lets the first pod of a self-affine group through."""

    name: str
    carriers: tuple[int, ...]
    supporters: tuple[int, ...]
    domains: tuple[IntArray, ...]
    """Per term: (N,) each node's domain of its key, -1 without it."""
    bound_support: tuple[BoolArray, ...]
    """Per term: (D_t,) the domains where a running supporter is."""
    cell: IntArray
    """(N,) the node's cell (its tuple of domains over the terms), -1 when it lacks a key."""
    starters: tuple[int, ...] = ()
    """The carrier classes that may be the group's first pod (they match its terms; empty
    when a running supporter exists or no carrier matches)."""
    rivals: tuple[str, ...] = ()
    """Names of the groups whose starter may not be placed beside this group's (each matches
    the other's terms, so neither would be first)."""
    plugin: str = ""


@dataclass(frozen=True)
class Spread:
    """A DoNotSchedule topology spread constraint of the carrier classes (one signature: the
    namespace, selector, key, maxSkew, minDomains and eligible nodes). n_d counts the running
    and placed pods of ``counted`` on the eligible nodes of domain d; in every domain holding
    a placed carrier, n_d <= max_skew + L, where L is the smallest n_d over every domain
    (``ordered``: the replay fills domains level by level) or the smallest running count
    (fixed floor: any order), and 0 when there are fewer than ``min_domains`` domains."""

    name: str
    carriers: tuple[int, ...]
    counted: tuple[int, ...]
    domain: IntArray  # (N,) -1 off the eligible nodes
    bound: IntArray  # (D,) running counted pods per domain
    max_skew: int
    min_domains: int
    ordered: bool
    plugin: str = ""

    @property
    def n_domains(self) -> int:
        return int(self.bound.shape[0])

    @property
    def floor(self) -> int:
        """The fixed floor B: the smallest running count (0 with fewer than min_domains domains)."""
        if self.n_domains < self.min_domains or self.n_domains == 0:
            return 0
        return int(self.bound.min())


@dataclass(frozen=True)
class Headroom:
    """The requests on node i may add up to at most ``share[i]`` of its allocatable, for each of
    ``resources`` (``Overcommit``). ``share`` is at most 1: never beyond the kubelet's own limit."""

    resources: tuple[str, ...]
    share: FloatArray  # (N,)
    plugin: str = ""


def headroom_limit(capacity: IntArray, share: FloatArray) -> IntArray:
    """(N,) the most requests of one resource on each node under ``share`` of ``capacity``
    (rounded down, never above it)."""
    return np.minimum(np.floor(capacity.astype(np.float64) * np.minimum(share, 1.0)).astype(np.int64), capacity)


@dataclass(frozen=True)
class Gang:
    """All or nothing: either the gang's running and placed members reach ``min_member`` together,
    or none of its pods is placed. (A PodGroup's ``minResources`` is not a placement condition:
    ``kube.gang_admission``; a group its scheduler would not admit is ``blocked``.)

    ``classes`` hold only this gang's pods (gang membership is part of the class key).
    """

    key: GangKey
    classes: tuple[int, ...]
    min_member: int
    """The PodGroup's minMember."""
    running: int = 0
    """Members already running (bound); they count towards ``min_member``."""
    topology_key: str = ""
    """The node label all members must share one value of ("" = no such rule)."""
    domain: IntArray | None = None
    """(N,) with a topology key: each node's domain (index of its label value), -1 where the
    gang may not run (no label, or another domain than its running members'). All placed
    members share one domain; the aggregation also masks -1 nodes out of eligibility."""
    preferred: IntArray | None = None
    """(N,) with a preferred topology key: each node's domain for that key (nodes without
    the label form one domain of their own); members should use as few as they can."""
    blocked: str = ""
    """Why none of its pods may be placed (its PodGroup is missing or unreadable, or its scheduler
    would not admit its minResources now); the aggregation makes them eligible nowhere. "" for a
    gang that can be planned."""

    @property
    def still_needed(self) -> int:
        """Members this plan must place for the gang to run (0: the running ones suffice)."""
        return max(self.min_member - self.running, 0)


@dataclass(frozen=True)
class NodePreference:
    """A score plugin's raw per-node score for some classes (the kube-scheduler's Score before
    NormalizeScore: the weights of the matched preferred node terms, the untolerated
    PreferNoSchedule taints, the inter-pod affinity towards running pods). It is normalised to
    0..100 over each class's eligible nodes as that plugin's NormalizeScore does
    (``models.preferences``); a pod loses what its node scores below the class's best node."""

    plugin: str
    classes: tuple[int, ...]
    raw: IntArray  # (len(classes), N)
    normalise: str
    """``default`` (raw * 100 / max), ``reverse`` (100 - that) or ``minmax`` (InterPodAffinity)."""


@dataclass(frozen=True)
class DomainPreference:
    """Pods of ``carriers`` prefer domains holding few pods of ``counted`` (a ScheduleAnyway
    spread constraint, a preferred anti-affinity term its carriers match): each placed carrier
    costs ``points`` per counted pod already in its domain. Over classes and domains that is
    ``points * f(n_d)`` with n_d the placed counted pods in domain d and
    f(n) = n (n - 1) / 2 + n * bound[d] when carriers and counted are the same pods (each pair
    once, each running pod once per placed one), and ``points * X_C(d) * bound[d]`` otherwise
    (the placed carriers against the running pods only)."""

    name: str
    plugin: str
    carriers: tuple[int, ...]
    counted: tuple[int, ...]
    domain: IntArray  # (N,) -1: outside every domain
    bound: IntArray  # (D,) running counted pods per domain
    points: int
    """Score points one counted pod in the domain costs a placed carrier (before the weight)."""

    @property
    def self_counted(self) -> bool:
        return set(self.carriers) == set(self.counted)


Preference = NodePreference | DomainPreference
Rule = GroupCap | Gang | Headroom | Exclusion | Attraction | Spread | NodePreference | DomainPreference
"""What a constraint plugin may return."""


@dataclass(frozen=True)
class Workload:
    """The shapes of the pods the cluster runs and waits for, with their counts: the task
    distribution against which GPU fragmentation is measured (FGD)."""

    demand: IntArray  # (M, R) requests of one pod of the shape
    gpu_count: IntArray  # (M,)
    gpu_milli: IntArray  # (M,)
    count: IntArray  # (M,) pods of the shape, running and pending


@dataclass(frozen=True)
class Problem:
    resources: tuple[str, ...]
    node_names: tuple[str, ...]
    capacity: IntArray  # (N, R) allocatable
    used: IntArray  # (N, R) requests of pods already bound (saturated at FULL)
    demand: IntArray  # (K, R) request of ONE pod of the class (raw, as the kubelet counts it)
    count: IntArray  # (K,) pods in the class
    weight: IntArray  # (K,) objective weight of placing one pod (from priority), >= 1
    eligible: BoolArray  # (K, N) every filter passed and one pod fits the free capacity
    members: tuple[tuple[int, ...], ...]
    """Per class: indices into Snapshot.pending; one object standing for several pods
    (``Pod.copies``) is alone in its class, so ``count`` exceeds ``len(members[c])`` only there."""
    group_caps: tuple[GroupCap, ...] = ()
    gangs: tuple[Gang, ...] = ()
    exclusions: tuple[Exclusion, ...] = ()
    attractions: tuple[Attraction, ...] = ()
    spreads: tuple[Spread, ...] = ()
    preferences: tuple[Preference, ...] = ()
    """The score plugins' preferences over classes (stage 2 only: they never decide who is placed)."""
    gpu_count: IntArray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    """(K,) GPU devices one pod of the class takes (0: none); empty when no class needs GPUs."""
    gpu_milli: IntArray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    """(K,) milli-GPU it needs free on each of those devices (1000: whole GPUs)."""
    device_free: IntArray = field(default_factory=lambda: np.zeros((0, 0), dtype=np.int64))
    """(N, D) free milli-GPU per device; -1 where a node has fewer devices."""
    workload: Workload | None = None
    """Running and pending pod shapes, for fragmentation; None means the pending classes."""
    queue_rank: IntArray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    """(len(Snapshot.pending),) each pending pod's place in the scheduling queue (priority,
    then creation time, as kube-scheduler's PrioritySort); empty: the pending order."""
    gpu: GpuConventions = DEFAULT_CONVENTIONS
    """Which resources carry GPU requests (the device resource and the share resources)."""
    measured: IntArray | None = None
    """(N, R) the measured load of the running pods (``kube.metrics.measured_load``: usage plus
    the requests of pods the metrics cannot include yet); where a node or resource is not
    measured, its requests (``used``). None: no metrics at all."""
    limit: IntArray | None = None
    """(N, R) the most that requests on a node may add up to (``Headroom`` rules), at most its
    allocatable; None: the allocatable (``capacity``)."""
    weight_stage: IntArray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    """(K,) the weight stage of each class, 0 holding the highest priorities; empty: one stage.
    ``weight`` is strict within a stage (one pod of a higher tier outweighs every pod of the lower
    ones), and every stage outweighs all the stages after it: strict weights over all tiers would
    not fit an int64 objective, so the solvers place stage by stage (``stage_weights`` compared
    as a tuple) and :meth:`weigh` is exact in Python integers."""

    @property
    def has_domain_rules(self) -> bool:
        """Rules whose answer depends on other pods of the batch in a topology domain."""
        return bool(self.exclusions or self.attractions or self.spreads
                    or any(c.domain is not None for c in self.group_caps))

    @property
    def has_devices(self) -> bool:
        return bool(self.gpu_count.shape[0]) and bool((self.gpu_count > 0).any())

    @property
    def free(self) -> IntArray:
        """(N, R) what pods may still request on each node: its limit less the running pods' requests."""
        return (self.capacity if self.limit is None else self.limit) - self.used

    def base(self, measured: bool) -> IntArray:
        """(N, R) the load the running pods put on each node, before any placement: measured
        (where metrics exist, when ``measured``) or requested."""
        return self.measured if measured and self.measured is not None else self.used

    @property
    def n_stages(self) -> int:
        return int(self.weight_stage.max(initial=0)) + 1

    @property
    def stage_of_class(self) -> IntArray:
        """(K,) each class's weight stage (0 everywhere with a single stage)."""
        return self.weight_stage if self.weight_stage.shape[0] else np.zeros(self.n_classes, dtype=np.int64)

    @cached_property
    def stage_scale(self) -> tuple[int, ...]:
        """What one unit of each stage's weight is worth exactly: more than everything every
        later stage can place together."""
        scale = [1] * self.n_stages
        below = 0
        for s in reversed(range(self.n_stages)):
            scale[s] = below + 1
            below += scale[s] * self.stage_weights(np.arange(self.n_classes, dtype=np.int64), self.count)[s]
        return tuple(scale)

    @cached_property
    def exact_weight(self) -> tuple[int, ...]:
        """(K,) one pod's weight over all stages, exact (Python integers)."""
        scale = self.stage_scale
        return tuple(int(w) * scale[int(s)] for w, s in zip(self.weight, self.stage_of_class, strict=True))

    def stage_weights(self, cls: IntArray, counts: IntArray) -> tuple[int, ...]:
        """The weight that ``counts`` pods of classes ``cls`` place in each stage, the highest
        stage first (tuples compare lexicographically, as the stages do)."""
        per = self.weight[cls] * counts
        if self.n_stages == 1:
            return (int(per.sum()),)
        stage = self.stage_of_class[cls]
        return tuple(int(per[stage == s].sum()) for s in range(self.n_stages))

    def weigh(self, cls: IntArray, counts: IntArray) -> int:
        """The exact placed weight of ``counts`` pods of classes ``cls`` over every stage."""
        if self.n_stages == 1:
            return int((self.weight[cls] * counts).sum())
        return sum(w * scale for w, scale in zip(self.stage_weights(cls, counts), self.stage_scale, strict=True))

    @property
    def n_classes(self) -> int:
        return int(self.count.shape[0])

    @property
    def n_nodes(self) -> int:
        return len(self.node_names)

    def resource_index(self, name: str) -> int | None:
        return self.resources.index(name) if name in self.resources else None


@dataclass(frozen=True)
class DeviceUse:
    """GPU devices taken by placed pods, as COO: ``counts[k]`` pods of class ``cls[k]``
    use device ``device[k]`` of node ``node[k]`` (a pod needing n devices appears on n)."""

    cls: IntArray
    node: IntArray
    device: IntArray
    counts: IntArray

    @staticmethod
    def empty() -> DeviceUse:
        z = np.zeros(0, dtype=np.int64)
        return DeviceUse(z, z.copy(), z.copy(), z.copy())

    def select(self, keep: npt.NDArray[np.bool_]) -> DeviceUse:
        return DeviceUse(self.cls[keep], self.node[keep], self.device[keep], self.counts[keep])

    @staticmethod
    def concat(parts: list[DeviceUse]) -> DeviceUse:
        return DeviceUse(*(np.concatenate([getattr(p, f) for p in parts]).astype(np.int64)
                           for f in ("cls", "node", "device", "counts")))


@dataclass(frozen=True)
class Assignment:
    """A placement in class counts, as COO triplets: ``counts[k]`` pods of class
    ``cls[k]`` on node ``node[k]``. Pairs are unique. ``devices`` says which GPU devices
    the GPU pods take (empty when no class needs GPUs)."""

    cls: IntArray
    node: IntArray
    counts: IntArray
    devices: DeviceUse = field(default_factory=DeviceUse.empty)

    @staticmethod
    def empty() -> Assignment:
        z = np.zeros(0, dtype=np.int64)
        return Assignment(z, z.copy(), z.copy())

    def on_nodes(self, nodes: IntArray, inside: bool = True) -> Assignment:
        """The part of this assignment on ``nodes`` (or, with inside=False, elsewhere)."""
        keep = np.isin(self.node, nodes) == inside
        dkeep = np.isin(self.devices.node, nodes) == inside
        return Assignment(self.cls[keep], self.node[keep], self.counts[keep], self.devices.select(dkeep))

    def merge(self, other: Assignment) -> Assignment:
        """Union of two assignments on disjoint nodes."""
        return Assignment(np.concatenate([self.cls, other.cls]), np.concatenate([self.node, other.node]),
                          np.concatenate([self.counts, other.counts]),
                          DeviceUse.concat([self.devices, other.devices]))

    @staticmethod
    def from_dense(y: IntArray) -> Assignment:
        c, i = np.nonzero(y)
        return Assignment(c.astype(np.int64), i.astype(np.int64), y[c, i].astype(np.int64))

    def dense(self, n_classes: int, n_nodes: int) -> IntArray:
        y = np.zeros((n_classes, n_nodes), dtype=np.int64)
        np.add.at(y, (self.cls, self.node), self.counts)
        return y

    def placed_per_class(self, n_classes: int) -> IntArray:
        return np.bincount(self.cls, weights=self.counts, minlength=n_classes).astype(np.int64)

    def devices_left(self, problem: Problem) -> IntArray:
        """(N, D) free milli per device once this assignment's GPU pods have theirs."""
        left = problem.device_free.copy()
        d = self.devices
        np.subtract.at(left, (d.node, d.device), problem.gpu_milli[d.cls] * d.counts)
        return left

    def load(self, problem: Problem) -> IntArray:
        """(N, R) requests that this assignment adds to each node (saturated at FULL)."""
        return summed_rows(problem.n_nodes, self.node, problem.demand[self.cls], self.counts)
