"""No CRD at all: the pod label ``kubeplace.io/gang`` names the group, the pod annotation
``kubeplace.io/gang-min-member`` gives its min-member and ``kubeplace.io/gang-timeout-seconds`` its wait
(:func:`plain_groups`)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

from kubeplace.kube.errors import INT32_MAX, InputError
from kubeplace.kube.gang_sources.source import GangSource, label_member, topology_key
from kubeplace.kube.objects import GangKey, Pod, PodGroup

LABEL = "kubeplace.io/gang"
MIN_MEMBER = "kubeplace.io/gang-min-member"
TIMEOUT_ANNOTATION = "kubeplace.io/gang-timeout-seconds"
ORIGIN = "label"


def plain_groups(pods: list[Pod], known: set[GangKey]) -> list[PodGroup]:
    """Gangs declared on pods alone (no PodGroup object): min-member from the first member's
    annotation, the wait from the first member that gives ``kubeplace.io/gang-timeout-seconds``.
    Every member's annotations are checked: a bad one is an error of that pod (in ``serve`` its
    reason, the rest still scheduled), never a failure later in the cycle."""
    found: dict[GangKey, PodGroup] = {}
    timeouts: dict[GangKey, int] = {}
    for pod in pods:
        name = pod.labels.get(LABEL, "")
        key = GangKey(pod.namespace, name)
        if not name or key in known:
            continue
        try:
            min_member = _annotation_int(pod.annotations, MIN_MEMBER, 1, 1)
            timeout = _annotation_int(pod.annotations, TIMEOUT_ANNOTATION, 0, -1)
            if key not in found:
                found[key] = PodGroup(pod.namespace, name, min_member, origin=ORIGIN,
                                      topology_key=topology_key(pod.annotations),
                                      preferred_topology_key=topology_key(pod.annotations, preferred=True))
        except InputError as error:
            raise error.located(file=pod.source, obj=f"Pod {pod.key}") from None
        if timeout >= 0:
            timeouts.setdefault(key, timeout)
    return [replace(group, timeout_seconds=timeouts.get(key, group.timeout_seconds)) for key, group in found.items()]


def _annotation_int(annotations: Mapping[str, str], name: str, low: int, default: int) -> int:
    """An int32 annotation from ``low``, in plain ASCII digits (``"²"`` and ``"٣"`` are digits to
    ``str.isdigit`` but no number); ``default`` when absent or empty."""
    text = annotations.get(name, "")
    if not text:
        return default
    digits = text.strip()
    if not (digits.isascii() and digits.isdigit() and len(digits) <= 10 and low <= int(digits) <= INT32_MAX):
        raise InputError(f"got {text!r}", field=f"metadata.annotations.{name}",
                         expected=f"an integer from {low} to {INT32_MAX}")
    return int(digits)


SOURCE = GangSource(ORIGIN, label_member(LABEL), labels=(LABEL,))
