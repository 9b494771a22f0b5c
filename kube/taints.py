"""Taints and tolerations as the API server validates them (a node's, a pod's, a RuntimeClass's)."""

from __future__ import annotations

from collections.abc import Sequence

from kubeplace.kube.errors import InputError, expect_list, expect_mapping, expect_str
from kubeplace.kube.objects import NO_EXECUTE, NO_SCHEDULE, PREFER_NO_SCHEDULE, Taint, Toleration

TAINT_EFFECTS = (NO_SCHEDULE, PREFER_NO_SCHEDULE, NO_EXECUTE)
_EXPECTED_EFFECTS = ", ".join(TAINT_EFFECTS)


def parse_taints(raw: object, field: str) -> tuple[Taint, ...]:
    """A node's ``spec.taints``, validated as the API server does."""
    taints = []
    for index, item in enumerate(expect_list(raw, field)):
        at = f"{field}[{index}]"
        taint = expect_mapping(item, at)
        key = expect_str(taint.get("key"), f"{at}.key")
        if not key:
            raise InputError("missing key", field=f"{at}.key", expected="a taint key")
        effect = expect_str(taint.get("effect"), f"{at}.effect")
        if effect not in TAINT_EFFECTS:
            problem = f"unsupported effect {effect!r}" if effect else "missing effect"
            raise InputError(problem, field=f"{at}.effect", expected=_EXPECTED_EFFECTS)
        taints.append(Taint(key=key, value=expect_str(taint.get("value"), f"{at}.value"), effect=effect))
    return tuple(taints)


def tolerates(toleration: Toleration, taint: Taint) -> bool:
    """``Toleration.ToleratesTaint`` (k8s.io/api core/v1)."""
    if toleration.effect and toleration.effect != taint.effect:
        return False
    if toleration.key and toleration.key != taint.key:
        return False
    return toleration.operator == "Exists" or toleration.value == taint.value


def untolerated(tolerations: Sequence[Toleration], taints: Sequence[Taint]) -> tuple[Taint, ...]:
    """The NoSchedule and NoExecute taints none of ``tolerations`` tolerates (``ToleratesPod``
    with PreferNoSchedule tolerated): a pod with these tolerations cannot be scheduled there."""
    return tuple(taint for taint in taints if taint.effect in (NO_SCHEDULE, NO_EXECUTE)
                 and not any(tolerates(toleration, taint) for toleration in tolerations))


def parse_tolerations(raw: object, field: str) -> tuple[Toleration, ...]:
    """A pod's (or a RuntimeClass's) tolerations, validated as the API server does."""
    found = []
    for index, item in enumerate(expect_list(raw, field)):
        at = f"{field}[{index}]"
        toleration = expect_mapping(item, at)
        operator = expect_str(toleration.get("operator"), f"{at}.operator") or "Equal"
        if operator not in ("Equal", "Exists"):
            raise InputError(f"unknown operator {operator!r}", field=f"{at}.operator", expected="Equal or Exists")
        key = expect_str(toleration.get("key"), f"{at}.key")
        if not key and operator != "Exists":
            raise InputError("an empty key needs operator Exists", field=f"{at}.operator", expected="Exists")
        value = expect_str(toleration.get("value"), f"{at}.value")
        if value and operator == "Exists":
            raise InputError(
                f"value must be empty when operator is 'Exists', got {value!r}", field=f"{at}.value"
            )
        effect = expect_str(toleration.get("effect"), f"{at}.effect")
        if effect and effect not in TAINT_EFFECTS:
            raise InputError(
                f"unsupported effect {effect!r}", field=f"{at}.effect", expected=f"{_EXPECTED_EFFECTS} or none"
            )
        found.append(Toleration(key=key, operator=operator, value=value, effect=effect))
    return tuple(found)
