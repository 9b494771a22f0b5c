"""Per-object memos: what a pure function of one typed object gives, computed once per object.

The typed objects (``kube.objects``: frozen dataclasses) that ``serve``'s informer store keeps are
the same objects cycle after cycle until their resource changes (a new object then), so a function
of one object that every cycle calls for every pod or node (its gang, its GPU need, its node keys)
need not run again for an object it has seen. An entry is keyed by the object's identity and holds
the object itself, so that an id is never reused while its entry lives; the memo forgets
everything once it holds ``limit`` entries (bounded memory, nothing stale: objects never change).
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import Any, Generic, TypeVar

T = TypeVar("T")
V = TypeVar("V")

DEFAULT_LIMIT = 200_000
MEMOS: list[IdentityMemo[Any, Any]] = []
"""Every memo made (tests clear them to compare a cold computation with a warm one)."""


def clear_all() -> None:
    """Forgets every memo's entries."""
    for memo in MEMOS:
        memo.clear()


class IdentityMemo(Generic[T, V]):
    """``memo(obj, *args)`` is ``function(obj, *args)``, computed once per object and ``args``
    (hashable: what else the value depends on, a configuration, compared by equality).
    Thread-safe as far as it matters: two threads may both compute an entry, with equal results."""

    def __init__(self, function: Callable[..., V], limit: int = DEFAULT_LIMIT) -> None:
        self.function, self.limit = function, limit
        self._entries: dict[tuple[int, tuple[Hashable, ...]], tuple[T, V]] = {}
        MEMOS.append(self)

    def __call__(self, obj: T, *args: Hashable) -> V:
        key = (id(obj), args)
        entry = self._entries.get(key)
        if entry is not None and entry[0] is obj:
            return entry[1]
        value = self.function(obj, *args)
        if len(self._entries) >= self.limit:
            self._entries.clear()
        self._entries[key] = (obj, value)
        return value

    def clear(self) -> None:
        self._entries.clear()

    def __len__(self) -> int:
        return len(self._entries)
