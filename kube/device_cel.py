"""CEL device selectors, evaluated with the ``common-expression-language`` package (a maintained CEL
implementation; kubeplace does not evaluate CEL itself).

The ``device`` variable is built as the kube-scheduler's DRA CEL environment builds it
(k8s.io/dynamic-resource-allocation/cel): ``driver``, ``allowMultipleAllocations``, and
``attributes`` and ``capacity`` as maps of domain -> id -> value. A domain a device does not have is
an empty map there (so ``"x" in device.attributes["other.domain"]`` is false, and reading a key of
it is a runtime error, as in Kubernetes). Quantities are integers in milli-units, made by
``quantity("1Gi")`` and compared with the Kubernetes quantity library's methods (``compareTo``,
``isGreaterThan``, ``isLessThan``, ``asInteger``, ``add``, ``sub``, ...); versions are
``[major, minor, patch]`` lists made by ``semver("1.2.3")`` with the same comparisons and
``major()``, ``minor()``, ``patch()``. Kubernetes type-checks these calls; here a quantity
compared with a plain number is not refused.

Before the library sees an expression, ``kube.cel_limits`` applies the API server's limits
(length, nesting, estimated cost), so no expression can crash or hang the process. A runtime
error is worded as cel-go words it ("division by zero", "no such key: model", ...); the
library's own log lines (a failing function) are silenced.
"""

from __future__ import annotations

import functools
import logging
import re
from collections.abc import Callable, Mapping
from typing import Any

from kubeplace.kube.cel_limits import TOO_COMPLEX, LimitError, TooDeep, check
from kubeplace.kube.dra import AttributeValue, Device
from kubeplace.kube.quantity import QuantityError, milli_value

_LITERAL = re.compile(r'"((?:[^"\\]|\\.)*)"' + r"|'((?:[^'\\]|\\.)*)'")
_VERSION = re.compile(r"v?(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)(?:[-+].*)?")


class CelError(ValueError):
    """A selector that does not compile, or fails while evaluated for a device."""


class CelLimit(CelError):
    """A selector over the API server's length or cost limit (its message is the API server's,
    not a compile error's)."""


def version(text: str) -> tuple[int, int, int] | None:
    """A semantic version's (major, minor, patch); None when ``text`` is not one."""
    found = _VERSION.fullmatch(text)
    return None if found is None else (int(found[1]), int(found[2]), int(found[3]))


def _quantity(text: object) -> int:
    try:
        return milli_value(text)
    except QuantityError as error:
        raise CelError(f"quantity({text!r}): {error.problem}") from None


def _semver(text: object) -> list[int]:
    parsed = version(str(text))
    if parsed is None:
        raise CelError(f"semver({text!r}): not a semantic version")
    return list(parsed)


def _compare(a: Any, b: Any) -> int:
    return int(a > b) - int(a < b)


FUNCTIONS: Mapping[str, Callable[..., Any]] = {
    "quantity": _quantity,
    "semver": _semver,
    "compareTo": _compare,
    "isGreaterThan": lambda a, b: a > b,
    "isLessThan": lambda a, b: a < b,
    "asInteger": lambda a: a // 1000,
    "isInteger": lambda a: a % 1000 == 0,
    "asApproximateFloat": lambda a: a / 1000,
    "add": lambda a, b: a + (b if isinstance(b, int) and not isinstance(b, bool) else 0),
    "sub": lambda a, b: a - b,
    "sign": lambda a: _compare(a, 0),
    "major": lambda v: v[0],
    "minor": lambda v: v[1],
    "patch": lambda v: v[2],
}


def _silenced() -> None:
    """The library logs a failing function's exception as a warning of the ``cel`` logger (to
    stderr when logging is not configured): the error is the selector's reason instead."""
    logger = logging.getLogger("cel")
    if not logger.handlers:
        logger.addHandler(logging.NullHandler())
    logger.propagate = False


