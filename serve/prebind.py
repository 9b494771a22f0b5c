"""What a placed unit needs written before its pods are bound, as the kube-scheduler's PreBind
plugins do (VolumeBinding, DynamicResources): each returns "" when the unit may be bound now, else
why it is not (the loop then holds it back, and the pods' Events say why)."""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from typing import Protocol

from kubeplace.kube.binder import Binding
from kubeplace.kube.claim_binder import ClaimApi, allocate_claims
from kubeplace.kube.errors import ClusterError, InputError
from kubeplace.kube.objects import GangKey
from kubeplace.kube.volume_binder import (
    PodVolumes,
    VolumeApi,
    VolumesNotReady,
    Written,
    undo,
    volumes_ready,
    write_volumes,
)
from kubeplace.plan.plan import Placement
from kubeplace.serve.informer import MODIFIED, RESOURCE_CLAIMS, Store
from kubeplace.serve.outcomes import Decision


class PreBindClient(VolumeApi, ClaimApi, Protocol):
    """The writes of the volume and claim PreBind steps."""


def devices_refused(client: PreBindClient, store: Store, decide: Decision, placements: Sequence[Placement],
                    gang: GangKey | None) -> str:
    """Allocates the unit's resource claims (as the kube-scheduler's DynamicResources PreBind);
    "" when every claim is written, else why the unit is not bound now. The claims written are
    put in the store at once, so that the next plan does not give their devices again."""
    bindings = [Binding(p.namespace, p.name, p.uid, p.node) for p in placements if p.claims]
    claims = {f"{p.namespace}/{p.name}": p.claims for p in placements if p.claims}
    written: dict[str, list[str]] = {}
    _, failed = allocate_claims(client, bindings, claims, False, written)
    for p in placements:
        for name in written.get(f"{p.namespace}/{p.name}", ()):
            with contextlib.suppress(ClusterError):  # else the watch brings it
                store.apply(RESOURCE_CLAIMS, MODIFIED, client.read_resource_claim(p.namespace, name))
    for result in failed:
        decide(pod=result.binding.key, node=result.binding.node, gang=gang, outcome=str(result.outcome),
               why=result.message)
    return failed[0].message if failed else ""


def volumes_waiting(client: PreBindClient, store: Store, decide: Decision, placements: Sequence[Placement],
                    gang: GangKey | None) -> str:
    """Makes the writes the unit's claims need (as the kube-scheduler's PreBind); "" when every
    claim is bound, else why the unit waits: it is bound in a later cycle, once its claims are
    (a volume pre-bound, or a claim selected for a node, keeps the next plan on that node), never
    before. Failed writes are undone where still safe."""
    waiting = []
    for p in placements:
        if not p.volumes:
            continue
        node = store.get("nodes", p.node) or {}
        work = PodVolumes(p.namespace, p.name, p.node, (node.get("metadata") or {}).get("labels") or {}, p.volumes)
        written = Written()
        try:
            write_volumes(client, work, False, written)
            if not volumes_ready(client, work):
                waiting.append(work.key)
        except (ClusterError, VolumesNotReady, InputError) as error:
            try:
                undone = undo(client, work, written)
            except ClusterError:
                undone = ""
            why = f"volumes of {work.key} not ready: {error}" + (f"; {undone}" if undone else "")
            decide(pod=work.key, node=p.node, gang=gang, outcome="volumes_not_ready", why=why)
            return why
    if waiting:
        why = f"waiting for the claims of {', '.join(waiting)} to be bound"
        decide(pod=", ".join(waiting), gang=gang, outcome="volumes_pending", why=why)
        return why
    return ""
