"""``resource.k8s.io/v1`` objects (DeviceClass, ResourceSlice, ResourceClaim,
ResourceClaimTemplate) and a pod's ``spec.resourceClaims`` into the typed objects of ``kube.dra``.

Parsed as the API server validates and defaults them (a request's allocationMode defaults to
ExactCount with count 1); CEL selectors are compiled here, so a malformed one is refused with
its file, object and field. Of each pool only the slices of its newest generation are kept, as
the allocator uses them. A claim naming a DeviceClass that does not exist is read as it is: its pod
waits, in the kube-scheduler's words (a claim of a DeviceClass deleted meanwhile is real state).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from kubeplace.kube.device_cel import CelError, compiled, version
from kubeplace.kube.dra import (
    ALL,
    EXACT_COUNT,
    EXTENDED_CLAIM_ANNOTATION,
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
)
from kubeplace.kube.quantity import QuantityError, milli_value
from kubeplace.kube.selectors import is_qualified_name, node_selector_terms

RESOURCE_GROUP = "resource.k8s.io"
DEVICE_CLASS, RESOURCE_SLICE = (RESOURCE_GROUP, "DeviceClass"), (RESOURCE_GROUP, "ResourceSlice")
RESOURCE_CLAIM, CLAIM_TEMPLATE = (RESOURCE_GROUP, "ResourceClaim"), (RESOURCE_GROUP, "ResourceClaimTemplate")
DRA_KINDS = (DEVICE_CLASS, RESOURCE_SLICE, RESOURCE_CLAIM, CLAIM_TEMPLATE)
DRA_APIS = tuple((RESOURCE_GROUP, "v1", plural) for plural in
                 ("deviceclasses", "resourceslices", "resourceclaims", "resourceclaimtemplates"))
"""The resources the live reader lists."""

Sourced = tuple[Mapping[str, Any], str]


def pod_claims(spec: Mapping[str, Any], status: Mapping[str, Any]) -> tuple[tuple[PodClaim, ...], dict[str, str]]:
    """``spec.resourceClaims`` and ``status.resourceClaimStatuses`` (entry name -> generated claim)."""
    claims = []
    for index, raw in enumerate(expect_list(spec.get("resourceClaims"), "spec.resourceClaims")):
        where = f"spec.resourceClaims[{index}]"
        entry = expect_mapping(raw, where)
        claim = PodClaim(expect_str(entry.get("name"), f"{where}.name"),
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


def _request(raw: object, field: str) -> DeviceRequest:
    request = expect_mapping(raw, field)
    name = expect_str(request.get("name"), f"{field}.name")
    if "exactly" in request:
        return _exactly(name, expect_mapping(request.get("exactly"), f"{field}.exactly"), f"{field}.exactly")
    alternatives = []
    for index, item in enumerate(expect_list(request.get("firstAvailable"), f"{field}.firstAvailable")):
        where = f"{field}.firstAvailable[{index}]"
        sub = expect_mapping(item, where)
        alternatives.append(_exactly(f"{name}/{expect_str(sub.get('name'), f'{where}.name')}", sub, where))
    if not alternatives:
        raise InputError("neither exactly nor firstAvailable", field=field, expected="exactly or firstAvailable")
    return DeviceRequest(name, alternatives=tuple(alternatives))


def _requests(raw: object, field: str) -> tuple[DeviceRequest, ...]:
    return tuple(_request(item, f"{field}[{i}]") for i, item in enumerate(expect_list(raw, field)))


def _claim_spec(spec: Mapping[str, Any], field: str) -> tuple[tuple[DeviceRequest, ...], tuple[MatchAttribute, ...]]:
    devices = expect_mapping(spec.get("devices"), f"{field}.devices")
    requests = _requests(devices.get("requests"), f"{field}.devices.requests")
    constraints = []
    for index, raw in enumerate(expect_list(devices.get("constraints"), f"{field}.devices.constraints")):
        where = f"{field}.devices.constraints[{index}]"
        constraint = expect_mapping(raw, where)
        attribute = expect_str(constraint.get("matchAttribute"), f"{where}.matchAttribute")
        if "/" not in attribute:
            raise InputError(f"{attribute!r} is not a fully qualified attribute name", field=f"{where}.matchAttribute",
                             expected="domain/name")
        names = tuple(expect_str(n, f"{where}.requests[{j}]")
                      for j, n in enumerate(expect_list(constraint.get("requests"), f"{where}.requests")))
        constraints.append(MatchAttribute(attribute, names))
    return requests, tuple(constraints)


def parse_resource_claim(obj: Mapping[str, Any], source: str = "") -> ResourceClaim:
    metadata = expect_mapping(obj.get("metadata"), "metadata")
    requests, constraints = _claim_spec(expect_mapping(obj.get("spec"), "spec"), "spec")
    status = expect_mapping(obj.get("status"), "status")
    raw = status.get("allocation")
    allocation = None if raw is None else parse_allocation(raw, "status.allocation")
    reserved = tuple(expect_str(expect_mapping(r, f"status.reservedFor[{i}]").get("uid"),
                                f"status.reservedFor[{i}].uid")
                     for i, r in enumerate(expect_list(status.get("reservedFor"), "status.reservedFor")))
    return ResourceClaim(
        namespace=expect_namespace(metadata),
        name=expect_name(metadata),
        uid=expect_str(metadata.get("uid"), "metadata.uid"),
        resource_version=expect_str(metadata.get("resourceVersion"), "metadata.resourceVersion"),
        requests=requests, constraints=constraints, allocation=allocation, reserved_for=reserved,
        owner_uid=expect_controller(metadata.get("ownerReferences"), "uid"),
        extended=expect_string_map(metadata.get("annotations"), "metadata.annotations").get(
            EXTENDED_CLAIM_ANNOTATION) == "true",
        deleting=metadata.get("deletionTimestamp") is not None,
        finalizers=tuple(expect_str(f, "metadata.finalizers") for f in expect_list(metadata.get("finalizers"),
                                                                                    "metadata.finalizers")),
        source=source,
    )


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
    requests, constraints = _claim_spec(spec, "spec.spec")
    return ResourceClaim(expect_namespace(metadata),
                         expect_name(metadata), requests=requests, constraints=constraints, source=source)


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


def parse_resource_slice(obj: Mapping[str, Any], source: str = "") -> tuple[str, str, int, tuple[Device, ...],
                                                                             dict[str, dict[str, int]]]:
    """(driver, pool, generation, devices, shared counter sets) of a ResourceSlice."""
    spec = expect_mapping(obj.get("spec"), "spec")
    driver = expect_str(spec.get("driver"), "spec.driver")
    pool = expect_mapping(spec.get("pool"), "spec.pool")
    pool_name = expect_str(pool.get("name"), "spec.pool.name")
    generation = expect_int(pool.get("generation", 0), "spec.pool.generation", 0, 2**63 - 1)
    node = expect_str(spec.get("nodeName"), "spec.nodeName")
    selector = spec.get("nodeSelector")
    terms = None if selector is None else node_selector_terms(selector, "spec.nodeSelector")
    all_nodes = spec.get("allNodes") is True
    counter_sets = {}
    for index, raw in enumerate(expect_list(spec.get("sharedCounters"), "spec.sharedCounters")):
        where = f"spec.sharedCounters[{index}]"
        entry = expect_mapping(raw, where)
        counter_sets[expect_str(entry.get("name"), f"{where}.name")] = _counters(entry.get("counters"),
                                                                               f"{where}.counters")
    devices = []
    for index, raw in enumerate(expect_list(spec.get("devices"), "spec.devices")):
        where = f"spec.devices[{index}]"
        device = expect_mapping(raw, where)
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
            DeviceId(driver, pool_name, expect_str(device.get("name"), f"{where}.name")),
            node=expect_str(device.get("nodeName"), f"{where}.nodeName") or node,
            node_selector=terms if own_selector is None else node_selector_terms(own_selector, f"{where}.nodeSelector"),
            all_nodes=all_nodes or device.get("allNodes") is True,
            attributes=attributes, capacity=capacity, consumes=consumes,
            shared=device.get("allowMultipleAllocations") is True, tainted=bool(device.get("taints"))))
    return driver, pool_name, generation, tuple(devices), counter_sets


def build_devices(kinds: Mapping[tuple[str, str], Sequence[Sourced]], label: Any) -> Devices:
    """The Devices of the objects read by kind; ``label(obj)`` names an object in errors."""

    def each(kind: tuple[str, str], parse: Any) -> Iterable[tuple[Any, Mapping[str, Any], str]]:
        for obj, where in kinds.get(kind, ()):
            try:
                yield parse(obj, where), obj, where
            except InputError as error:
                raise error.located(file=where, obj=label(obj)) from None

    classes = {c.name: c for c, _, _ in each(DEVICE_CLASS, parse_device_class)}
    newest: dict[tuple[str, str], int] = {}
    slices = []
    for (driver, pool, generation, devices, counter_sets), _, _ in each(RESOURCE_SLICE, parse_resource_slice):
        newest[(driver, pool)] = max(newest.get((driver, pool), generation), generation)
        slices.append((driver, pool, generation, devices, counter_sets))
    by_id: dict[DeviceId, Device] = {}
    counters: dict[tuple[str, str], dict[str, dict[str, int]]] = {}
    for driver, pool, generation, devices, counter_sets in slices:
        if generation == newest[(driver, pool)]:
            by_id.update((d.id, d) for d in devices)
            counters.setdefault((driver, pool), {}).update(counter_sets)
    claims: dict[str, ResourceClaim] = {}
    templates: dict[str, ResourceClaim] = {}
    for kind, parse, into in ((RESOURCE_CLAIM, parse_resource_claim, claims),
                              (CLAIM_TEMPLATE, parse_claim_template, templates)):
        for claim, _, _ in each(kind, parse):
            into[claim.key] = claim
    return Devices(dict(sorted(classes.items())), dict(sorted(by_id.items())), counters,
                   dict(sorted(claims.items())), dict(sorted(templates.items())))
