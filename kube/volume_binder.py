"""Binding a pod's volumes before the pod, as the kube-scheduler's VolumeBinding PreBind does
(volumebinding/binder.go ``BindPodVolumes``).

For each unbound WaitForFirstConsumer claim the plan gave a volume (:class:`kube.volumes.ClaimChoice`):

- a static volume gets the claim in its ``spec.claimRef`` (kind, namespace, name, uid and the
  claim's resourceVersion, as ``GetBindVolumeToClaim`` writes it) and, unless it already named the
  claim, the ``pv.kubernetes.io/bound-by-controller`` annotation; the PV controller then binds both;
- a claim to provision gets ``volume.kubernetes.io/selected-node: <node>``; the external
  provisioner creates a volume for that node and the PV controller binds it.

Every write is an update with the object's resourceVersion as precondition. Then the claims are
watched (polled) until they are bound (a volume name and ``pv.kubernetes.io/bind-completed``), with
the checks the kube-scheduler makes: the volume must still name the claim and admit the node, a
provisioner that gives up removes ``selected-node`` ("provisioning failed"). Only a pod whose claims
are all bound is bound. When a pod's volumes fail (a write refused, provisioning failed, the time
is up), what is still safe to undo is undone: a claimRef or ``selected-node`` this run wrote, on a
claim not bound yet, with the resourceVersion read just before as precondition (if the PV
controller or a provisioner moved meanwhile, it is left to them and the report says so).
"""

from __future__ import annotations

import copy
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from kubeplace.kube.binder import Binding, BindResult, Outcome, PodBinder, bind_all
from kubeplace.kube.errors import ClusterError, Conflict, InputError, NotFound, Unauthorized, Unreachable
from kubeplace.kube.selectors import terms_match
from kubeplace.kube.storage import parse_claim, parse_volume
from kubeplace.kube.storage_objects import (
    ANN_BOUND_BY_CONTROLLER,
    ANN_SELECTED_NODE,
    ClaimChoice,
    PersistentVolume,
    PersistentVolumeClaim,
)

RawObject = dict[str, Any]
BIND_TIMEOUT_SECONDS = 600.0
"""How long a pod's claims may take to be bound (the kube-scheduler's bindTimeoutSeconds default)."""
POLL_SECONDS = 1.0


class VolumeApi(Protocol):
    """The part of :class:`kube.client.Cluster` that volume binding needs."""

    def read_persistent_volume(self, name: str) -> RawObject: ...

    def read_persistent_volume_claim(self, namespace: str, name: str) -> RawObject: ...

    def update_persistent_volume(self, volume: Mapping[str, Any], dry_run: bool = False) -> RawObject: ...

    def update_persistent_volume_claim(self, claim: Mapping[str, Any], dry_run: bool = False) -> RawObject: ...


class VolumeBinder(PodBinder, VolumeApi, Protocol):
    """Binds pods and their volumes."""


class VolumesNotReady(Exception):
    """A pod's volumes cannot be made ready (the message says why); the pod is not bound."""


@dataclass(frozen=True)
class PodVolumes:
    """What one placed pod's volumes need: its node (and the node's labels) and the choices."""

    namespace: str
    name: str
    node: str
    node_labels: Mapping[str, str]
    choices: tuple[ClaimChoice, ...]

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"


@dataclass
class Written:
    """The writes made for one pod: (PV name, claim name) prebound, claims annotated."""

    volumes: list[tuple[str, str]] = field(default_factory=list)
    claims: list[str] = field(default_factory=list)


def write_volumes(api: VolumeApi, pod: PodVolumes, dry_run: bool, written: Written) -> None:
    """Writes what the pod's choices need (nothing for what is already in place), recording each
    write in ``written``; :class:`VolumesNotReady` when a choice cannot be made any more."""
    for choice in pod.choices:
        raw_claim = api.read_persistent_volume_claim(pod.namespace, choice.claim)
        claim = _claim(raw_claim)
        if claim.bound:
            continue
        if choice.volume:
            raw_volume = api.read_persistent_volume(choice.volume)
            updated = bound_to_claim(raw_volume, raw_claim)
            if updated is not None:
                api.update_persistent_volume(updated, dry_run)
                if _volume(raw_volume).claim_ref is None:  # a pre-binding of a user's is never undone
                    written.volumes.append((choice.volume, choice.claim))
            continue
        selected = claim.selected_node
        if selected is not None and selected != pod.node:
            raise VolumesNotReady(f"claim {claim.name} is being provisioned for node {selected}")
        if selected is None:
            annotated = copy.deepcopy(raw_claim)
            annotated["metadata"].setdefault("annotations", {})[ANN_SELECTED_NODE] = pod.node
            api.update_persistent_volume_claim(annotated, dry_run)
            written.claims.append(choice.claim)


