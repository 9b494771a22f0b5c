"""VolumeRestrictions' independent verifier check, over the whole plan: a ReadWriteOncePod claim
that pods mount as a ``persistentVolumeClaim`` volume has one user, the running pod that mounts it
or else the first placed pod that does (the kube-scheduler's volumerestrictions plugin). Imports
only ``kubeplace.kube``."""

from __future__ import annotations

from collections.abc import Iterator

from kubeplace.kube.plan_view import Finding, PlanView


def check_plan(view: PlanView, _args: None) -> Iterator[Finding]:
    storage = view.snapshot.storage
    if not any(placed.pod.volumes for placed in view.placements):
        return  # no claim to share (the running pods' claims are not looked at)
    users = {f"{p.namespace}/{v.claim}": p.key for p in view.snapshot.bound for v in p.volumes if not v.ephemeral}
    for placed in view.placements:
        pod = placed.pod
        for volume in pod.volumes:
            claim = storage.claim(pod.namespace, volume.claim)
            if volume.ephemeral or claim is None or "ReadWriteOncePod" not in claim.access_modes:
                continue
            user = users.setdefault(claim.key, pod.key)
            if user != pod.key:
                yield (pod.namespace, pod.name, placed.node.name,
                       f"ReadWriteOncePod claim {volume.claim} is used by pod {user}")
