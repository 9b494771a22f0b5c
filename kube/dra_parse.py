"""``resource.k8s.io/v1`` objects (DeviceClass, ResourceSlice, ResourceClaim,
ResourceClaimTemplate) and a pod's ``spec.resourceClaims`` into the typed objects of ``kube.dra``.

Parsed as the API server validates and defaults them (a request's allocationMode defaults to
ExactCount with count 1): request, subrequest, device and pod claim entry names are unique DNS
labels, a request is ``exactly`` or ``firstAvailable`` (at most 8 alternatives), a claim has at most
32 requests and 256 consumers, a slice sets exactly one of its node fields; CEL selectors are
compiled here, so a malformed one, or one over the API server's length or cost limit
(``kube.cel_limits``), is refused with its file, object and field. ``v1beta2`` objects have v1's
shape; ``v1beta1`` ones are converted as the API server converts them (``as_v1``).
Of each pool only the slices of its newest generation are kept, as the allocator uses them. A
claim naming a DeviceClass that does not exist is read as it is: its pod waits, in the
kube-scheduler's words (a claim of a DeviceClass deleted meanwhile is real state).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from kubeplace.kube.device_cel import CelError, CelLimit, compiled, version
from kubeplace.kube.dra import (
    ALL,
    EXACT_COUNT,
    EXTENDED_CLAIM_ANNOTATION,
    RESERVED_FOR_MAX,
    Allocation,
    AttributeValue,
    CounterUse,
    Device,
    DeviceClass,
    DeviceId,
    DeviceRequest,
    DeviceResult,
    Devices,
    MatchAttribute,
    PodClaim,
    RequestMapping,
    ResourceClaim,
)
from kubeplace.kube.dra_names import fully_qualified_name_problems
from kubeplace.kube.errors import (
    InputError,
    expect_controller,
    expect_int,
    expect_list,
    expect_mapping,
    expect_name,
    expect_namespace,
    expect_str,
    expect_string_map,
    unique_objects,
)
from kubeplace.kube.node_selector import SelectorTerm
from kubeplace.kube.quantity import QuantityError, milli_value
from kubeplace.kube.selectors import is_dns_label, is_qualified_name, node_selector_terms

RESOURCE_GROUP = "resource.k8s.io"
DEVICE_CLASS, RESOURCE_SLICE = (RESOURCE_GROUP, "DeviceClass"), (RESOURCE_GROUP, "ResourceSlice")
RESOURCE_CLAIM, CLAIM_TEMPLATE = (RESOURCE_GROUP, "ResourceClaim"), (RESOURCE_GROUP, "ResourceClaimTemplate")
DRA_KINDS = (DEVICE_CLASS, RESOURCE_SLICE, RESOURCE_CLAIM, CLAIM_TEMPLATE)
DRA_APIS = tuple((RESOURCE_GROUP, "v1", plural) for plural in
                 ("deviceclasses", "resourceslices", "resourceclaims", "resourceclaimtemplates"))
"""The resources the live reader lists."""
REQUESTS_MAX = 32
"""DeviceRequestsMaxSize: the most requests of a claim."""
FIRST_AVAILABLE_MAX = 8
"""FirstAvailableDeviceRequestMaxSize: the most alternatives of a ``firstAvailable`` request."""
SLICE_NODE_FIELDS = ("nodeName", "nodeSelector", "allNodes", "perDeviceNodeSelection")
"""Where a ResourceSlice's devices are available: exactly one of them is set."""

Sourced = tuple[Mapping[str, Any], str]


