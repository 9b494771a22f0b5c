"""Allocating a pod's resource claims before the pod is bound, as the kube-scheduler's
DynamicResources PreBind does (``bindClaim``).

For each claim the plan allocates (:class:`kube.dra.ClaimAllocation`), on the claim as it is now:
a claim being deleted, or allocated meanwhile to other devices, fails the pod ("claim ... got
deleted / allocated elsewhere in the meantime"); otherwise the claim gets the
``resource.kubernetes.io/delete-protection`` finalizer (an update), then ``status.allocation`` and
the pod in ``status.reservedFor`` (an update of the status). Both updates carry the claim's
resourceVersion as precondition: a claim changed meanwhile is a 409, reported for that pod, whose
other writes are undone where still safe; the other pods go on. A claim already allocated (by a
cluster's earlier allocation) only gets the reservation. Only a pod whose claims are all written
is bound; ``--dry-run=server`` sends every write as a dry run.

A pod's extended resource claim (extended resources served by DRA) is created first, as the
kube-scheduler's PreBind does (``<pod>-extended-resources-`` and a generated suffix, the pod its
controller, the ``resource.kubernetes.io/extended-resource-claim`` annotation, the plan's device
requests), then allocated and reserved like the others, then the pod's
``status.extendedResourceClaimStatus`` (request mappings, the claim's name) is patched; a failure
deletes the claim again.
"""

from __future__ import annotations

import contextlib
import copy
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any, Protocol

from kubeplace.kube.binder import Binding, BindResult, Outcome
from kubeplace.kube.dra import DELETE_PROTECTION, EXTENDED_CLAIM_ANNOTATION, ClaimAllocation
from kubeplace.kube.dra_parse import allocation_manifest, mappings_manifest, parse_resource_claim, requests_manifest
from kubeplace.kube.errors import ClusterError, Conflict, InputError, NotFound, Unauthorized, Unreachable

RawObject = dict[str, Any]
EXTENDED = "extended"
"""Marks, among the claims written for a pod, its extended resource claim (created by the run)."""


class ClaimApi(Protocol):
    """The part of :class:`kube.client.Cluster` that claim allocation needs."""

    def read_resource_claim(self, namespace: str, name: str) -> RawObject: ...

    def update_resource_claim(self, claim: Mapping[str, Any], dry_run: bool = False,
                              status: bool = False) -> RawObject: ...

    def create_resource_claim(self, claim: Mapping[str, Any], dry_run: bool = False) -> RawObject: ...

    def delete_resource_claim(self, namespace: str, name: str) -> None: ...

    def patch_pod_status(self, namespace: str, name: str, status: Mapping[str, Any], dry_run: bool = False) -> None: ...


class ClaimNotReady(Exception):
    """A claim cannot be allocated for the pod any more (the message says why)."""


def extended_claim_manifest(binding: Binding, given: ClaimAllocation) -> RawObject:
    """The pod's extended resource claim as the kube-scheduler creates it: named after the pod
    (``<pod>-extended-resources-`` and a generated suffix), the pod its controller, annotated."""
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
            "metadata": {"generateName": f"{binding.name}-extended-resources-", "namespace": binding.namespace,
                         "ownerReferences": [{"apiVersion": "v1", "kind": "Pod", "name": binding.name,
                                              "uid": binding.uid, "controller": True}],
                         "annotations": {EXTENDED_CLAIM_ANNOTATION: "true"}},
            "spec": {"devices": {"requests": requests_manifest(given.requests)}}}


def reserve_extended(api: ClaimApi, binding: Binding, given: ClaimAllocation, dry_run: bool) -> str:
    """Creates the pod's extended resource claim, writes its allocation and the pod's reservation
    (as for any claim), then the pod's ``status.extendedResourceClaimStatus``; returns its name.
    On a failure after the claim is created, the claim is deleted (its finalizer removed first),
    as the kube-scheduler's Unreserve does. A dry run creates the claim and patches the pod as dry
    runs (the claim does not exist after, so its status update cannot be sent)."""
    created = api.create_resource_claim(extended_claim_manifest(binding, given), dry_run)
    name = str(created["metadata"]["name"])
    status = {"extendedResourceClaimStatus": {"requestMappings": mappings_manifest(given.mappings),
                                              "resourceClaimName": name}}
    if dry_run:
        api.patch_pod_status(binding.namespace, binding.name, status, dry_run=True)
        return name
    try:
        reserve(api, binding, replace(given, claim=name), dry_run)
        api.patch_pod_status(binding.namespace, binding.name, status)
    except (ClusterError, ClaimNotReady, InputError):
        _delete_extended(api, binding.namespace, name)
        raise
    return name


