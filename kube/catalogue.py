"""The instance types new nodes can be launched as, with their offerings and prices.

Two forms hold the same content (docs/capacity.md):

* Karpenter's kwok provider catalogue, ``instance_types.json`` read as the provider reads it
  (``kwok/cloudprovider/helpers.go``): a JSON list of ``{name, offerings: [{Price, Available,
  Requirements}], architecture, operatingSystems, resources}``. As there, ``pods`` defaults to
  110, every offering is available, the family and size labels are derived from the name, and
  the overhead is kube-reserved 100m CPU and 10Mi memory.
* A YAML (or JSON) mapping ``instanceTypes: [...]`` for other clouds, with the labels, the
  overhead (kube-reserved, system-reserved, eviction threshold) and the offerings' zone,
  capacity type, price per hour and availability spelled out.

Prices are integers: billionths of the catalogue's currency per hour, read by
``kube.price.parse_price`` (the one parser of prices). An offering's zone and capacity type and
an instance type's name become label values and are checked as such; the same (instance type,
zone, capacity type) offered twice is refused.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from kubeplace.kube.errors import (
    InputError,
    expect_label_value,
    expect_list,
    expect_mapping,
    expect_str,
    expect_string_map,
)
from kubeplace.kube.karpenter import (
    ARCH_LABEL,
    CAPACITY_TYPE_LABEL,
    CAPACITY_TYPES,
    INSTANCE_TYPE_LABEL,
    OS_LABEL,
    ZONE_LABEL,
    check_label_key,
    parse_limits,
)
from kubeplace.kube.node_selector import Requirement
from kubeplace.kube.price import PRICE_UNIT as PRICE_UNIT
from kubeplace.kube.price import Price, parse_price
from kubeplace.kube.selectors import IN, OPERATORS, is_qualified_name

DEFAULT_PODS = 110
"""What the kwok provider gives an instance type that does not say (``resource.MustParse("110")``)."""
KWOK_GROUP = "karpenter.kwok.sh"
SIZE_LABEL, FAMILY_LABEL = f"{KWOK_GROUP}/instance-size", f"{KWOK_GROUP}/instance-family"
CPU_LABEL, MEMORY_LABEL = f"{KWOK_GROUP}/instance-cpu", f"{KWOK_GROUP}/instance-memory"
STANDARD_RESOURCES = frozenset({"cpu", "memory", "ephemeral-storage", "pods", "storage"})
HUGEPAGES_PREFIX = "hugepages-"
_AWS_NAME = re.compile(r"\w+\.(nano|micro|small|medium|large|\d*xlarge|metal)")
_FAMILY_DELIMITER = re.compile(r"[.-]")


@dataclass(frozen=True)
class Overhead:
    """What Karpenter takes from an instance type's capacity before packing pods on it."""

    kube_reserved: Mapping[str, int] = field(default_factory=dict)
    system_reserved: Mapping[str, int] = field(default_factory=dict)
    eviction_threshold: Mapping[str, int] = field(default_factory=dict)

    def total(self) -> dict[str, int]:
        """``InstanceTypeOverhead.Total``: the three summed per resource."""
        out: dict[str, int] = {}
        for part in (self.kube_reserved, self.system_reserved, self.eviction_threshold):
            for resource, amount in part.items():
                out[resource] = out.get(resource, 0) + amount
        return out


KWOK_OVERHEAD = Overhead(kube_reserved={"cpu": 100, "memory": 10 * 2**20})
"""The kwok provider's overhead for every instance type: kube-reserved 100m CPU, 10Mi memory."""


@dataclass(frozen=True)
class Offering:
    """One way to buy an instance type: in a zone, as a capacity type, at a price."""

    zone: str
    capacity_type: str
    price: Price
    available: bool = True
    labels: Mapping[str, str] = field(default_factory=dict)
    """What a node bought this way is labelled with: zone, capacity type and any other
    single-value ``In`` requirement of the offering."""


