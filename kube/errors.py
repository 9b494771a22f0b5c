"""Errors kubeplace reports to its user.

Every exception here is a :class:`KubeplaceError` whose ``str()`` is one line a user can act
on; the CLI prints it and exits with status 2, never a traceback. Input problems name the file,
the object and the field; cluster problems name the HTTP status and what the server said.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Protocol, TypeVar

EXIT_INCOMPLETE = 1
"""``bind`` did not bind every pod (each outcome is reported)."""
EXIT_INPUT = 2
"""Bad input, bad configuration or a cluster error: one line, nothing written."""
EXIT_BUG = 3
"""kubeplace contradicted itself (its verifier refused its own plan): a bug to report."""


class KubeplaceError(Exception):
    """Base class: ``str(error)`` is the one-line message for the user, ``details`` lines to
    print before it, ``exit_code`` the CLI's exit status."""

    exit_code = EXIT_INPUT
    details: tuple[str, ...] = ()


class PlanVerificationFailed(KubeplaceError):
    """The independent verifier refused a plan kubeplace made: never show it as valid."""

    exit_code = EXIT_BUG

    def __init__(self, violations: tuple[str, ...]) -> None:
        self.details = tuple(f"verifier: {violation}" for violation in violations)
        super().__init__(
            f"the plan kubeplace made fails its independent verifier ({len(violations)} violation(s)); "
            "this is a bug in kubeplace, please report it with the snapshot; no plan was printed"
        )


class InconsistentAnswer(KubeplaceError):
    """The solver's answer places more pods of a class than the class has: a bug, reported as
    such (exit 3) rather than as a plan."""

    exit_code = EXIT_BUG

    def __init__(self, placed: int, pods: int, example: str) -> None:
        super().__init__(
            f"the solver's answer places {placed} pods of the class of {example}, which has {pods}; "
            "this is a bug in kubeplace, please report it with the snapshot; no plan was printed"
        )


class InputError(KubeplaceError):
    """A snapshot file or object that kubeplace cannot use.

    Code deep inside parsing often knows the field but not the file or object; it raises an
    ``InputError`` with what it knows and the caller that knows more adds it with
    :meth:`located`.
    """

    def __init__(
        self,
        problem: str,
        *,
        file: str = "",
        line: int | None = None,
        obj: str = "",
        field: str = "",
        expected: str = "",
    ) -> None:
        self.problem = problem
        self.file = file
        self.line = line
        self.obj = obj
        self.field = field
        self.expected = expected
        super().__init__(str(self))

    def located(self, *, file: str = "", obj: str = "", field_prefix: str = "") -> InputError:
        """A copy with the file/object filled in when unknown so far and ``field_prefix``
        prepended to the field path (``spec`` + ``containers[0]`` -> ``spec.containers[0]``)."""
        field = self.field
        if field_prefix:
            field = field_prefix + ("" if not field or field.startswith("[") else ".") + field
        return InputError(
            self.problem,
            file=self.file or file,
            line=self.line,
            obj=self.obj or obj,
            field=field,
            expected=self.expected,
        )

    def __str__(self) -> str:
        where = f"{self.file}:{self.line}" if self.file and self.line is not None else self.file
        parts = [part for part in (where, self.obj, self.field) if part]
        message = self.problem + (f" (expected {self.expected})" if self.expected else "")
        return ": ".join([*parts, message])


class ClusterError(KubeplaceError):
    """Talking to the Kubernetes API failed.

    ``status`` is the HTTP status when the server answered (None when it did not) and
    ``reason`` the server's machine-readable reason (``AlreadyExists``, ``Conflict``...) if any.
    """

    kind = "error"

    def __init__(self, message: str, *, status: int | None = None, reason: str = "") -> None:
        self.message = message
        self.status = status
        self.reason = reason
        super().__init__(message)

    def __str__(self) -> str:
        return self.message


class ConfigMissing(ClusterError):
    """No kubeconfig and no in-cluster service account: nothing to connect with."""

    kind = "config"


