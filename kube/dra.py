"""Dynamic Resource Allocation objects (``resource.k8s.io/v1``) as typed objects: DeviceClasses,
the devices ResourceSlices publish (with their pool's shared counters), ResourceClaims and
ResourceClaimTemplates, parsed in ``kube.dra_parse``.

Quantities (capacities, counters) are exact integers in milli-units, as ``kube.quantity.milli_value``
gives them. Attribute names are fully qualified (``domain/id``): an attribute a slice names without a
domain gets the driver's, as the API and the CEL environment do.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from kubeplace.kube.terms import SelectorTerm

AttributeValue = int | bool | str | tuple[int, int, int]
"""An attribute's value: int, bool, string, or a version (major, minor, patch)."""
ALL = "All"
EXACT_COUNT = "ExactCount"
DEVICE_CLASS_KIND = "DeviceClass"
DELETE_PROTECTION = "resource.kubernetes.io/delete-protection"
"""The finalizer the kube-scheduler adds to a claim it allocates (resourceapi.Finalizer)."""


@dataclass(frozen=True)
class DeviceClass:
    name: str
    selectors: tuple[str, ...] = ()
    """CEL expressions a device must all satisfy."""
    extended_resource: str = ""
    """``spec.extendedResourceName``: pods requesting this extended resource get its devices."""
    source: str = field(default="", compare=False)


@dataclass(frozen=True, order=True)
class DeviceId:
    driver: str
    pool: str
    device: str

    def __str__(self) -> str:
        return f"{self.driver}/{self.pool}/{self.device}"


@dataclass(frozen=True)
class CounterUse:
    """A device's ``consumesCounters`` entry: what it takes from one counter set of its pool."""

    counter_set: str
    counters: Mapping[str, int]


@dataclass(frozen=True)
class Device:
    """A device of a ResourceSlice, with where its slice makes it available: one node
    (``node``), the nodes a selector admits (``node_selector``), or every node (``all_nodes``)."""

    id: DeviceId
    node: str = ""
    node_selector: tuple[SelectorTerm, ...] | None = None
    all_nodes: bool = False
    attributes: Mapping[str, AttributeValue] = field(default_factory=dict)
    capacity: Mapping[str, int] = field(default_factory=dict)
    consumes: tuple[CounterUse, ...] = ()
    shared: bool = False
    """``allowMultipleAllocations``: several claims may have it at once."""
    tainted: bool = False
    """It has taints (kubeplace allocates no tainted device: it reads no device tolerations)."""


@dataclass(frozen=True)
class DeviceRequest:
    """A claim's request, or one of a request's ``firstAvailable`` alternatives (then its name
    is ``request/subrequest`` and it has no alternatives of its own)."""

    name: str
    device_class: str = ""
    selectors: tuple[str, ...] = ()
    mode: str = EXACT_COUNT
    count: int = 1
    alternatives: tuple[DeviceRequest, ...] = ()
    unsupported: str = ""
    """A feature of it kubeplace does not model ("adminAccess", ...; "" when none)."""


@dataclass(frozen=True)
class MatchAttribute:
    """A ``matchAttribute`` constraint: the devices of ``requests`` (every request when empty)
    share one value of ``attribute``."""

    attribute: str
    requests: tuple[str, ...] = ()


@dataclass(frozen=True)
class DeviceResult:
    """One allocated device: ``request`` is ``request`` or ``request/subrequest``."""

    request: str
    device: DeviceId


@dataclass(frozen=True)
class Allocation:
    results: tuple[DeviceResult, ...]
    node_selector: tuple[SelectorTerm, ...] | None = None
    """Where the allocation can be used (None: every node)."""


@dataclass(frozen=True)
class ResourceClaim:
    namespace: str
    name: str
    uid: str = ""
    resource_version: str = ""
    requests: tuple[DeviceRequest, ...] = ()
    constraints: tuple[MatchAttribute, ...] = ()
    allocation: Allocation | None = None
    reserved_for: tuple[str, ...] = ()
    """The uids of the pods it is reserved for."""
    owner_uid: str | None = None
    deleting: bool = False
    finalizers: tuple[str, ...] = ()
    source: str = field(default="", compare=False)

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"


@dataclass(frozen=True)
class PodClaim:
    """A pod's ``spec.resourceClaims`` entry: a claim by name, or one generated from a template."""

    name: str
    claim: str = ""
    template: str = ""


@dataclass(frozen=True)
class Devices:
    """The DRA objects of a snapshot: classes by name, devices by id (published pools, newest
    generation only), each pool's counter sets, claims and templates by ``namespace/name``."""

    classes: Mapping[str, DeviceClass] = field(default_factory=dict)
    devices: Mapping[DeviceId, Device] = field(default_factory=dict)
    counters: Mapping[tuple[str, str], Mapping[str, Mapping[str, int]]] = field(default_factory=dict)
    """(driver, pool) -> counter set -> counter -> amount (milli)."""
    claims: Mapping[str, ResourceClaim] = field(default_factory=dict)
    templates: Mapping[str, ResourceClaim] = field(default_factory=dict)

    def claim(self, namespace: str, name: str) -> ResourceClaim | None:
        return self.claims.get(f"{namespace}/{name}")

    @property
    def allocated(self) -> frozenset[DeviceId]:
        """Devices allocated to some claim."""
        return frozenset(r.device for c in self.claims.values() if c.allocation for r in c.allocation.results)


@dataclass(frozen=True)
class ClaimAllocation:
    """What a plan allocates to one of a placed pod's claims (written before the pod is bound)."""

    claim: str
    allocation: Allocation
