"""Binds planned pods, one at a time, and says exactly what happened to each.

A failure for one pod (409: bound by someone else, deleted, gated; 404; 403; any other API
error) is reported and the others go on. When the API server cannot be reached or refuses the
credential, the run stops: the pods not tried yet are reported ``not_attempted``, so a rerun
from a fresh snapshot binds nothing twice.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import FIRST_COMPLETED, Executor, Future, wait
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Protocol

from kubeplace.kube.errors import ClusterError, Conflict, Forbidden, NotFound, Unauthorized, Unreachable


class Outcome(StrEnum):
    BOUND = "bound"
    """Bound (or, in a dry run, the API server accepted the binding without storing it)."""
    CONFLICT = "conflict"
    """409: already bound, being deleted, scheduling-gated, or recreated with another uid."""
    NOT_FOUND = "not_found"
    """404: the pod is gone."""
    FORBIDDEN = "forbidden"
    """403: RBAC does not allow ``create pods/binding`` here."""
    ERROR = "error"
    """Any other refusal; not bound."""
    UNKNOWN = "unknown"
    """The connection failed during this request: the server may or may not have bound it."""
    VOLUMES_NOT_READY = "volumes_not_ready"
    """The pod's claims could not be bound (a write refused, provisioning failed, out of time): not bound."""
    NODE_MISSING = "node_missing"
    """Planned on a new node that did not register in time, or that Karpenter did not launch: not sent."""
    NOT_FITTING = "not_fitting"
    """The plan no longer holds for it on the cluster as it is now (a new node registered otherwise than
    planned, a pod it depended on not bound): not sent."""
    NOT_ATTEMPTED = "not_attempted"
    """Not tried because the run stopped before it (unreachable API server, bad credential)."""


@dataclass(frozen=True)
class Binding:
    namespace: str
    name: str
    uid: str
    node: str
    annotations: Mapping[str, str] = field(default_factory=dict)
    """Set on the pod with the binding (e.g. the GPU devices chosen)."""

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"


@dataclass(frozen=True)
class BindResult:
    binding: Binding
    outcome: Outcome
    message: str = ""
    dry_run: bool = False


class PodBinder(Protocol):
    """The part of :class:`kube.client.Cluster` that binding needs."""

    def bind(self, namespace: str, name: str, uid: str, node: str, dry_run: bool = False,
             annotations: Mapping[str, str] | None = None) -> None: ...


_PER_POD_OUTCOMES: tuple[tuple[type[ClusterError], Outcome], ...] = (
    (Conflict, Outcome.CONFLICT),
    (NotFound, Outcome.NOT_FOUND),
    (Forbidden, Outcome.FORBIDDEN),
)


def bind_all(
    cluster: PodBinder,
    bindings: Sequence[Binding],
    dry_run: bool,
    on_result: Callable[[BindResult], None] | None = None,
) -> list[BindResult]:
    """Binds each pod in order; one result per binding, in the same order.

    ``on_result`` is called as each result is known (for progress output).
    """
    results: list[BindResult] = []

    def record(result: BindResult) -> None:
        results.append(result)
        if on_result is not None:
            on_result(result)

    for index, binding in enumerate(bindings):
        result, stop = _bind_one(cluster, binding, dry_run)
        record(result)
        if stop:
            reason = f"not attempted: the run stopped at {binding.key} ({result.message})"
            for skipped in bindings[index + 1 :]:
                record(BindResult(skipped, Outcome.NOT_ATTEMPTED, reason, dry_run))
            break
    return results


def bind_concurrently(
    cluster: PodBinder,
    bindings: Sequence[Binding],
    pool: Executor,
    most: int,
    halt: Callable[[], str],
    on_result: Callable[[int, BindResult], None] | None = None,
    first: int = 1,
) -> list[BindResult]:
    """Binds on up to ``most`` requests at once, in order of ``bindings``; one result per
    binding, in the same order.

    ``first`` requests go at once (by default the first goes alone) and each answer lets one
    more run alongside (slow start), so a stop, a lost lease or an unreachable API server ends
    the run after one binding, not after a wave of them; a caller whose last run went well may
    start wider. ``halt()`` is asked before every request: a non-empty reason stops the run,
    as a failed connection or a refused credential does; the requests in flight finish and the
    rest are ``not_attempted`` with that reason. ``on_result(index, result)`` is called in the
    caller's thread as each result comes in.
    """
    results: list[BindResult | None] = [None] * len(bindings)
    running: dict[Future[tuple[BindResult, bool]], int] = {}
    window, following, reason = max(1, min(most, first)), 0, ""
    while following < len(bindings) or running:
        while not reason and following < len(bindings) and len(running) < window:
            reason = halt()
            if reason:
                break
            running[pool.submit(_bind_one, cluster, bindings[following], False)] = following
            following += 1
        if not running:
            break
        finished, _ = wait(list(running), return_when=FIRST_COMPLETED)
        for future in finished:
            index = running.pop(future)
            result, stop = future.result()
            results[index] = result
            if stop and not reason:
                reason = f"the run stopped at {result.binding.key} ({result.message})"
            window = min(most, window + 1)
            if on_result is not None:
                on_result(index, result)
    return [r if r is not None else BindResult(b, Outcome.NOT_ATTEMPTED, f"not attempted: {reason}")
            for r, b in zip(results, bindings, strict=True)]


def _bind_one(cluster: PodBinder, binding: Binding, dry_run: bool) -> tuple[BindResult, bool]:
    """The result for one pod, and whether the run must stop."""
    try:
        cluster.bind(binding.namespace, binding.name, binding.uid, binding.node, dry_run,
                     binding.annotations or None)
    except Unreachable as error:
        return BindResult(binding, Outcome.UNKNOWN, str(error), dry_run), True
    except Unauthorized as error:
        return BindResult(binding, Outcome.ERROR, str(error), dry_run), True
    except ClusterError as error:
        outcome = next((found for kind, found in _PER_POD_OUTCOMES if isinstance(error, kind)), Outcome.ERROR)
        return BindResult(binding, outcome, str(error), dry_run), False
    return BindResult(binding, Outcome.BOUND, "", dry_run), False


def summary(results: Sequence[BindResult]) -> dict[Outcome, int]:
    """How many pods had each outcome (only outcomes that occurred)."""
    counts: dict[Outcome, int] = {}
    for result in results:
        counts[result.outcome] = counts.get(result.outcome, 0) + 1
    return counts
