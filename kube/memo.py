"""Per-object memos: what a pure function of one typed object gives, computed once per object.

The typed objects (``kube.objects``: frozen dataclasses) that ``serve``'s informer store keeps are
the same objects cycle after cycle until their resource changes (a new object then), so a function
of one object that every cycle calls for every pod or node (its gang, its requests row, its node
keys) need not run again for an object it has seen. An entry is keyed by the object's identity and
lives as long as the object does (a weak reference drops it when the object goes), so memory
follows the objects in use and an id is never reused while its entry lives.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Hashable
from typing import Any, Generic, TypeVar

T = TypeVar("T")
V = TypeVar("V")

MEMOS: list[IdentityMemo[Any, Any]] = []
"""Every memo made (tests clear them to compare a cold computation with a warm one)."""


def clear_all() -> None:
    """Forgets every memo's entries."""
    for memo in MEMOS:
        memo.clear()


class IdentityMemo(Generic[T, V]):
    """``memo(obj, *args)`` is ``function(obj, *args)``, computed once per live object and ``args``
    (hashable: what else the value depends on, a configuration, compared by equality). An object
    that takes no weak reference is not remembered. Thread-safe as far as it matters: two threads
    may both compute an entry, with equal results."""

    def __init__(self, function: Callable[..., V]) -> None:
        self.function = function
        self._entries: dict[tuple[int, tuple[Hashable, ...]], tuple[weakref.ref[Any], V]] = {}
        MEMOS.append(self)

    def __call__(self, obj: T, *args: Hashable) -> V:
        key = (id(obj), args)
        entry = self._entries.get(key)
        if entry is not None and entry[0]() is obj:
            return entry[1]
        value = self.function(obj, *args)
        try:
            ref = weakref.ref(obj, lambda gone, key=key: self._forget(key, gone))  # type: ignore[misc]
        except TypeError:  # (not weakly referable: computed every time)
            return value
        self._entries[key] = (ref, value)
        return value

    def _forget(self, key: tuple[int, tuple[Hashable, ...]], gone: weakref.ref[Any]) -> None:
        entry = self._entries.get(key)
        if entry is not None and entry[0] is gone:
            self._entries.pop(key, None)

    def clear(self) -> None:
        self._entries.clear()

    def __len__(self) -> int:
        return len(self._entries)