def pod_claims(spec: Mapping[str, Any], status: Mapping[str, Any]) -> tuple[tuple[PodClaim, ...], dict[str, str]]:
    """``spec.resourceClaims`` and ``status.resourceClaimStatuses`` (entry name -> generated claim)."""
    claims = []
    names: set[str] = set()
    for index, raw in enumerate(expect_list(spec.get("resourceClaims"), "spec.resourceClaims")):
        where = f"spec.resourceClaims[{index}]"
        entry = expect_mapping(raw, where)
        claim = PodClaim(_new_name(entry.get("name"), f"{where}.name", names, "resourceClaims entry"),
                         expect_str(entry.get("resourceClaimName"), f"{where}.resourceClaimName"),
                         expect_str(entry.get("resourceClaimTemplateName"), f"{where}.resourceClaimTemplateName"))
        if bool(claim.claim) == bool(claim.template):
            raise InputError("exactly one of resourceClaimName and resourceClaimTemplateName must be set",
                             field=where, expected="a claim name or a template name")
        claims.append(claim)
    generated = {}
    for index, raw in enumerate(expect_list(status.get("resourceClaimStatuses"), "status.resourceClaimStatuses")):
        where = f"status.resourceClaimStatuses[{index}]"
        entry = expect_mapping(raw, where)
        generated[expect_str(entry.get("name"), f"{where}.name")] = expect_str(
            entry.get("resourceClaimName"), f"{where}.resourceClaimName")
    return tuple(claims), generated


def _new_name(raw: object, field: str, seen: set[str], what: str) -> str:
    """A name that must be a DNS label no earlier ``what`` of its list has (validateSet's
    uniqueness, ValidateDNS1123Label); added to ``seen``."""
    name = expect_str(raw, field)
    if not name:
        raise InputError(f"missing {what} name", field=field, expected="a DNS label")
    if not is_dns_label(name):
        raise InputError(f"{name!r} is not a DNS label", field=field,
                         expected="lower-case letters, digits and '-', at most 63 characters")
    if name in seen:
        raise InputError(f"duplicate {what} name {name!r}", field=field, expected=f"a name no other {what} has")
    seen.add(name)
    return name


def _at_most(items: list[Any], limit: int, field: str, what: str) -> list[Any]:
    if len(items) > limit:
        raise InputError(f"{len(items)} {what}, more than the API server allows", field=field,
                         expected=f"at most {limit}")
    return items


def _selectors(raw: object, field: str) -> tuple[str, ...]:
    out = []
    for index, item in enumerate(expect_list(raw, field)):
        where = f"{field}[{index}].cel.expression"
        cel = expect_mapping(expect_mapping(item, f"{field}[{index}]").get("cel"), f"{field}[{index}].cel")
        expression = expect_str(cel.get("expression"), where)
        if not expression:
            raise InputError("missing CEL expression", field=where, expected="a CEL expression")
        try:
            compiled(expression)
        except CelLimit as error:  # the API server's own words, as for any field over a limit
            raise InputError(str(error), field=where,
                             expected="a CEL expression within the API server's limits") from None
        except CelError as error:
            raise InputError(f"CEL compile error: {error}", field=where, expected="a valid CEL expression") from None
        out.append(expression)
    return tuple(out)


def parse_device_class(obj: Mapping[str, Any], source: str = "") -> DeviceClass:
    metadata, spec = expect_mapping(obj.get("metadata"), "metadata"), expect_mapping(obj.get("spec"), "spec")
    created = metadata.get("creationTimestamp")
    extended = expect_str(spec.get("extendedResourceName"), "spec.extendedResourceName")
    if extended and not _is_extended_resource_name(extended):
        raise InputError(f"{extended!r} is not an extended resource name", field="spec.extendedResourceName",
                         expected="a domain-prefixed name outside kubernetes.io, e.g. example.com/gpu")
    return DeviceClass(expect_name(metadata), _selectors(spec.get("selectors"), "spec.selectors"), extended,
                       str(created) if created is not None else "", source)


def _is_extended_resource_name(name: str) -> bool:
    """As the API server validates a DeviceClass's extendedResourceName (IsExtendedResourceName):
    not native (no domain, or kubernetes.io's), not ``requests.*``, a qualified name as a quota."""
    native = "/" not in name or "kubernetes.io/" in name
    return not native and not name.startswith("requests.") and is_qualified_name(f"requests.{name}")


