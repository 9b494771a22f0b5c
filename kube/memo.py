"""Per-object memos: what a pure function of one typed object gives, computed once per object.

The typed objects (``kube.objects``: frozen dataclasses) that ``serve``'s informer store keeps are
the same objects cycle after cycle until their resource changes (a new object then), so a function
of one object that every cycle calls for every pod or node (its gang, its requests row, its node
keys) need not run again for an object it has seen. An entry is keyed by the object's identity and
lives as long as the object does (a weak reference drops it when the object goes), so memory
follows the objects in use and an id is never reused while its entry lives. An object keeps the
values of its last ``VARIANTS`` argument tuples only: the arguments may change from cycle to cycle
(the resources of the batch), and an object that lives for weeks must not keep one value per
batch it ever met.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Callable, Hashable, Sequence
from typing import Any, Generic, TypeVar

_MISSING = object()
T = TypeVar("T")
V = TypeVar("V")

VARIANTS = 8
"""Argument tuples remembered per object (the oldest is forgotten first)."""
MEMOS: list[IdentityMemo[Any, Any]] = []
"""Every memo made (tests clear them to compare a cold computation with a warm one)."""


def clear_all() -> None:
    """Forgets every memo's entries."""
    for memo in MEMOS:
        memo.clear()
    for last in LASTS:
        last.clear()


def memo_entries() -> int:
    """Entries of every memo."""
    return sum(len(memo) for memo in MEMOS)


class IdentityMemo(Generic[T, V]):
    """``memo(obj, *args)`` is ``function(obj, *args)``, computed once per live object and ``args``
    (hashable: what else the value depends on, a configuration, compared by equality). An object
    that takes no weak reference is not remembered. Thread-safe as far as it matters: two threads
    may both compute an entry, with equal results."""

    def __init__(self, function: Callable[..., V], variants: int = VARIANTS) -> None:
        self.function = function
        self.variants = max(1, variants)
        self._entries: dict[int, tuple[weakref.ref[Any], dict[tuple[Hashable, ...], V]]] = {}
        """id of an object -> (a weak reference to it, its values by argument tuple, oldest first)."""
        self._lock = threading.Lock()
        MEMOS.append(self)

    def __call__(self, obj: T, *args: Hashable) -> V:
        entry = self._entries.get(id(obj))
        if entry is not None and entry[0]() is obj:
            found = entry[1].get(args, _MISSING)
            if found is not _MISSING:
                return found  # type: ignore[return-value]
        value = self.function(obj, *args)
        key = id(obj)
        try:
            ref = weakref.ref(obj, lambda gone, key=key: self._forget(key, gone))  # type: ignore[misc]
        except TypeError:  # (not weakly referable: computed every time)
            return value
        with self._lock:
            entry = self._entries.get(key)
            if entry is None or entry[0]() is not obj:
                entry = self._entries[key] = (ref, {})
            values = entry[1]
            while len(values) >= self.variants:
                del values[next(iter(values))]
            values[args] = value
        return value

    def _forget(self, key: int, gone: weakref.ref[Any]) -> None:
        entry = self._entries.get(key)
        if entry is not None and entry[0] is gone:
            self._entries.pop(key, None)

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()

    def __len__(self) -> int:
        """Values remembered (of every object and argument tuple)."""
        return sum(len(values) for _, values in list(self._entries.values()))


class LastOf(Generic[V]):
    """``last(objects, *args)`` is ``function(objects, *args)``, kept for the last ``objects`` per
    ``args`` (hashable), the last ``kept`` argument tuples only: for what a cycle computes over
    every node, the same node objects cycle after cycle (a tuple of the same objects compares
    equal at once; a node that changed is a new object). The value is shared: treat it as
    read-only (an array is made so)."""

    def __init__(self, function: Callable[..., V], kept: int = 4) -> None:
        self.function, self.kept = function, max(1, kept)
        self._last: dict[tuple[Hashable, ...], tuple[tuple[Any, ...], V]] = {}
        self._lock = threading.Lock()
        LASTS.append(self)

    def __call__(self, objects: Sequence[Any], *args: Hashable) -> V:
        items = tuple(objects)
        with self._lock:
            last = self._last.get(args)
        if last is not None and last[0] == items:
            return last[1]
        value = self.function(items, *args)
        if hasattr(value, "flags"):  # a numpy array
            value.flags.writeable = False
        with self._lock:
            self._last.pop(args, None)
            self._last[args] = (items, value)
            while len(self._last) > self.kept:
                del self._last[next(iter(self._last))]
        return value

    def clear(self) -> None:
        with self._lock:
            self._last.clear()

    def __len__(self) -> int:
        return len(self._last)


LASTS: list[LastOf[Any]] = []
"""Every LastOf made."""