def bound_to_claim(raw_volume: Mapping[str, Any], raw_claim: Mapping[str, Any]) -> RawObject | None:
    """The volume with its claimRef set to the claim (``GetBindVolumeToClaim``), or None when it
    names the claim already; :class:`VolumesNotReady` when it is another claim's."""
    volume, claim = _volume(raw_volume), _claim(raw_claim)
    ref = volume.claim_ref
    if ref is not None and not _names(volume, claim):
        raise VolumesNotReady(f"volume {volume.name} was taken by claim {ref.namespace}/{ref.name} meanwhile")
    out = copy.deepcopy(dict(raw_volume))
    dirty = False
    if ref is None or ref.uid != claim.uid:
        out["spec"]["claimRef"] = {"kind": "PersistentVolumeClaim", "apiVersion": "v1", "namespace": claim.namespace,
                                   "name": claim.name, "uid": claim.uid, "resourceVersion": claim.resource_version}
        dirty = True
    annotations = out["metadata"].setdefault("annotations", {})
    if ref is None and ANN_BOUND_BY_CONTROLLER not in annotations:
        annotations[ANN_BOUND_BY_CONTROLLER] = "yes"
        dirty = True
    return out if dirty else None


def volumes_ready(api: VolumeApi, pod: PodVolumes) -> bool:
    """Whether every chosen claim is bound now (``checkBindings``); :class:`VolumesNotReady` when
    it will not be: the volume no longer names the claim or does not admit the node, or the
    provisioner gave up (it removes ``selected-node``)."""
    for choice in pod.choices:
        claim = _claim(api.read_persistent_volume_claim(pod.namespace, choice.claim))
        if choice.volume:
            volume = _volume(api.read_persistent_volume(choice.volume))
            if volume.claim_ref is None or not volume.claim_ref.uid:
                raise VolumesNotReady(f"the claimRef of volume {volume.name} was reset")
        elif claim.selected_node != pod.node:
            raise VolumesNotReady(f"provisioning failed for claim {claim.name}")
        elif claim.volume_name:
            try:
                volume = _volume(api.read_persistent_volume(claim.volume_name))
            except NotFound:
                return False  # not seen yet; a volume that is gone unbinds the claim in time
        if (choice.volume or claim.volume_name) and not terms_match(volume.node_affinity, pod.node_labels, ""):
            raise VolumesNotReady(f"volume {volume.name}'s node affinity does not match node {pod.node}")
        if not claim.bound:
            return False
    return True


def undo(api: VolumeApi, pod: PodVolumes, written: Written) -> str:
    """Undoes this run's writes for the pod where the claim is still unbound; says what it did."""
    undone, left = [], []
    for name, claim_name in reversed(written.volumes):
        try:
            raw_claim = api.read_persistent_volume_claim(pod.namespace, claim_name)
            raw = api.read_persistent_volume(name)
            if not _names(_volume(raw), _claim(raw_claim)):
                continue  # nothing of this run's is left on it
            if _claim(raw_claim).volume_name:
                left.append(f"volume {name}")
                continue
            reverted = copy.deepcopy(raw)
            reverted["spec"].pop("claimRef", None)
            (reverted["metadata"].get("annotations") or {}).pop(ANN_BOUND_BY_CONTROLLER, None)
            api.update_persistent_volume(reverted)
            undone.append(f"volume {name}'s claimRef")
        except (Conflict, NotFound, InputError):
            left.append(f"volume {name}")
    for claim_name in reversed(written.claims):
        try:
            raw_claim = api.read_persistent_volume_claim(pod.namespace, claim_name)
            claim = _claim(raw_claim)
            if claim.selected_node != pod.node:
                continue  # the provisioner removed it already
            if claim.volume_name:
                left.append(f"claim {claim_name}")
                continue
            reverted = copy.deepcopy(raw_claim)
            reverted["metadata"]["annotations"].pop(ANN_SELECTED_NODE, None)
            api.update_persistent_volume_claim(reverted)
            undone.append(f"claim {claim_name}'s selected node")
        except (Conflict, NotFound, InputError):
            left.append(f"claim {claim_name}")
    parts = ([f"undone: {', '.join(undone)}"] if undone else []) + (
        [f"left to the PV controller: {', '.join(left)}"] if left else [])
    return "; ".join(parts)


