"""The bound pods' requests per node (and their counts by shape), updated from the last
computation instead of summed again.

``serve`` plans cycle after cycle on the same nodes with nearly the same bound pods (a cycle binds
a few, the watch confirms or deletes a few): summing every bound pod's requests per node again is
the largest per-cycle cost of the aggregation at cluster scale (15 ms at 2,000 nodes and 2,500
bound pods), where only a handful of pods differ. So the sums of the last computation are kept
per resource tuple (the last ``KEPT`` tuples: the batch's resources decide them) with the very
node and pod objects they were made of, and the next call on the same nodes (the same objects, in
the same order) adds the pods that came and takes off those that went, told apart by identity:
the typed objects ``serve``'s store keeps are new objects whenever their resource changes (a pod
bound, resized, its node changed), so a changed pod is one that went and one that came. Anything
else (other nodes, most pods changed, a request too large for exact int64 sums) sums from scratch.

:func:`counted` does the same for the running pods' counts by a key (their shapes, which GPU
fragmentation weighs), in the order the keys first appear, as counting them in order does.

The answers are exactly those computed from scratch; tests compare them on random sequences of
changes.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Hashable, Iterable, Sequence
from dataclasses import dataclass

import numpy as np

from kubeplace.kube.memo import IdentityMemo, LastOf
from kubeplace.kube.objects import Node, Pod
from kubeplace.models.problem import FULL, FloatArray, IntArray

KEPT = 8
"""Sums (per resource tuple) and counts (per caller) kept, each holding its bound pods (references)."""
EXACT_LIMIT = 1 << 40
"""A request at or above it is summed in Python's exact integers (int64 could overflow)."""


def _requests(pod: Pod, resources: tuple[str, ...]) -> tuple[int, ...]:
    return tuple(max(int(pod.requests.get(name, 0)), 0) for name in resources)


_REQUESTS: IdentityMemo[Pod, tuple[int, ...]] = IdentityMemo(_requests)
"""A running pod's requests (none negative), once per pod object (and resources)."""


def summed_usage(nodes: Sequence[Node], bound: Sequence[Pod], resources: Sequence[str]) -> tuple[IntArray, FloatArray]:
    """(N, R) raw requests of the bound pods per node, summed exactly, saturated at FULL; and
    (N, R) what the saturation left out (0 but on a node whose pods ask for 4x its allocatable
    and more of a quantity near the limit): the true load is their sum."""
    index = {n.name: i for i, n in enumerate(nodes)}
    sums = [[0] * len(resources) for _ in nodes]
    names = tuple(resources)
    for pod in bound:
        i = index.get(pod.node_name)
        if i is not None:
            row = sums[i]
            for r, amount in enumerate(_REQUESTS(pod, names)):
                row[r] += amount
    try:
        used = np.minimum(np.array(sums, dtype=np.int64), FULL)
    except OverflowError:  # a sum beyond int64 (absurd requests): saturated one by one
        used = np.array([[min(v, FULL) for v in row] for row in sums], dtype=np.int64)
    beyond = np.array([[float(max(v - FULL, 0)) for v in row] for row in sums], dtype=np.float64)
    return used.reshape(len(nodes), len(resources)), beyond.reshape(len(nodes), len(resources))


@dataclass(frozen=True)
class _Sums:
    """Exact (N, R) sums of ``pods``' requests on ``nodes`` (pods by id: the dict holds them, so
    an id stands for the same object as long as the entry lives)."""

    nodes: tuple[Node, ...]
    index: dict[str, int]
    pods: dict[int, Pod]
    total: IntArray


_LAST: dict[tuple[str, ...], _Sums] = {}
_LOCK = threading.Lock()


def bound_usage(nodes: Sequence[Node], bound: Sequence[Pod], resources: Sequence[str]) -> tuple[IntArray, FloatArray]:
    """:func:`summed_usage`, from the last sums on the same nodes when few pods differ."""
    names, node_tuple = tuple(resources), tuple(nodes)
    with _LOCK:
        last = _LAST.get(names)
    current = _BY_ID(bound)
    if len(current) != len(bound):  # the same object twice (counted twice): nothing kept
        return summed_usage(nodes, bound, resources)
    sums = None
    if last is not None and last.nodes == node_tuple:
        sums = _updated(last, current, names)
    if sums is None:
        sums = _summed(node_tuple, current, names)
    if sums is None:  # a request too large for int64 sums
        return summed_usage(nodes, bound, resources)
    with _LOCK:
        _LAST.pop(names, None)
        _LAST[names] = sums
        while len(_LAST) > KEPT:
            del _LAST[next(iter(_LAST))]
    total = sums.total
    return np.minimum(total, FULL), np.maximum(total - FULL, 0).astype(np.float64)


def forget() -> None:
    """Drops the kept sums and counts (tests compare a cold computation with a warm one)."""
    with _LOCK:
        _LAST.clear()
        _LAST_COUNTS.clear()
        _LAST_CHANGES.clear()


def _summed(nodes: tuple[Node, ...], pods: dict[int, Pod], names: tuple[str, ...]) -> _Sums | None:
    index = {n.name: i for i, n in enumerate(nodes)}
    total = np.zeros((len(nodes), len(names)), dtype=np.int64)
    if not _add(total, index, pods.values(), names, 1):
        return None
    return _Sums(nodes, index, pods, total)


def _by_id(bound: tuple[Pod, ...]) -> dict[int, Pod]:
    return {id(p): p for p in bound}