def _exactly(name: str, raw: Mapping[str, Any], field: str) -> DeviceRequest:
    mode = expect_str(raw.get("allocationMode"), f"{field}.allocationMode") or EXACT_COUNT
    if mode not in (EXACT_COUNT, ALL):
        raise InputError(f"unknown allocationMode {mode!r}", field=f"{field}.allocationMode",
                         expected=f"{EXACT_COUNT} or {ALL}")
    count = raw.get("count")
    count = 1 if count is None or mode == ALL else expect_int(count, f"{field}.count", 1, 128)
    device_class = expect_str(raw.get("deviceClassName"), f"{field}.deviceClassName")
    if not device_class:
        raise InputError("missing deviceClassName", field=f"{field}.deviceClassName", expected="a DeviceClass name")
    unsupported = ", ".join(what for what, present in (("adminAccess", raw.get("adminAccess") is True),
                                                        ("device tolerations", bool(raw.get("tolerations"))),
                                                        ("capacity requests", bool(raw.get("capacity")))) if present)
    return DeviceRequest(name, device_class, _selectors(raw.get("selectors"), f"{field}.selectors"), mode, count,
                         unsupported=unsupported)


def _request(raw: object, field: str, names: set[str]) -> DeviceRequest:
    request = expect_mapping(raw, field)
    name = _new_name(request.get("name"), f"{field}.name", names, "request")
    exactly, first_available = request.get("exactly"), request.get("firstAvailable")
    if exactly is not None and first_available:
        raise InputError("both exactly and firstAvailable are set", field=field,
                         expected="exactly one of exactly or firstAvailable")
    if exactly is not None:
        return _exactly(name, expect_mapping(exactly, f"{field}.exactly"), f"{field}.exactly")
    alternatives = []
    subrequests: set[str] = set()
    where_all = f"{field}.firstAvailable"
    for index, item in enumerate(_at_most(expect_list(first_available, where_all), FIRST_AVAILABLE_MAX, where_all,
                                          "subrequests")):
        where = f"{where_all}[{index}]"
        sub = expect_mapping(item, where)
        sub_name = _new_name(sub.get("name"), f"{where}.name", subrequests, "subrequest")
        alternatives.append(_exactly(f"{name}/{sub_name}", sub, where))
    if not alternatives:
        raise InputError("neither exactly nor firstAvailable", field=field, expected="exactly or firstAvailable")
    return DeviceRequest(name, alternatives=tuple(alternatives))


def _requests(raw: object, field: str) -> tuple[DeviceRequest, ...]:
    names: set[str] = set()
    return tuple(_request(item, f"{field}[{i}]", names)
                 for i, item in enumerate(_at_most(expect_list(raw, field), REQUESTS_MAX, field, "requests")))


def _claim_spec(spec: Mapping[str, Any],
                field: str) -> tuple[tuple[DeviceRequest, ...], tuple[MatchAttribute, ...], tuple[str, ...]]:
    """The claim's requests, its matchAttribute constraints, and the fields of it kubeplace does
    not model (a ``distinctAttribute`` constraint: DRAConsumableCapacity, beta in 1.36), which
    leave its pods to the default scheduler."""
    devices = expect_mapping(spec.get("devices"), f"{field}.devices")
    requests = _requests(devices.get("requests"), f"{field}.devices.requests")
    constraints, unsupported = [], []
    for index, raw in enumerate(expect_list(devices.get("constraints"), f"{field}.devices.constraints")):
        where = f"{field}.devices.constraints[{index}]"
        constraint = expect_mapping(raw, where)
        names = tuple(expect_str(n, f"{where}.requests[{j}]")
                      for j, n in enumerate(expect_list(constraint.get("requests"), f"{where}.requests")))
        match, distinct = constraint.get("matchAttribute"), constraint.get("distinctAttribute")
        if match is None and distinct is None:  # validateDeviceConstraint, DRAConsumableCapacity on (1.36's default)
            raise InputError('Required value: exactly one of "matchAttribute" or "distinctAttribute" is required, '
                             "but multiple fields are set", field=where)
        if match is not None:  # the allocator reads matchAttribute first: a distinctAttribute beside it is ignored
            constraints.append(MatchAttribute(_fully_qualified(match, f"{where}.matchAttribute"), names))
        else:
            _fully_qualified(distinct, f"{where}.distinctAttribute")
            unsupported.append(f"{where}.distinctAttribute")
    return requests, tuple(constraints), tuple(unsupported)


