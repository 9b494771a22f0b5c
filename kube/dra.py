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

from kubeplace.kube.node_selector import SelectorTerm

AttributeValue = int | bool | str | tuple[int, int, int]
"""An attribute's value: int, bool, string, or a version (major, minor, patch)."""
ALL = "All"
EXACT_COUNT = "ExactCount"
DEVICE_CLASS_KIND = "DeviceClass"
DELETE_PROTECTION = "resource.kubernetes.io/delete-protection"
"""The finalizer the kube-scheduler adds to a claim it allocates (resourceapi.Finalizer)."""
EXTENDED_CLAIM_ANNOTATION = "resource.kubernetes.io/extended-resource-claim"
"""Marks the claim the kube-scheduler creates for a pod's extended resources served by DRA."""
IMPLICIT_EXTENDED_PREFIX = "deviceclass.resource.kubernetes.io/"
"""A DeviceClass ``c`` always serves the extended resource ``deviceclass.resource.kubernetes.io/c``."""
RESERVED_FOR_MAX = 256
"""ResourceClaimReservedForMaxSize: the most consumers a claim is reserved for at once; a claim
reserved for that many is in use for any other pod."""
EXTENDED_CLAIM = "<extended-resources>"
"""The name of a pod's extended resource claim until it is created (specialClaimInMemName)."""


def is_extended_resource(resource: str) -> bool:
    """A resource DRA may serve (IsDRAExtendedResourceName): an extended resource (a domain that
    is not kubernetes.io's, not ``requests.*``) or a DeviceClass's implicit name."""
    if resource.startswith(IMPLICIT_EXTENDED_PREFIX):
        return True
    return "/" in resource and "kubernetes.io/" not in resource and not resource.startswith("requests.")


@dataclass(frozen=True)
class DeviceClass:
    name: str
    selectors: tuple[str, ...] = ()
    """CEL expressions a device must all satisfy."""
    extended_resource: str = ""
    """``spec.extendedResourceName``: pods requesting this extended resource get its devices."""
    created: str = ""
    """``metadata.creationTimestamp`` (RFC 3339): of two classes naming one extended resource, the newer serves it."""
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
    unsupported: tuple[str, ...] = ()
    """The fields of its spec kubeplace does not model (``spec.devices.constraints[0].distinctAttribute``)."""
    allocation: Allocation | None = None
    reserved_for: tuple[str, ...] = ()
    """The uids of the pods it is reserved for."""
    owner_uid: str | None = None
    extended: bool = False
    """It is a pod's extended resource claim (the ``resource.kubernetes.io/extended-resource-claim`` annotation)."""
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

    def serves(self, resource: str, allocatable: Mapping[str, int]) -> bool:
        """DRA serves the extended resource on a node with this allocatable: a DeviceClass serves
        it and no device plugin gives the node any (shouldDelegateResourceToDRA)."""
        return (allocatable.get(resource, 0) <= 0 and is_extended_resource(resource)
                and self.class_for(resource) is not None)

    def class_for(self, resource: str) -> DeviceClass | None:
        """The DeviceClass serving an extended resource (the kube-scheduler's DeviceClassResolver):
        the class naming it in ``extendedResourceName`` (the newest, then the lowest name, when
        several do), else the class ``c`` of ``deviceclass.resource.kubernetes.io/c``."""
        naming = [c for c in self.classes.values() if c.extended_resource == resource]
        if naming:
            return sorted(sorted(naming, key=lambda c: c.name), key=lambda c: c.created, reverse=True)[0]
        if resource.startswith(IMPLICIT_EXTENDED_PREFIX):
            return self.classes.get(resource[len(IMPLICIT_EXTENDED_PREFIX):])
        return None

    @property
    def allocated(self) -> frozenset[DeviceId]:
        """Devices allocated to some claim."""
        return frozenset(r.device for c in self.claims.values() if c.allocation for r in c.allocation.results)


@dataclass(frozen=True)
class ContainerRequests:
    """A container's requests of extended resources (the ones DRA may serve), with its index in
    ``initContainers + containers`` and whether it runs as long as the pod (a regular container
    or a sidecar) or before the others (an init container)."""

    index: int
    name: str
    long_lived: bool
    requests: Mapping[str, int]
    positions: Mapping[str, int] = field(default_factory=dict)
    """Each of those resources' index in the container's requests, sorted by name."""


@dataclass(frozen=True)
class RequestMapping:
    """A ``status.extendedResourceClaimStatus.requestMappings`` entry: which request of the
    extended resource claim serves a container's request of a resource."""

    container: str
    resource: str
    request: str


@dataclass(frozen=True)
class ClaimAllocation:
    """What a plan allocates to one of a placed pod's claims (written before the pod is bound).
    For the pod's extended resource claim (``claim`` is :data:`EXTENDED_CLAIM`: created at
    binding), its device requests and the pod's request mappings too."""

    claim: str
    allocation: Allocation
    requests: tuple[DeviceRequest, ...] = ()
    mappings: tuple[RequestMapping, ...] = ()

    @property
    def extended(self) -> bool:
        return self.claim == EXTENDED_CLAIM