@functools.lru_cache(maxsize=4096)
def compiled(expression: str) -> Any:
    """The compiled program; CelError (the API server's message for a limit, else the parser's
    first line) when it does not compile. The CEL package is imported on first use: runs
    without DRA objects never load it."""
    try:
        estimated = check(expression)
    except TooDeep as error:
        raise CelError(str(error)) from None
    except LimitError as error:
        raise CelLimit(str(error)) from None
    import cel

    _silenced()
    try:
        program = cel.compile(expression)
    except Exception as error:  # the library raises ValueError, RuntimeError, ...: all are compile errors
        first = (str(error).splitlines() or [""])[0]
        raise CelError(first.partition("ERROR: ")[2] or first or type(error).__name__) from None
    if not estimated:
        raise CelLimit(TOO_COMPLEX)  # read by the library but not by the estimator: its cost is unknown
    return program


@functools.lru_cache(maxsize=4096)
def _domains(expression: str) -> tuple[str, ...]:
    """String literals of the expression: the domains it may look up."""
    return tuple(a or b for a, b in _LITERAL.findall(expression))


def _value(value: AttributeValue) -> object:
    return list(value) if isinstance(value, tuple) else value


def _split(name: str) -> tuple[str, str]:
    domain, _, ident = name.rpartition("/")
    return domain, ident


def device_variable(device: Device, expression: str) -> dict[str, object]:
    attributes: dict[str, dict[str, object]] = {d: {} for d in _domains(expression)}
    capacity: dict[str, dict[str, object]] = {d: {} for d in _domains(expression)}
    for name, value in device.attributes.items():
        domain, ident = _split(name)
        attributes.setdefault(domain, {})[ident] = _value(value)
    for name, amount in device.capacity.items():
        domain, ident = _split(name)
        capacity.setdefault(domain, {})[ident] = amount
    return {"driver": device.id.driver, "allowMultipleAllocations": device.shared,
            "attributes": attributes, "capacity": capacity}


_FUNCTION_FAILED = re.compile(r"Python function call failed: \w+: (.*?)\. Check function arguments", re.DOTALL)
_INDEX = re.compile(r"index out of bounds: (-?\d+)")
_OVERFLOW = re.compile(r"overflow in '(\w+)' on (-?\d+) and (-?\d+)")


def _unsigned(text: str) -> bool:
    """Whether the library's overflow was of uints: it says so for conversions; of arithmetic it
    gives the operands (an operand beyond int64, or a subtraction of naturals going below 0)."""
    found = _OVERFLOW.search(text)
    if found is None:
        return "unsigned" in text
    a, b = int(found[2]), int(found[3])
    return max(a, b) > 2**63 - 1 or (found[1] == "sub" and 0 <= a < b)


def runtime_words(error: BaseException) -> str:
    """A runtime error of the library in cel-go's words (as the kube-scheduler reports them),
    never a Python exception's repr."""
    text = str(error)
    if isinstance(error, CelError):
        return text
    if isinstance(error, ZeroDivisionError):
        return "modulus by zero" if text.startswith("modulo") else "division by zero"
    if isinstance(error, OverflowError):
        return "unsigned integer overflow" if _unsigned(text) else "integer overflow"
    if isinstance(error, KeyError):
        return f"no such key: {error.args[0] if error.args else ''}"
    if isinstance(error, IndexError):
        found = _INDEX.search(text)
        return f"index '{found[1]}' out of range" if found else "index out of range"
    if isinstance(error, TypeError):
        return "no such overload"
    failed = _FUNCTION_FAILED.search(text)
    if failed:
        return failed[1]
    first = (text.splitlines() or [""])[0].partition(". Check ")[0].strip()
    return first or type(error).__name__


def matches(expression: str, device: Device) -> bool:
    """Whether the selector admits the device; CelError for a runtime error ("CEL runtime error:
    division by zero") or a non-boolean result."""
    import cel

    program = compiled(expression)
    context = cel.Context(variables={"device": device_variable(device, expression)}, functions=dict(FUNCTIONS))
    try:
        result = program.execute(context)
    except Exception as error:  # whatever the library raises is this expression's runtime error
        raise CelError(f"CEL runtime error: {runtime_words(error)}") from None
    if not isinstance(result, bool):
        raise CelError(f"CEL result of type {type(result).__name__} could not be converted to bool")
    return result