def _fully_qualified(raw: object, field: str) -> str:
    name = expect_str(raw, field)
    problems = fully_qualified_name_problems(name)
    if problems:
        raise InputError(f"Invalid value: {json.dumps(name, ensure_ascii=False)}: {'; '.join(problems)}", field=field,
                         expected="domain/name, e.g. gpu.example.com/numa")
    return name


def parse_resource_claim(obj: Mapping[str, Any], source: str = "") -> ResourceClaim:
    metadata = expect_mapping(obj.get("metadata"), "metadata")
    requests, constraints, unsupported = _claim_spec(expect_mapping(obj.get("spec"), "spec"), "spec")
    status = expect_mapping(obj.get("status"), "status")
    raw = status.get("allocation")
    allocation = None if raw is None else parse_allocation(raw, "status.allocation")
    reserved = _reserved_for(status.get("reservedFor"))
    return ResourceClaim(
        namespace=expect_namespace(metadata),
        name=expect_name(metadata),
        uid=expect_str(metadata.get("uid"), "metadata.uid"),
        resource_version=expect_str(metadata.get("resourceVersion"), "metadata.resourceVersion"),
        requests=requests, constraints=constraints, unsupported=unsupported, allocation=allocation,
        reserved_for=reserved,
        owner_uid=expect_controller(metadata.get("ownerReferences"), "uid"),
        extended=expect_string_map(metadata.get("annotations"), "metadata.annotations").get(
            EXTENDED_CLAIM_ANNOTATION) == "true",
        deleting=metadata.get("deletionTimestamp") is not None,
        finalizers=tuple(expect_str(f, "metadata.finalizers") for f in expect_list(metadata.get("finalizers"),
                                                                                    "metadata.finalizers")),
        source=source,
    )


def _reserved_for(raw: object) -> tuple[str, ...]:
    """``status.reservedFor``'s uids: at most ResourceClaimReservedForMaxSize, each once."""
    uids: list[str] = []
    for index, item in enumerate(_at_most(expect_list(raw, "status.reservedFor"), RESERVED_FOR_MAX,
                                          "status.reservedFor", "consumers")):
        where = f"status.reservedFor[{index}].uid"
        uid = expect_str(expect_mapping(item, f"status.reservedFor[{index}]").get("uid"), where)
        if uid in uids:
            raise InputError(f"duplicate consumer uid {uid!r}", field=where, expected="each consumer once")
        uids.append(uid)
    return tuple(uids)


def parse_allocation(raw: object, field: str) -> Allocation:
    """An AllocationResult (``devices.results`` and ``nodeSelector``)."""
    allocation = expect_mapping(raw, field)
    results = []
    devices = expect_mapping(allocation.get("devices"), f"{field}.devices")
    for index, item in enumerate(expect_list(devices.get("results"), f"{field}.devices.results")):
        where = f"{field}.devices.results[{index}]"
        result = expect_mapping(item, where)
        results.append(DeviceResult(expect_str(result.get("request"), f"{where}.request"), DeviceId(
            expect_str(result.get("driver"), f"{where}.driver"), expect_str(result.get("pool"), f"{where}.pool"),
            expect_str(result.get("device"), f"{where}.device"))))
    selector = allocation.get("nodeSelector")
    return Allocation(tuple(results), None if selector is None else node_selector_terms(selector,
                                                                                         f"{field}.nodeSelector"))


def allocation_manifest(allocation: Allocation) -> dict[str, Any]:
    """The AllocationResult as the API writes it (``parse_allocation`` reads it back)."""
    out: dict[str, Any] = {"devices": {"results": [
        {"request": r.request, "driver": r.device.driver, "pool": r.device.pool, "device": r.device.device}
        for r in allocation.results]}}
    if allocation.node_selector is not None:
        out["nodeSelector"] = {"nodeSelectorTerms": [
            {key: [{"key": q.key, "operator": q.operator, **({"values": list(q.values)} if q.values else {})}
                   for q in requirements]
             for key, requirements in (("matchExpressions", t.match_expressions), ("matchFields", t.match_fields))
             if requirements}
            for t in allocation.node_selector]}
    return out


