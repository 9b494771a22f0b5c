"""Exact Kubernetes quantities as integers.

``cpu`` becomes milli-CPU, memory-like resources become bytes, everything else (``pods``,
``nvidia.com/gpu``, other extended resources) a plain count. Values go through
:class:`decimal.Decimal` and are rounded up like the API server's ``MilliValue()``/``Value()``,
so ``0.1m`` CPU is 1 milli-CPU and no float ever rounds a request down.

Every amount is an integer from 0 to :data:`MAX_QUANTITY` of its unit; a larger one is refused
here, where the caller still knows the file, object and field.
"""

from __future__ import annotations

import decimal
import functools
import math
import re
from decimal import Decimal

from kubernetes.utils import parse_quantity

EXPECTED_QUANTITY = "a Kubernetes quantity such as 500m, 2 or 1.5Gi"

# The grammar of apimachinery's resource.Quantity: sign, digits with an optional fraction, then
# one binary-SI, decimal-SI or exponent suffix. Checked first because Decimal() alone also
# accepts "NaN", "Infinity", "1_000" and surrounding spaces.
_QUANTITY = re.compile(r"[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[KMGTPE]i|[numkMGTPE]|[eE][+-]?\d{1,3})?")

MAX_QUANTITY = 2**53 - 1
"""The largest amount kubeplace represents, in its unit: about 9 PB of memory, 9e12 CPUs (in
milli-CPU) or 9e15 of a count. Exact in float64 as well as int64, and 1024 of them still sum
within int64."""

_BYTE_RESOURCES = frozenset({"memory", "ephemeral-storage", "storage"})


class QuantityError(ValueError):
    """A value that is not a valid quantity for its resource; callers add file/object/field."""

    def __init__(self, problem: str, expected: str = EXPECTED_QUANTITY) -> None:
        self.problem = problem
        self.expected = expected
        super().__init__(f"{problem} (expected {expected})")


def parse_decimal(value: object) -> Decimal:
    """The exact value of a quantity given as a string, or as a number in YAML/JSON."""
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        raise QuantityError(f"invalid quantity {value!r}")
    text = str(value)  # str(float) is the shortest exact repr: 0.5 -> "0.5", 1e-05 -> "1e-05"
    if not _QUANTITY.fullmatch(text):
        raise QuantityError(f"invalid quantity {text!r}")
    with decimal.localcontext() as context:
        context.prec = 80  # exact for every value Kubernetes can store (up to 2^63 milli-units)
        try:
            parsed: Decimal = parse_quantity(text)  # type: ignore[no-untyped-call]
            return +parsed
        except (ValueError, decimal.DecimalException) as error:
            raise QuantityError(f"invalid quantity {text!r}") from error


def is_byte_resource(resource: str) -> bool:
    """Resources measured in bytes: memory, ephemeral-storage, storage and hugepages-*."""
    return resource in _BYTE_RESOURCES or resource.startswith("hugepages-")


def milli_value(value: object) -> int:
    """Thousandths of the quantity, rounded up (Kubernetes ``MilliValue``): CPU in millicores."""
    return _in_range(parse_decimal(value) * 1000, value, "cpu")


def whole_value(value: object) -> int:
    """The quantity rounded up to a whole number (Kubernetes ``Value``): bytes."""
    return _in_range(parse_decimal(value), value, "memory")


def count_value(value: object, resource: str) -> int:
    """An integer count; fractions are rejected as the API server rejects them for
    extended resources (``nvidia.com/gpu: 0.5`` is invalid)."""
    exact = parse_decimal(value)
    if exact != exact.to_integral_value():
        raise QuantityError(f"fractional quantity {str(value)!r} for {resource}", "a whole number such as 1 or 8")
    return _in_range(exact, value, resource)


def resource_amount(resource: str, value: object) -> int:
    """The integer amount of ``resource`` in its kubeplace unit (milli-CPU, bytes or count)."""
    if isinstance(value, (str, int, float)) and not isinstance(value, bool):
        return _cached_amount(resource, value)
    raise QuantityError(f"invalid quantity {value!r}")


# A cluster repeats a few quantity strings ("500m", "1Gi") many thousand times.
@functools.lru_cache(maxsize=4096, typed=True)
def _cached_amount(resource: str, value: str | int | float) -> int:
    if resource == "cpu":
        return milli_value(value)
    if is_byte_resource(resource):
        return whole_value(value)
    return count_value(value, resource)


def check_amount(resource: str, amount: int) -> int:
    """``amount`` itself when it is representable (0..MAX_QUANTITY), else a QuantityError;
    for amounts computed from several quantities (a pod's summed request)."""
    if amount > MAX_QUANTITY:
        raise QuantityError(f"{resource} amount {amount} is out of range", range_expected(resource))
    return amount


def range_expected(resource: str) -> str:
    """The upper limit of ``resource``, as error messages state it."""
    if resource == "cpu":
        return f"at most 2^53-1 milli-CPU = {MAX_QUANTITY // 1000}.{MAX_QUANTITY % 1000:03d} CPUs"
    if is_byte_resource(resource):
        return f"at most 2^53-1 = {MAX_QUANTITY} bytes, just under 8 PiB"
    return f"at most 2^53-1 = {MAX_QUANTITY}"


def _in_range(exact: Decimal, original: object, resource: str) -> int:
    """The quantity rounded up, refused when negative or beyond MAX_QUANTITY."""
    if exact < 0:
        raise QuantityError(f"negative quantity {str(original)!r}", "a quantity of zero or more")
    if exact > MAX_QUANTITY:
        raise QuantityError(f"quantity {str(original)!r} is out of range", range_expected(resource))
    return math.ceil(exact)