class Unreachable(ClusterError):
    """The API server did not answer: connection refused, DNS, TLS or timeout."""

    kind = "unreachable"


class Unauthorized(ClusterError):
    """401: the credential is missing, wrong or expired."""

    kind = "unauthorized"


class Forbidden(ClusterError):
    """403: authenticated, but RBAC does not allow this request."""

    kind = "forbidden"


class NotFound(ClusterError):
    """404: the object (or the API kind) does not exist."""

    kind = "not_found"


class Conflict(ClusterError):
    """409: for a binding, the pod is already bound, being deleted, gated or was replaced."""

    kind = "conflict"


class DisruptionBudget(ClusterError):
    """429 on an eviction: a PodDisruptionBudget forbids it now (or the server is rate-limiting).
    Report it and do not retry in the same run."""

    kind = "disruption_budget"


TooManyRequests = DisruptionBudget
"""The HTTP name of the same error."""


class Gone(ClusterError):
    """410: the resourceVersion a watch started from is too old (compacted); list again."""

    kind = "gone"


class ApiFailure(ClusterError):
    """Any other error answer from the API server (400, 422, 429, 5xx...)."""

    kind = "api_failure"


def expect_mapping(value: object, field: str) -> Mapping[str, Any]:
    """``value`` as a mapping; None (an absent or empty YAML field) is an empty mapping."""
    if type(value) is dict:  # the common case, without the slower ABC check
        return value
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise InputError(f"{type(value).__name__} is not a mapping", field=field, expected="a mapping")
    return value


def expect_list(value: object, field: str) -> list[Any]:
    """``value`` as a list; None (an absent or empty YAML field) is an empty list."""
    if type(value) is list:
        return value
    if value is None:
        return []
    if not isinstance(value, list):
        raise InputError(f"{type(value).__name__} is not a list", field=field, expected="a list")
    return value


def expect_str(value: object, field: str, default: str = "") -> str:
    """``value`` as a string; YAML numbers and booleans are refused as the API server does."""
    if type(value) is str:
        return value
    if value is None:
        return default
    if not isinstance(value, str):
        raise InputError(f"{value!r} is not a string", field=field, expected="a string; quote it in YAML")
    return value


INT32_MIN = -(2**31)
INT32_MAX = 2**31 - 1
"""The range of Kubernetes' int32 fields: priorities, PodGroup minMember."""


def expect_int(value: object, field: str, low: int = INT32_MIN, high: int = INT32_MAX) -> int:
    """``value`` as an integer from ``low`` to ``high``; booleans, floats and strings are refused."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise InputError(f"{value!r} is not an integer", field=field, expected=f"an integer from {low} to {high}")
    if not low <= value <= high:
        raise InputError(f"{value} is out of range", field=field, expected=f"an integer from {low} to {high}")
    return value


def expect_string_map(value: object, field: str) -> dict[str, str]:
    """``value`` as a map of strings (labels, annotations); None is an empty map."""
    return {str(key): expect_str(item, f"{field}.{key}") for key, item in expect_mapping(value, field).items()}


DNS1123_LABEL_MAX = 63
DNS1123_SUBDOMAIN_MAX = 253
_DNS1123_LABEL = "[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_DNS1123_SUBDOMAIN = _DNS1123_LABEL + "(\\." + _DNS1123_LABEL + ")*"
_LABEL_RULE = ("a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must "
               "start and end with an alphanumeric character (e.g. 'my-name' or '123-abc', regex used for "
               f"validation is '{_DNS1123_LABEL}')")
_SUBDOMAIN_RULE = ("a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', "
                   "and must start and end with an alphanumeric character (e.g. 'example.com', regex used for "
                   f"validation is '{_DNS1123_SUBDOMAIN}')")


def dns1123_problems(value: str, label: bool = False) -> list[str]:
    """Why ``value`` is not a DNS-1123 subdomain (or, with ``label``, label), in the API server's
    words (apimachinery ``IsDNS1123Subdomain``, ``IsDNS1123Label``); empty when it is one."""
    limit = DNS1123_LABEL_MAX if label else DNS1123_SUBDOMAIN_MAX
    problems = [f"must be no more than {limit} characters"] if len(value) > limit else []
    if label and not re.fullmatch(_DNS1123_LABEL, value):
        problems.append("must not contain dots" if re.fullmatch(_DNS1123_SUBDOMAIN, value) else _LABEL_RULE)
    elif not label and not re.fullmatch(_DNS1123_SUBDOMAIN, value):
        problems.append(_SUBDOMAIN_RULE)
    return problems


def expect_dns1123(value: str, field: str, label: bool = False) -> str:
    """``value`` when it is a name the API server takes (a DNS-1123 subdomain: the names of pods,
    nodes and most objects; with ``label``, a DNS-1123 label: namespaces); else InputError with
    the API server's message. Names from files only can fail: the API server refused the others."""
    problems = dns1123_problems(value, label)
    if problems:
        shown = json.dumps(value, ensure_ascii=False)
        raise InputError("; ".join(f"Invalid value: {shown}: {problem}" for problem in problems), field=field)
    return value


