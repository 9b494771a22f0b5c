"""What ``bind`` may write for a placement: the pod's own objects and nothing else.

Before the pod, ``bind`` writes the resource claims the plan allocates (a finalizer, the
allocation, the pod in ``reservedFor``) and the volumes it chooses (a PV's ``claimRef``, a claim's
selected node). A plan file is input like any other: a tampered one could name another user's
claim. So, for every placement, whatever the profile: the claims it allocates are the pod's own
(``spec.resourceClaims``, by name or the claim generated for it), the claims it binds volumes for
are the pod's own (its ``persistentVolumeClaim`` and ephemeral volumes, in its namespace), each
at most once, and the plan was made for the pod that is there now (its uid). A plan allocates
claims only when the profile enables DynamicResources and chooses volumes only when it enables
VolumeBinding: the verifier checks those choices only then (the planner makes them only then).

Whether the claims and volumes are usable (devices, capacity, the PV free) is the verifier's
(DynamicResources' and VolumeBinding's checks); this module only bounds what may be written.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator, Sequence

from kubeplace.kube.dra import EXTENDED_CLAIM
from kubeplace.kube.objects import Pod, Snapshot
from kubeplace.plan.plan import Placement

OWNERSHIP = "Ownership"
Finding = tuple[str, str, str, str, str]
"""(namespace, name, node, rule, detail)."""


def verify_owned(snapshot: Snapshot, placements: Sequence[Placement], allocates_claims: bool,
                 chooses_volumes: bool) -> list[Finding]:
    """Each reason a placement would make ``bind`` write what its pod does not own. Placements of
    pods that are not pending are the main verifier's (nothing of theirs is written)."""
    pods = {(p.namespace, p.name): p for p in snapshot.pending}
    findings: list[Finding] = []
    for placement in placements:
        pod = pods.get((placement.namespace, placement.name))
        if pod is None:
            continue
        details = [*_uid(placement, pod)]
        if placement.claims or placement.volumes:
            details += [*_claims(placement, pod, allocates_claims), *_volumes(placement, pod, chooses_volumes)]
        findings += [(placement.namespace, placement.name, placement.node, OWNERSHIP, d) for d in details]
    return findings


def _uid(placement: Placement, pod: Pod) -> Iterator[str]:
    if placement.uid and pod.uid and placement.uid != pod.uid:
        yield (f"uid: the plan was made for uid {placement.uid}, the pod is now uid {pod.uid} "
               "(recreated since); make a new plan")


def own_claims(pod: Pod) -> set[str]:
    """The names of the resource claims the pod's ``spec.resourceClaims`` refers to: a claim by
    name, or the claim generated from a template (once ``status.resourceClaimStatuses`` has it)."""
    names = {entry.claim or pod.generated_claims.get(entry.name, "") for entry in pod.resource_claims}
    return names - {""}


def _claims(placement: Placement, pod: Pod, allowed: bool) -> Iterator[str]:
    if placement.claims and not allowed:
        yield "claims: the profile does not enable DynamicResources, so a plan for it allocates no resource claim"
        return
    own = own_claims(pod) | {EXTENDED_CLAIM}
    for j, given in enumerate(placement.claims):
        if given.claim not in own:
            yield (f"claims[{j}].claim: {given.claim} is not a resource claim of the pod "
                   "(spec.resourceClaims); bind writes only the pod's own")
    yield from (f"claims: claim {name} is allocated {times} times" for name, times in
                sorted(Counter(g.claim for g in placement.claims).items()) if times > 1)


def _volumes(placement: Placement, pod: Pod, allowed: bool) -> Iterator[str]:
    if placement.volumes and not allowed:
        yield "volumes: the profile does not enable VolumeBinding, so a plan for it chooses no volume"
        return
    own = {volume.claim for volume in pod.volumes}
    for j, choice in enumerate(placement.volumes):
        if choice.claim not in own:
            yield (f"volumes[{j}].claim: {choice.claim} is not a claim of the pod's volumes in namespace "
                   f"{pod.namespace}; bind writes only the pod's own")
    yield from (f"volumes: claim {name} is given a volume {times} times" for name, times in
                sorted(Counter(c.claim for c in placement.volumes).items()) if times > 1)