_BY_ID: LastOf[dict[int, Pod]] = LastOf(_by_id, kept=1)
"""The bound pods by id, once per bound tuple for every kept sum and count of a cycle (shared:
read-only; the sums and counts keep it as their pods)."""
_LAST_CHANGES: list[tuple[dict[int, Pod], dict[int, Pod], tuple[list[Pod], list[Pod]] | None]] = []
"""The last :func:`_changes` asked, with the two tables it compared (held, so their ids stay theirs)."""


def _changes(last: dict[int, Pod], pods: dict[int, Pod]) -> tuple[list[Pod], list[Pod]] | None:
    """The pods that came and those that went since ``last``; None when more than a quarter of
    the pods differ (summing again is then as fast). Once for the sums and counts of a cycle that
    were all kept from the same last table (the cycle's tables are shared, ``_BY_ID``)."""
    with _LOCK:
        known = _LAST_CHANGES[0] if _LAST_CHANGES else None
    if known is not None and known[0] is last and known[1] is pods:
        return known[2]
    came = [p for key, p in pods.items() if last.get(key) is not p]
    went = [p for key, p in last.items() if pods.get(key) is not p]
    found = None if len(came) + len(went) > max(len(pods), len(last)) // 4 else (came, went)
    with _LOCK:
        _LAST_CHANGES[:] = [(last, pods, found)]
    return found


def _updated(last: _Sums, pods: dict[int, Pod], names: tuple[str, ...]) -> _Sums | None:
    """``last`` with the pods that came added and those that went taken off."""
    changes = _changes(last.pods, pods)
    if changes is None:
        return None
    came, went = changes
    total = last.total.copy()
    if not _add(total, last.index, came, names, 1) or not _add(total, last.index, went, names, -1):
        return None
    return _Sums(last.nodes, last.index, pods, total)


def _add(total: IntArray, index: dict[str, int], pods: Iterable[Pod], names: tuple[str, ...],
         sign: int) -> bool:
    """Adds (sign 1) or takes off (-1) the pods' requests on their nodes; False when one is too
    large to sum in int64."""
    rows: list[int] = []
    values: list[tuple[int, ...]] = []
    for pod in pods:
        i = index.get(pod.node_name)
        if i is not None:
            row = _REQUESTS(pod, names)
            if any(v >= EXACT_LIMIT for v in row):
                return False
            rows.append(i)
            values.append(row)
    if rows:
        np.add.at(total, np.array(rows, dtype=np.int64),
                  sign * np.array(values, dtype=np.int64).reshape(len(rows), len(names)))
    return True


@dataclass(frozen=True)
class _Counts:
    pods: dict[int, Pod]
    count: dict[Hashable, int]
    """Key -> pods of it (more than 0)."""
    prefix: tuple[Pod, ...] = ()
    """The bound pods up to the last one whose key came first (the order was found there)."""
    order: tuple[Hashable, ...] = ()
    """The keys in the order they first appear in ``prefix``."""


_LAST_COUNTS: dict[Hashable, _Counts] = {}


def counted(bound: Sequence[Pod], key_of: Callable[[Pod], Hashable | None], kept_as: Hashable,
            ordered: bool = True) -> dict[Hashable, int]:
    """``{key_of(pod): how many pods}`` of the bound pods whose key is not None, in the order the
    keys first appear in ``bound`` (in any order unless ``ordered``): exactly what counting them
    in order gives, from the counts kept (as ``kept_as``: one entry per caller and arguments, the
    last ``KEPT``) when few pods changed. ``key_of`` must be a pure function of the pod object."""
    pods = _BY_ID(bound)
    twice = len(pods) != len(bound)  # the same object twice (counted twice): nothing kept
    with _LOCK:
        last = None if twice else _LAST_COUNTS.get(kept_as)
    changes = _changes(last.pods, pods) if last is not None else None
    if last is None or changes is None:
        count: dict[Hashable, int] = {}
        for key in map(key_of, bound):
            if key is not None:
                count[key] = count.get(key, 0) + 1
    else:
        count = dict(last.count)
        for pod, step in [(p, 1) for p in changes[0]] + [(p, -1) for p in changes[1]]:
            key = key_of(pod)
            if key is not None:
                count[key] = count.get(key, 0) + step
        count = {k: n for k, n in count.items() if n}
    prefix, order = _first_order(bound, key_of, count, last) if ordered else ((), ())
    with _LOCK:
        _LAST_COUNTS.pop(kept_as, None)
        if not twice:
            _LAST_COUNTS[kept_as] = _Counts(pods, count, prefix, order)
        while len(_LAST_COUNTS) > KEPT:
            del _LAST_COUNTS[next(iter(_LAST_COUNTS))]
    if not ordered:
        return dict(count)
    return {key: count[key] for key in order}


def _first_order(bound: Sequence[Pod], key_of: Callable[[Pod], Hashable | None], count: dict[Hashable, int],
                 last: _Counts | None) -> tuple[tuple[Pod, ...], tuple[Hashable, ...]]:
    """The keys of ``count`` in the order they first appear in ``bound``, and the pods up to the
    one where the last key first appears: the last call's order when its keys are the same and
    ``bound`` still begins with the same pods up to there (the keys are then met in the same
    order, and all of them), else found by walking ``bound``."""
    if (last is not None and last.order and len(last.order) == len(count) and set(last.order) == count.keys()
            and tuple(bound[: len(last.prefix)]) == last.prefix):
        return last.prefix, last.order
    order: dict[Hashable, None] = {}
    end = 0
    for i, pod in enumerate(bound):  # (until every key is placed: the first few pods, usually)
        if len(order) == len(count):
            break
        key = key_of(pod)
        if key is not None and key not in order:
            order[key] = None
            end = i + 1
    return tuple(bound[:end]), tuple(order)