LABEL_VALUE_MAX = 63
_LABEL_VALUE = re.compile(r"(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?")


def expect_label_value(value: str, field: str) -> str:
    """``value`` when it is a label value the API server takes (apimachinery
    ``IsValidLabelValue``: empty, or at most 63 alphanumerics, '-', '_' and '.', alphanumeric at
    both ends); else InputError in its words."""
    if len(value) > LABEL_VALUE_MAX or not _LABEL_VALUE.fullmatch(value):
        raise InputError(f"Invalid value: {value!r}: a valid label must be an empty string or consist of alphanumeric "
                         "characters, '-', '_' or '.', and must start and end with an alphanumeric character "
                         f"(at most {LABEL_VALUE_MAX} characters)", field=field)
    return value


def expect_name(metadata: Mapping[str, Any], label: bool = False) -> str:
    """An object's ``metadata.name``, which every object must have, a DNS-1123 subdomain (with
    ``label``, a DNS-1123 label: a Namespace's)."""
    name = expect_str(metadata.get("name"), "metadata.name")
    if not name:
        raise InputError("missing name", field="metadata.name")
    return expect_dns1123(name, "metadata.name", label)


def expect_namespace(metadata: Mapping[str, Any]) -> str:
    """A namespaced object's ``metadata.namespace`` (``default`` when missing), a DNS-1123 label."""
    namespace = expect_str(metadata.get("namespace"), "metadata.namespace")
    return expect_dns1123(namespace, "metadata.namespace", label=True) if namespace else "default"


def expect_controller(references: object, key: str) -> str | None:
    """Field ``key`` (``kind``, ``uid``) of the controller among ``metadata.ownerReferences``;
    None when there is no controller."""
    for index, item in enumerate(expect_list(references, "metadata.ownerReferences")):
        reference = expect_mapping(item, f"metadata.ownerReferences[{index}]")
        if reference.get("controller") is True:
            return expect_str(reference.get(key), f"metadata.ownerReferences[{index}].{key}")
    return None


class _Sourced(Protocol):
    @property
    def source(self) -> str: ...


S = TypeVar("S", bound=_Sourced)


def unique_objects(objects: Iterable[S], key: Callable[[S], str], kind: str) -> dict[str, S]:
    """The objects of one kind by ``key`` (name, or ``namespace/name``), sorted; a second object
    of the same key is refused naming the file of each, as two objects of one name cannot both
    exist in a cluster."""
    found: dict[str, S] = {}
    for item in objects:
        name = key(item)
        if name in found:
            raise InputError(f"duplicate {kind} (first defined in {found[name].source})", file=item.source,
                             obj=f"{kind} {name}")
        found[name] = item
    return dict(sorted(found.items()))