def requests_manifest(requests: Sequence[DeviceRequest]) -> list[dict[str, Any]]:
    """ExactCount device requests (an extended resource claim's) as the API writes them."""
    return [{"name": r.name, "exactly": {"deviceClassName": r.device_class, "allocationMode": EXACT_COUNT,
                                         "count": r.count}} for r in requests]


def mappings_manifest(mappings: Sequence[RequestMapping]) -> list[dict[str, str]]:
    """``status.extendedResourceClaimStatus.requestMappings``."""
    return [{"containerName": m.container, "resourceName": m.resource, "requestName": m.request} for m in mappings]


def parse_extended(raw: Mapping[str, Any], field: str) -> tuple[tuple[DeviceRequest, ...], tuple[RequestMapping, ...]]:
    """An extended resource claim's requests (``requests``) and mappings (``requestMappings``), as a
    plan file holds them (``requests_manifest``, ``mappings_manifest``); ``field`` prefixes the
    field names in errors ("" for none)."""
    prefix = f"{field}." if field else ""
    requests = _requests(raw.get("requests"), f"{prefix}requests")
    mappings = []
    for index, item in enumerate(expect_list(raw.get("requestMappings"), f"{prefix}requestMappings")):
        where = f"{prefix}requestMappings[{index}]"
        entry = expect_mapping(item, where)
        mappings.append(RequestMapping(*(expect_str(entry.get(k), f"{where}.{k}")
                                         for k in ("containerName", "resourceName", "requestName"))))
    return requests, tuple(mappings)


def parse_claim_template(obj: Mapping[str, Any], source: str = "") -> ResourceClaim:
    metadata = expect_mapping(obj.get("metadata"), "metadata")
    spec = expect_mapping(expect_mapping(obj.get("spec"), "spec").get("spec"), "spec.spec")
    requests, constraints, unsupported = _claim_spec(spec, "spec.spec")
    return ResourceClaim(expect_namespace(metadata), expect_name(metadata), requests=requests, constraints=constraints,
                         unsupported=unsupported, source=source)


def _amount(raw: object, field: str) -> int:
    value = expect_mapping(raw, field).get("value")
    try:
        return milli_value(value)
    except QuantityError as error:
        raise InputError(error.problem, field=f"{field}.value", expected=error.expected) from None


def _counters(raw: object, field: str) -> dict[str, int]:
    return {str(k): _amount(v, f"{field}.{k}") for k, v in expect_mapping(raw, field).items()}


def _qualified(name: str, driver: str) -> str:
    return name if "/" in name else f"{driver}/{name}"


def _attribute(raw: object, field: str) -> AttributeValue:
    value = expect_mapping(raw, field)
    if "int" in value:
        return expect_int(value["int"], f"{field}.int", -(2**63), 2**63 - 1)
    if "bool" in value:
        if not isinstance(value["bool"], bool):
            raise InputError(f"{value['bool']!r} is not a boolean", field=f"{field}.bool", expected="true or false")
        return bool(value["bool"])
    if "string" in value:
        return expect_str(value["string"], f"{field}.string")
    if "version" in value:
        parsed = version(expect_str(value["version"], f"{field}.version"))
        if parsed is None:
            raise InputError(f"{value['version']!r} is not a semantic version", field=f"{field}.version",
                             expected="a version such as 1.2.3")
        return parsed
    raise InputError("no value", field=field, expected="one of int, bool, string, version")


@dataclass(frozen=True)
class PublishedSlice:
    """A ResourceSlice: its devices and shared counter sets, of one generation of one pool."""

    name: str
    driver: str
    pool: str
    generation: int
    devices: tuple[Device, ...] = ()
    counter_sets: Mapping[str, Mapping[str, int]] = field(default_factory=dict)
    source: str = field(default="", compare=False)