@dataclass(frozen=True)
class InstanceType:
    name: str
    capacity: Mapping[str, int]
    """Integer units (millicores, bytes, counts); ``pods`` always present."""
    architecture: str
    operating_systems: tuple[str, ...]
    offerings: tuple[Offering, ...]
    labels: Mapping[str, str] = field(default_factory=dict)
    """Labels every node of this type registers with besides the well-known ones (family, size...)."""
    overhead: Overhead = field(default_factory=Overhead)
    source: str = field(default="", compare=False)

    def allocatable(self) -> dict[str, int]:
        """Karpenter's ``InstanceType.Allocatable``: capacity less the overhead, and memory less
        every hugepages size (floored at zero, as there)."""
        overhead = self.overhead.total()
        out = {resource: amount - overhead.get(resource, 0) for resource, amount in self.capacity.items()}
        hugepages = sum(amount for resource, amount in self.capacity.items() if resource.startswith(HUGEPAGES_PREFIX))
        if hugepages and "memory" in out:
            out["memory"] = max(0, out["memory"] - hugepages)
        return out


def parse_catalogue(document: object, source: str) -> list[InstanceType]:
    """A catalogue document: the kwok provider's list, or a mapping with ``instanceTypes``."""
    if isinstance(document, list):
        return [_located(parse_kwok_instance_type, item, source, index, "") for index, item in enumerate(document)]
    if isinstance(document, Mapping) and "instanceTypes" in document:
        items = _located_list(document.get("instanceTypes"), source)
        return [_located(parse_instance_type, item, source, index, "instanceTypes") for index, item in enumerate(items)]
    raise InputError("not an instance-type catalogue", file=source,
                     expected="the kwok provider's JSON list, or a mapping with instanceTypes (docs/capacity.md)")


def _located_list(raw: object, source: str) -> list[Any]:
    try:
        return expect_list(raw, "instanceTypes")
    except InputError as error:
        raise error.located(file=source) from None


def _located(parse: Any, item: object, source: str, index: int, prefix: str) -> InstanceType:
    """The instance type of one entry; its errors name the file, the instance type (by name, or by
    its place when it has none) and the field."""
    name = item.get("name") if isinstance(item, Mapping) else None
    label = name if isinstance(name, str) and name else f"{prefix}[{index}]"
    try:
        found: InstanceType = parse(expect_mapping(item, f"{prefix}[{index}]"), source)
        return found
    except InputError as error:
        raise error.located(file=source, obj=f"instance type {label}") from None


def parse_kwok_instance_type(raw: Mapping[str, Any], source: str = "") -> InstanceType:
    """One entry of the kwok provider's ``instance_types.json``. Go's JSON reader matches field
    names without regard to case (``Price`` or ``price``), so this does too."""
    name = _name(_get(raw, "name"))
    resources = _resources(_get(raw, "resources"), "resources")
    capacity = {"pods": DEFAULT_PODS, **resources}
    cpu, memory = _raw_quantity(raw, "cpu"), _raw_quantity(raw, "memory")
    labels = {SIZE_LABEL: _kwok_size(name, cpu), FAMILY_LABEL: _kwok_family(name), CPU_LABEL: cpu, MEMORY_LABEL: memory}
    offerings = _unique(tuple(_kwok_offering(expect_mapping(item, f"offerings[{i}]"), f"offerings[{i}]")
                              for i, item in enumerate(expect_list(_get(raw, "offerings"), "offerings"))))
    return InstanceType(name=name, capacity=dict(sorted(capacity.items())),
                        architecture=_architecture(_get(raw, "architecture"), "architecture"),
                        operating_systems=_systems(_get(raw, "operatingSystems"), "operatingSystems"),
                        offerings=offerings, labels=labels, overhead=KWOK_OVERHEAD, source=source)