def _delete_extended(api: ClaimApi, namespace: str, name: str) -> None:
    """deleteClaim: the finalizer removed, then the claim deleted (best effort)."""
    with contextlib.suppress(ClusterError, InputError):
        raw = copy.deepcopy(api.read_resource_claim(namespace, name))
        finalizers = raw["metadata"].get("finalizers") or []
        if DELETE_PROTECTION in finalizers:
            raw["metadata"]["finalizers"] = [f for f in finalizers if f != DELETE_PROTECTION]
            api.update_resource_claim(raw)
        api.delete_resource_claim(namespace, name)


def reserve(api: ClaimApi, binding: Binding, given: ClaimAllocation, dry_run: bool) -> bool:
    """Writes one claim's allocation and the pod's reservation; True when this run allocated it
    (False: it was allocated already and only reserved)."""
    raw = api.read_resource_claim(binding.namespace, given.claim)
    claim = parse_resource_claim(raw, "cluster")
    if claim.deleting:
        raise ClaimNotReady(f"claim {claim.key} got deleted in the meantime")
    allocated = claim.allocation is not None
    if claim.allocation is not None and set(claim.allocation.results) != set(given.allocation.results):
        raise ClaimNotReady(f"claim {claim.key} got allocated elsewhere in the meantime")
    if binding.uid and binding.uid in claim.reserved_for:
        return False
    if not allocated and DELETE_PROTECTION not in claim.finalizers:
        protected = copy.deepcopy(raw)
        protected["metadata"].setdefault("finalizers", []).append(DELETE_PROTECTION)
        raw = api.update_resource_claim(protected, dry_run)
    updated = copy.deepcopy(raw)
    status = updated.setdefault("status", {})
    if not allocated:
        status["allocation"] = allocation_manifest(given.allocation)
    status.setdefault("reservedFor", []).append({"resource": "pods", "name": binding.name, "uid": binding.uid})
    api.update_resource_claim(updated, dry_run, status=True)
    return not allocated


def unreserve(api: ClaimApi, binding: Binding, claim_name: str, deallocate: bool) -> None:
    """Takes the pod out of the claim's reservedFor (and the allocation this run wrote, if nobody
    else reserved it meanwhile), with the claim's resourceVersion as precondition."""
    raw = copy.deepcopy(api.read_resource_claim(binding.namespace, claim_name))
    status = raw.setdefault("status", {})
    status["reservedFor"] = [r for r in status.get("reservedFor") or [] if r.get("uid") != binding.uid]
    if deallocate and not status["reservedFor"]:
        status.pop("allocation", None)
    api.update_resource_claim(raw, status=True)


def allocate_claims(api: ClaimApi, bindings: Sequence[Binding], claims: Mapping[str, Sequence[ClaimAllocation]],
                    dry_run: bool, written: dict[str, list[str]] | None = None) -> tuple[list[Binding],
                                                                                        list[BindResult]]:
    """Writes the claims of each binding that has some, in order: (the bindings whose claims are
    all written, ready to bind; the results of those that failed, not to bind). A lost connection
    or credential stops the run: the rest is ``not_attempted``. ``written`` gets, per binding key,
    the names of the claims written (an extended resource claim's as created)."""
    ready: list[Binding] = []
    failed: list[BindResult] = []
    for index, binding in enumerate(bindings):
        done: list[tuple[str, bool | str]] = []
        try:
            for given in claims.get(binding.key, ()):
                if given.extended:
                    done.append((reserve_extended(api, binding, given, dry_run), EXTENDED))
                else:
                    done.append((given.claim, reserve(api, binding, given, dry_run)))
        except (Unreachable, Unauthorized) as error:
            kind = Outcome.UNKNOWN if isinstance(error, Unreachable) else Outcome.ERROR
            failed.append(BindResult(binding, kind, str(error), dry_run))
            failed += [BindResult(b, Outcome.NOT_ATTEMPTED, f"not attempted: the run stopped ({error})", dry_run)
                       for b in bindings[index + 1:]]
            return ready, failed
        except (ClusterError, ClaimNotReady, InputError) as error:
            kind = Outcome.CONFLICT if isinstance(error, Conflict | ClaimNotReady) else Outcome.ERROR
            undone = "" if dry_run else _undo(api, binding, done)
            failed.append(BindResult(binding, kind, f"resource claims not allocated: {error}{undone}", dry_run))
            continue
        ready.append(binding)
        if written is not None:
            written[binding.key] = [name for name, _ in done]
    return ready, failed


def _undo(api: ClaimApi, binding: Binding, done: Sequence[tuple[str, bool | str]]) -> str:
    undone, left = [], []
    for claim_name, allocated in reversed(done):
        if allocated == EXTENDED:
            _delete_extended(api, binding.namespace, claim_name)
            undone.append(claim_name)
            continue
        try:
            unreserve(api, binding, claim_name, allocated is True)
            undone.append(claim_name)
        except (ClusterError, InputError) as error:
            if not isinstance(error, NotFound):
                left.append(claim_name)
    return ((f"; undone: {', '.join(undone)}" if undone else "")
            + (f"; left reserved: {', '.join(left)}" if left else ""))
