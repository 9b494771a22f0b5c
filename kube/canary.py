"""The canary split between two schedulers: which one a new pod goes to.

The share of pods for the new scheduler comes from the pod annotation
``scheduler.alpha.kubernetes.io/use-new-scheduler: "30%"``, else the same annotation on the pod's
namespace, else a configured default. The choice is a stable hash of the pod's *group*, so that
all pods of one gang, and all pods of one workload revision (the controller that owns them, with
its revision hash), go to the same scheduler, and a re-created pod keeps its side:

- a gang member: its gang (``kube.gangs.gang_of``, every source it reads: the PodGroup its labels,
  annotations or ``spec.schedulingGroup`` name, the kubeplace label, JobSet, LeaderWorkerSet, Kueue);
- else a controlled pod: its controller's kind, name and uid, and the pod's ``controller-revision-hash``
  or ``pod-template-hash`` label (a new revision is a new draw, as a canary rollout expects);
- else the pod's own namespace and name (or ``generateName`` when the API has not named it yet).

The group key is hashed with SHA-256; its first 8 bytes modulo 10,000 are compared with the share
in hundredths of a percent. Nothing here talks to the cluster.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from kubeplace.kube.gangs import gang_of
from kubeplace.kube.objects import Pod

ANNOTATION = "scheduler.alpha.kubernetes.io/use-new-scheduler"
BASIS = 10_000
"""A share is counted in hundredths of a percent: 30% is 3,000 of 10,000."""
REVISION_LABELS = ("controller-revision-hash", "pod-template-hash")
_SHARE = re.compile(r"\s*([0-9]{1,3})(?:\.([0-9]{1,2}))?\s*%\s*", re.ASCII)
"""ASCII digits and spaces only: ``re``'s ``\\d`` also reads other scripts' digits (Arabic-Indic
"\u0663\u0660%" would be 30%), which no percentage the API server takes contains."""
EXPECTED = 'a percentage from 0% to 100% with at most two decimals, e.g. "30%"'


class ShareError(ValueError):
    """An annotation value that is not a share."""


def parse_share(text: str) -> int:
    """``"30%"`` -> 3000 (of BASIS); ShareError for anything that is not 0% to 100%."""
    found = _SHARE.fullmatch(text) if isinstance(text, str) else None
    if found is None:
        raise ShareError(f"{text!r} is not a share (expected {EXPECTED})")
    whole, fraction = found.group(1), (found.group(2) or "").ljust(2, "0")
    share = int(whole) * 100 + int(fraction)
    if share > BASIS:
        raise ShareError(f"{text!r} is more than 100% (expected {EXPECTED})")
    return share


@dataclass(frozen=True)
class Decision:
    """Where a pod goes and why (for the log and the metrics)."""

    scheduler: str
    share: int
    """The new scheduler's share that applied, of BASIS."""
    source: str
    """Where the share came from: ``pod``, ``namespace`` or ``default``."""
    group: str
    """The key that was hashed."""


def _strings(raw: object) -> dict[str, str]:
    return {str(k): v for k, v in raw.items() if isinstance(v, str)} if isinstance(raw, Mapping) else {}


def _scheduling_group(pod: Mapping[str, Any]) -> str:
    """``spec.schedulingGroup.podGroupName`` (the Workload API gang), "" when absent or malformed (the
    API server refuses a malformed one; the webhook only picks a side)."""
    spec = pod.get("spec")
    group = spec.get("schedulingGroup") if isinstance(spec, Mapping) else None
    name = group.get("podGroupName") if isinstance(group, Mapping) else None
    return name if isinstance(name, str) else ""


def group_key(pod: Mapping[str, Any], namespace: str) -> str:
    """The key whose hash decides the pod's side (see the module docstring)."""
    meta = pod.get("metadata") if isinstance(pod.get("metadata"), Mapping) else {}
    assert isinstance(meta, Mapping)
    labels, annotations = _strings(meta.get("labels")), _strings(meta.get("annotations"))
    name = str(meta.get("name") or meta.get("generateName") or "")
    gang = gang_of(Pod(namespace=namespace, name=name, labels=labels, annotations=annotations,
                       scheduling_group=_scheduling_group(pod)))
    if gang is not None:
        return f"gang/{gang}"
    owners = meta.get("ownerReferences") if isinstance(meta.get("ownerReferences"), list) else []
    assert isinstance(owners, list)
    for owner in owners:
        if isinstance(owner, Mapping) and owner.get("controller") is True:
            revision = next((labels[k] for k in REVISION_LABELS if labels.get(k)), "")
            kind, owner_name, uid = owner.get("kind", ""), owner.get("name", ""), owner.get("uid", "")
            return f"owner/{namespace}/{kind}/{owner_name}/{uid}/{revision}"
    return f"pod/{namespace}/{name}"


def bucket(key: str) -> int:
    """A stable number in [0, BASIS) for ``key``."""
    return int.from_bytes(hashlib.sha256(key.encode()).digest()[:8], "big") % BASIS


@dataclass(frozen=True)
class Split:
    """The canary's settings."""

    new_scheduler: str = "kubeplace"
    old_scheduler: str = "default-scheduler"
    default_share: int = 0
    """Of BASIS, for pods whose pod and namespace carry no annotation."""
    refuse_malformed: bool = True
    """A malformed annotation refuses the pod (with the reason); else it is ignored (the next
    source of a share applies)."""

    def decide(self, pod: Mapping[str, Any], namespace: str,
               namespace_annotations: Mapping[str, str]) -> Decision:
        """The pod's scheduler. ShareError (to refuse the pod) for a malformed annotation when
        ``refuse_malformed``."""
        meta = pod.get("metadata") if isinstance(pod.get("metadata"), Mapping) else {}
        assert isinstance(meta, Mapping)
        share, source = self.default_share, "default"
        for where, notes in (("pod", _strings(meta.get("annotations"))), ("namespace", namespace_annotations)):
            text = notes.get(ANNOTATION)
            if text is None:
                continue
            try:
                share, source = parse_share(text), where
                break
            except ShareError as error:
                if self.refuse_malformed:
                    raise ShareError(f"{where} annotation {ANNOTATION}: {error}") from None
        key = group_key(pod, namespace)
        chosen = self.new_scheduler if bucket(key) < share else self.old_scheduler
        return Decision(chosen, share, source, key)