def parse_instance_type(raw: Mapping[str, Any], source: str = "") -> InstanceType:
    """One entry of the YAML form (docs/capacity.md)."""
    name = _name(raw.get("name"))
    capacity = {"pods": DEFAULT_PODS, **_resources(raw.get("capacity"), "capacity")}
    labels = _labels(raw.get("labels"), "labels")
    overhead = expect_mapping(raw.get("overhead"), "overhead")
    offerings = _unique(tuple(_offering(expect_mapping(item, f"offerings[{i}]"), f"offerings[{i}]")
                              for i, item in enumerate(expect_list(raw.get("offerings"), "offerings"))))
    return InstanceType(
        name=name, capacity=dict(sorted(capacity.items())),
        architecture=_architecture(raw.get("architecture"), "architecture"),
        operating_systems=_systems(raw.get("operatingSystems"), "operatingSystems"),
        offerings=offerings, labels=labels,
        overhead=Overhead(*(_resources(overhead.get(part), f"overhead.{part}")
                            for part in ("kubeReserved", "systemReserved", "evictionThreshold"))),
        source=source)


def _kwok_offering(raw: Mapping[str, Any], at: str) -> Offering:
    requirements = tuple(_offering_requirement(expect_mapping(item, f"{at}.Requirements[{i}]"),
                                               f"{at}.Requirements[{i}]")
                         for i, item in enumerate(expect_list(_get(raw, "requirements"), f"{at}.Requirements")))
    labels = {r.key: r.values[0] for r in requirements if r.operator == IN and len(r.values) == 1}
    for key in (ZONE_LABEL, CAPACITY_TYPE_LABEL):
        if key not in labels:
            raise InputError(f"no single-value In requirement on {key}", field=f"{at}.Requirements",
                             expected=f"a requirement {{key: {key}, operator: In, values: [one value]}}")
    _check_capacity_type(labels[CAPACITY_TYPE_LABEL], f"{at}.Requirements")
    # helpers.go setDefaultOptions: "make sure all the instance types are available"
    return Offering(labels[ZONE_LABEL], labels[CAPACITY_TYPE_LABEL], parse_price(_get(raw, "price"), f"{at}.Price"),
                    True, dict(sorted(labels.items())))


def _offering(raw: Mapping[str, Any], at: str) -> Offering:
    zone = expect_str(raw.get("zone"), f"{at}.zone")
    capacity_type = expect_str(raw.get("capacityType"), f"{at}.capacityType")
    if not zone:
        raise InputError("Required value", field=f"{at}.zone")
    expect_label_value(zone, f"{at}.zone")
    _check_capacity_type(capacity_type, f"{at}.capacityType")
    available = raw.get("available", True)
    if not isinstance(available, bool):
        raise InputError(f"{available!r} is not a boolean", field=f"{at}.available", expected="true or false")
    labels = _labels(raw.get("labels"), f"{at}.labels")
    return Offering(zone, capacity_type, parse_price(raw.get("pricePerHour"), f"{at}.pricePerHour"), available,
                    dict(sorted({**labels, ZONE_LABEL: zone, CAPACITY_TYPE_LABEL: capacity_type}.items())))


def _offering_requirement(raw: Mapping[str, Any], at: str) -> Requirement:
    key = expect_str(_get(raw, "key"), f"{at}.key")
    if not is_qualified_name(key):
        raise InputError(f"Invalid value: {key!r}: not a qualified name", field=f"{at}.key")
    operator = expect_str(_get(raw, "operator"), f"{at}.operator")
    if operator not in OPERATORS:
        raise InputError(f"unknown operator {operator!r}", field=f"{at}.operator", expected=", ".join(OPERATORS))
    values = tuple(expect_str(v, f"{at}.values[{i}]") for i, v in enumerate(expect_list(_get(raw, "values"),
                                                                                         f"{at}.values")))
    for index, value in enumerate(values):
        expect_label_value(value, f"{at}.values[{index}]")
    return Requirement(key, operator, values)