def bind_with_volumes(api: VolumeBinder, bindings: Sequence[Binding], volumes: Mapping[str, PodVolumes],
                      dry_run: bool, timeout: float = BIND_TIMEOUT_SECONDS, poll: float = POLL_SECONDS,
                      clock: Callable[[], float] = time.monotonic,
                      sleep: Callable[[float], None] = time.sleep) -> list[BindResult]:
    """Binds ``bindings`` in order as :func:`kube.binder.bind_all` does, the volumes of the pods in
    ``volumes`` first: every write, then a wait (not in a dry run, where nothing is stored) until
    their claims are bound; a pod whose volumes fail is reported ``volumes_not_ready`` and not
    bound. A lost connection or credential stops the run: the rest is ``not_attempted``."""
    outcome: dict[str, BindResult] = {}
    written: dict[str, Written] = {}
    stopped = ""
    for binding in bindings:
        work = volumes.get(binding.key)
        if work is None or not work.choices:
            continue
        written[binding.key] = Written()
        try:
            write_volumes(api, work, dry_run, written[binding.key])
        except (Unreachable, Unauthorized) as error:
            kind = Outcome.UNKNOWN if isinstance(error, Unreachable) else Outcome.ERROR
            outcome[binding.key], stopped = BindResult(binding, kind, str(error), dry_run), str(error)
            break
        except (ClusterError, VolumesNotReady, InputError) as error:
            outcome[binding.key] = _failed(api, binding, work, written[binding.key], str(error), dry_run)
    waiting = [b for b in bindings if b.key in written and b.key not in outcome and not dry_run and not stopped]
    stopped = stopped or _wait(api, waiting, volumes, written, outcome, timeout, poll, clock, sleep)
    to_bind = [b for b in bindings if b.key not in outcome]
    if stopped:
        reason = f"not attempted: the run stopped ({stopped})"
        outcome |= {b.key: BindResult(b, Outcome.NOT_ATTEMPTED, reason, dry_run) for b in to_bind}
    else:
        outcome |= {r.binding.key: r for r in bind_all(api, to_bind, dry_run)}
    return [outcome[b.key] for b in bindings]


def _wait(api: VolumeApi, waiting: Sequence[Binding], volumes: Mapping[str, PodVolumes],
          written: Mapping[str, Written], outcome: dict[str, BindResult], timeout: float, poll: float,
          clock: Callable[[], float], sleep: Callable[[float], None]) -> str:
    """Polls until the waiting pods' claims are bound, failed or out of time; "" or why it stopped."""
    deadline = clock() + timeout
    pending = list(waiting)
    while pending:
        for binding in list(pending):
            work = volumes[binding.key]
            try:
                ready = volumes_ready(api, work)
            except (Unreachable, Unauthorized) as error:
                return str(error)
            except (ClusterError, VolumesNotReady, InputError) as error:
                outcome[binding.key] = _failed(api, binding, work, written[binding.key], str(error), False)
                pending.remove(binding)
                continue
            if ready:
                pending.remove(binding)
        if pending and clock() >= deadline:
            for binding in pending:
                message = f"timed out after {timeout:g}s waiting for its claims to be bound"
                outcome[binding.key] = _failed(api, binding, volumes[binding.key], written[binding.key], message,
                                               False)
            return ""
        if pending:
            sleep(poll)
    return ""


def _failed(api: VolumeApi, binding: Binding, work: PodVolumes, written: Written, why: str,
            dry_run: bool) -> BindResult:
    try:
        undone = "" if dry_run else undo(api, work, written)
    except ClusterError as error:
        undone = f"nothing undone ({error})"
    message = f"volumes not ready: {why}" + (f"; {undone}" if undone else "")
    return BindResult(binding, Outcome.VOLUMES_NOT_READY, message, dry_run)


def _names(volume: PersistentVolume, claim: PersistentVolumeClaim) -> bool:
    """The volume's claimRef names the claim (``IsVolumeBoundToClaim``)."""
    ref = volume.claim_ref
    return (ref is not None and (ref.namespace, ref.name) == (claim.namespace, claim.name)
            and ref.uid in ("", claim.uid))


def _claim(raw: Mapping[str, Any]) -> PersistentVolumeClaim:
    return parse_claim(raw, "cluster")


def _volume(raw: Mapping[str, Any]) -> PersistentVolume:
    return parse_volume(raw, "cluster")