def _slice_nodes(spec: Mapping[str, Any]) -> tuple[str, tuple[SelectorTerm, ...] | None, bool]:
    """(nodeName, nodeSelector, allNodes) of a slice, exactly one of the four node fields set."""
    node = expect_str(spec.get("nodeName"), "spec.nodeName")
    selector = spec.get("nodeSelector")
    present = [name for name, value in zip(SLICE_NODE_FIELDS, (node, selector, spec.get("allNodes"),
                                                                 spec.get("perDeviceNodeSelection")), strict=True)
               if value not in (None, "", False)]
    if len(present) != 1:
        problem = f"{' and '.join(present)} are all set" if present else "none of them is set"
        raise InputError(problem, field="spec", expected=f"exactly one of {', '.join(SLICE_NODE_FIELDS)}")
    terms = None if selector is None else node_selector_terms(selector, "spec.nodeSelector")
    return node, terms, spec.get("allNodes") is True


def parse_resource_slice(obj: Mapping[str, Any], source: str = "") -> PublishedSlice:
    spec = expect_mapping(obj.get("spec"), "spec")
    driver = expect_str(spec.get("driver"), "spec.driver")
    pool = expect_mapping(spec.get("pool"), "spec.pool")
    pool_name = expect_str(pool.get("name"), "spec.pool.name")
    generation = expect_int(pool.get("generation", 0), "spec.pool.generation", 0, 2**63 - 1)
    node, terms, all_nodes = _slice_nodes(spec)
    counter_sets = {}
    for index, raw in enumerate(expect_list(spec.get("sharedCounters"), "spec.sharedCounters")):
        where = f"spec.sharedCounters[{index}]"
        entry = expect_mapping(raw, where)
        counter_sets[expect_str(entry.get("name"), f"{where}.name")] = _counters(entry.get("counters"),
                                                                               f"{where}.counters")
    devices = []
    names: set[str] = set()
    for index, raw in enumerate(expect_list(spec.get("devices"), "spec.devices")):
        where = f"spec.devices[{index}]"
        device = expect_mapping(raw, where)
        name = _new_name(device.get("name"), f"{where}.name", names, "device")
        attributes = {_qualified(str(k), driver): _attribute(v, f"{where}.attributes.{k}")
                      for k, v in expect_mapping(device.get("attributes"), f"{where}.attributes").items()}
        capacity = {_qualified(str(k), driver): _amount(v, f"{where}.capacity.{k}")
                    for k, v in expect_mapping(device.get("capacity"), f"{where}.capacity").items()}
        consumes = tuple(CounterUse(expect_str(expect_mapping(c, f"{where}.consumesCounters[{j}]").get("counterSet"),
                                               f"{where}.consumesCounters[{j}].counterSet"),
                                    _counters(c.get("counters"), f"{where}.consumesCounters[{j}].counters"))
                         for j, c in enumerate(expect_list(device.get("consumesCounters"),
                                                           f"{where}.consumesCounters")))
        own_selector = device.get("nodeSelector")
        devices.append(Device(
            DeviceId(driver, pool_name, name),
            node=expect_str(device.get("nodeName"), f"{where}.nodeName") or node,
            node_selector=terms if own_selector is None else node_selector_terms(own_selector, f"{where}.nodeSelector"),
            all_nodes=all_nodes or device.get("allNodes") is True,
            attributes=attributes, capacity=capacity, consumes=consumes,
            shared=device.get("allowMultipleAllocations") is True, tainted=bool(device.get("taints"))))
    return PublishedSlice(expect_name(expect_mapping(obj.get("metadata"), "metadata")), driver, pool_name, generation,
                          tuple(devices), counter_sets, source)


READ_VERSIONS = ("v1", "v1beta2", "v1beta1")
"""The versions of resource.k8s.io read: v1beta2 has v1's shape for these kinds, v1beta1 is
converted to it (``as_v1``)."""
_V1BETA1_EXACT_FIELDS = ("deviceClassName", "selectors", "allocationMode", "count", "adminAccess", "tolerations",
                         "capacity")
"""A v1beta1 DeviceRequest's fields that v1 holds under ``exactly``."""