def _labels(raw: object, field: str) -> dict[str, str]:
    """Labels a node of the type registers with: keys a NodePool may use, valid label values."""
    labels = expect_string_map(raw, field)
    for key, value in labels.items():
        check_label_key(key, f"{field}.{key}")
        expect_label_value(value, f"{field}.{key}")
    return labels


def _unique(offerings: tuple[Offering, ...]) -> tuple[Offering, ...]:
    """The offerings, each (zone, capacity type) once: the same one at two prices is ambiguous."""
    seen: dict[tuple[str, str], int] = {}
    for index, offering in enumerate(offerings):
        key = (offering.zone, offering.capacity_type)
        if key in seen:
            raise InputError(f"duplicate offering: zone {offering.zone}, capacity type {offering.capacity_type} is "
                             f"offerings[{seen[key]}] too", field=f"offerings[{index}]",
                             expected="each (zone, capacity type) offered once")
        seen[key] = index
    return offerings


def _check_capacity_type(value: str, field: str) -> None:
    if value not in CAPACITY_TYPES:
        raise InputError(f"unknown capacity type {value!r}" if value else "Required value", field=field,
                         expected=" or ".join(CAPACITY_TYPES))


def _resources(raw: object, field: str) -> dict[str, int]:
    """A resource list whose names the API server would take for a node's capacity: a standard
    resource (cpu, memory, ephemeral-storage, pods, hugepages-<size>) or a domain-qualified
    extended resource (``nvidia.com/gpu``)."""
    for resource in expect_mapping(raw, field):
        name = str(resource)
        standard = name in STANDARD_RESOURCES or name.startswith(HUGEPAGES_PREFIX)
        if not standard and ("/" not in name or not is_qualified_name(name)):
            raise InputError(f"unknown resource name {name!r}", field=f"{field}.{name}",
                             expected="cpu, memory, ephemeral-storage, pods, hugepages-<size> or a "
                                      "domain-qualified extended resource such as nvidia.com/gpu")
    return parse_limits(raw, field)


def _get(raw: Mapping[str, Any], name: str) -> Any:
    """A JSON field as Go's ``encoding/json`` finds it: exact name first, then any case."""
    if name in raw:
        return raw[name]
    return next((value for key, value in raw.items() if str(key).lower() == name.lower()), None)


def _name(raw: object) -> str:
    name = expect_str(raw, "name")
    if not name:
        raise InputError("Required value", field="name")
    expect_label_value(name, "name")
    return name


def _architecture(raw: object, field: str) -> str:
    value = expect_str(raw, field)
    if not value:
        raise InputError("Required value", field=field, expected="amd64, arm64...")
    expect_label_value(value, field)
    return value


def _systems(raw: object, field: str) -> tuple[str, ...]:
    systems = tuple(expect_str(v, f"{field}[{i}]") for i, v in enumerate(expect_list(raw, field)))
    for index, value in enumerate(systems):
        expect_label_value(value, f"{field}[{index}]")
    return systems


def _raw_quantity(raw: Mapping[str, Any], resource: str) -> str:
    """The quantity as written (what the kwok provider puts in its cpu and memory labels)."""
    value = expect_mapping(_get(raw, "resources"), "resources").get(resource)
    return "" if value is None else str(value)


def _kwok_size(name: str, cpu: str) -> str:
    """``parseSizeFromType``: the AWS size (``large``), else the CPU count."""
    found = _AWS_NAME.fullmatch(name)
    return found.group(1) if found else cpu


def _kwok_family(name: str) -> str:
    """``parseFamilyFromType``: what comes before the first ``.`` or ``-``, else the first letter."""
    parts = _FAMILY_DELIMITER.split(name, maxsplit=1)
    return parts[0] if len(parts) == 2 else name[:1]


WELL_KNOWN_INSTANCE_LABELS = (INSTANCE_TYPE_LABEL, ARCH_LABEL, OS_LABEL)
"""Labels every instance type defines (with the offering's zone and capacity type)."""
