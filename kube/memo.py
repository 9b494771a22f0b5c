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
        self._entries: dict[int, _Entry] = {}
        """id of an object -> its entry (a weak reference to it holding its values)."""
        self._lock = threading.Lock()
        self._gone = self._forget  # one callback for every entry (not a closure per object)
        MEMOS.append(self)

    def __call__(self, obj: T, *args: Hashable) -> V:
        entry = self._entries.get(id(obj))
        if entry is not None and entry() is obj:
            found = entry.get(args)
            if found is not _MISSING:
                return found  # type: ignore[no-any-return]
        value = self.function(obj, *args)
        key = id(obj)
        with self._lock:
            entry = self._entries.get(key)
            if entry is None or entry() is not obj:
                try:
                    entry = self._entries[key] = _Entry(obj, self._gone, key)
                except TypeError:  # (not weakly referable: computed every time)
                    return value
            entry.put(args, value, self.variants)
        return value

    def _forget(self, gone: weakref.ref[Any]) -> None:
        key = getattr(gone, "key", None)  # (an _Entry; not isinstance: at exit the module may be gone)
        if key is not None and self._entries.get(key) is gone:
            self._entries.pop(key, None)

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()

    def __len__(self) -> int:
        """Values remembered (of every object and argument tuple)."""
        return sum(len(entry) for entry in list(self._entries.values()))


class _Entry(weakref.ref):  # type: ignore[type-arg]
    """A weak reference to an object that holds its values: the first argument tuple's inline, a
    dict (oldest first) only once there is a second one. One small object per object remembered
    (a reference, a closure, a tuple and a dict each were 0.6 KiB: 100 MiB at 100,000 pods)."""

    __slots__ = ("args", "key", "more", "value")

    def __init__(self, obj: Any, callback: Callable[[weakref.ref[Any]], None], key: int) -> None:
        super().__init__(obj, callback)  # type: ignore[call-arg]
        self.key = key
        self.args: tuple[Hashable, ...] | object = _MISSING
        self.value: Any = None
        self.more: dict[tuple[Hashable, ...], Any] | None = None

    def __new__(cls, obj: Any, callback: Callable[[weakref.ref[Any]], None], key: int) -> _Entry:
        return super().__new__(cls, obj, callback)

    def get(self, args: tuple[Hashable, ...]) -> Any:
        if self.more is not None:
            return self.more.get(args, _MISSING)
        return self.value if self.args == args else _MISSING

    def put(self, args: tuple[Hashable, ...], value: Any, variants: int) -> None:
        if self.more is None and (self.args is _MISSING or self.args == args or variants == 1):
            self.args, self.value = args, value
            return
        if self.more is None:
            self.more = {self.args: self.value}  # type: ignore[dict-item]
            self.args, self.value = _MISSING, None
        self.more.pop(args, None)
        while len(self.more) >= variants:
            del self.more[next(iter(self.more))]
        self.more[args] = value

    def __len__(self) -> int:
        return len(self.more) if self.more is not None else int(self.args is not _MISSING)


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