def as_v1(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    """The object in the shape of resource.k8s.io/v1, converted as the API server converts
    v1beta1 (Convert_v1beta1_DeviceRequest_To_resource_DeviceRequest, ..._Device_...): a request's
    top-level class, selectors, mode and count go under ``exactly`` when any is set; a device's
    ``basic`` fields become its own. Any other version is refused by name."""
    version = str(obj.get("apiVersion", "")).partition("/")[2]
    if version not in READ_VERSIONS:
        raise InputError(f"{obj.get('apiVersion')} {obj.get('kind')} is not read", field="apiVersion",
                         expected=f"{RESOURCE_GROUP}/v1 (or {', '.join(READ_VERSIONS[1:])})")
    if version != "v1beta1":
        return obj
    spec = obj.get("spec")
    if not isinstance(spec, Mapping):
        return obj
    if obj.get("kind") == "ResourceSlice":
        return {**obj, "spec": _v1beta1_slice(spec)}
    if obj.get("kind") == "ResourceClaimTemplate":
        inner = spec.get("spec")
        return {**obj, "spec": {**spec, "spec": _v1beta1_claim_spec(inner)}} if isinstance(inner, Mapping) else obj
    return {**obj, "spec": _v1beta1_claim_spec(spec)} if obj.get("kind") == "ResourceClaim" else obj


def _v1beta1_claim_spec(spec: Mapping[str, Any]) -> Mapping[str, Any]:
    devices = spec.get("devices")
    requests = devices.get("requests") if isinstance(devices, Mapping) else None
    if not isinstance(devices, Mapping) or not isinstance(requests, list):
        return spec
    return {**spec, "devices": {**devices, "requests": [_v1beta1_request(r) for r in requests]}}


def _v1beta1_request(request: object) -> object:
    if not isinstance(request, Mapping):
        return request
    exact = {k: request[k] for k in _V1BETA1_EXACT_FIELDS if _is_set(k, request.get(k))}
    rest = {k: v for k, v in request.items() if k not in _V1BETA1_EXACT_FIELDS}
    return {**rest, "exactly": exact} if exact else rest


def _is_set(key: str, value: object) -> bool:
    """As Go sees a v1beta1 field: unset when nil, or the zero value of a string or count."""
    if value is None:
        return False
    if key in ("deviceClassName", "allocationMode"):
        return value != ""
    return not (key == "count" and type(value) is int and value == 0)


def _v1beta1_slice(spec: Mapping[str, Any]) -> Mapping[str, Any]:
    out = {k: v for k, v in spec.items()
           if not (k == "nodeName" and v == "") and not (k == "allNodes" and v is False)}
    devices = spec.get("devices")
    if isinstance(devices, list):
        out["devices"] = [{**{k: v for k, v in d.items() if k != "basic"},
                           **(d["basic"] if isinstance(d.get("basic"), Mapping) else {})}
                          if isinstance(d, Mapping) else d for d in devices]
    return out


def build_devices(kinds: Mapping[tuple[str, str], Sequence[Sourced]], label: Any) -> Devices:
    """The Devices of the objects read by kind; ``label(obj)`` names an object in errors. Two
    objects of one kind and name are refused, as for every other kind."""

    def each(kind: tuple[str, str], parse: Any) -> Iterable[Any]:
        for obj, where in kinds.get(kind, ()):
            try:
                yield parse(as_v1(obj), where)
            except InputError as error:
                raise error.located(file=where, obj=label(obj)) from None

    classes = unique_objects(each(DEVICE_CLASS, parse_device_class), lambda c: c.name, "DeviceClass")
    slices = unique_objects(each(RESOURCE_SLICE, parse_resource_slice), lambda s: s.name, "ResourceSlice").values()
    newest: dict[tuple[str, str], int] = {}
    for published in slices:
        pool = (published.driver, published.pool)
        newest[pool] = max(newest.get(pool, published.generation), published.generation)
    by_id: dict[DeviceId, Device] = {}
    counters: dict[tuple[str, str], dict[str, Mapping[str, int]]] = {}
    for published in slices:
        if published.generation == newest[(published.driver, published.pool)]:
            by_id.update((d.id, d) for d in published.devices)
            counters.setdefault((published.driver, published.pool), {}).update(published.counter_sets)
    claims = unique_objects(each(RESOURCE_CLAIM, parse_resource_claim), lambda c: c.key, "ResourceClaim")
    templates = unique_objects(each(CLAIM_TEMPLATE, parse_claim_template), lambda c: c.key, "ResourceClaimTemplate")
    return Devices(classes, dict(sorted(by_id.items())), counters, claims, templates)
