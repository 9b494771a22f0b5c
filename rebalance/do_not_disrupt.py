"""``karpenter.sh/do-not-disrupt``, read as Karpenter reads it. On a pod (``IsDoNotDisruptActive``
in ``pkg/utils/pod``): exactly ``"true"`` protects the pod (``"True"``, ``"TRUE"``, ``"yes"`` are
no durations: no protection); a positive Go duration (``"5m"``, ``"1h30m"``) protects it until it
has run that long since ``status.startTime`` (always, when the pod has no start time); any other
value is no protection. Only a running pod protects its node: one being deleted or finished does
not (``IsActive``). On a node (``StateNode.ValidateNodeDisruptable``): exactly ``"true"``, no
duration (:func:`node_protected`)."""

from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import Any

from kubeplace.kube.karpenter_disruption import go_duration_ns

DO_NOT_DISRUPT = "karpenter.sh/do-not-disrupt"


def protection(annotations: Mapping[str, str], raw_status: Mapping[str, Any], now: datetime.datetime) -> str:
    """The annotation's value when it protects the pod at ``now``, else ""."""
    value = annotations.get(DO_NOT_DISRUPT)
    if value is None:
        return ""
    if value == "true":  # exactly, as Karpenter compares it
        return value
    ns = go_duration_ns(value)
    if ns is None or ns <= 0:
        return ""
    started = _time(raw_status.get("startTime"))
    if started is None:
        return value
    return value if now < started + datetime.timedelta(microseconds=ns // 1000) else ""


def node_protected(annotations: Mapping[str, str]) -> bool:
    """A node annotated ``karpenter.sh/do-not-disrupt: "true"`` (exactly: Karpenter compares the
    string, and reads no duration on a node)."""
    return annotations.get(DO_NOT_DISRUPT) == "true"


def _time(text: object) -> datetime.datetime | None:
    if not isinstance(text, str):
        return None
    try:
        return datetime.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None
