"""Resident memory of a long-running ``kubeplace serve`` on glibc.

Python's own allocator keeps small objects; everything larger (numpy arrays of a cycle, JSON of
the watch) comes from glibc's malloc, which gives each thread that allocates its own *arena*
(up to 8 per core) and keeps what is freed in them for reuse. With a binding pool of dozens of
threads and a cycle that builds and drops arrays of the whole cluster, the process's resident
memory then creeps up for a long time although nothing is kept (a 10-minute churn run grew by
75 MiB). So ``serve`` limits the arenas (:func:`limit_arenas`, at start, before its threads)
and hands freed memory back to the kernel between cycles (:class:`Trimmer`, at most once per
``every`` seconds; ``malloc_trim`` also returns free pages inside the heap). Elsewhere (no
glibc) both do nothing.

Python's cyclic garbage collector scans, in a full collection, every container object alive: at
2,000 nodes and 2,500 pods the store's and the memos' objects make one take 0.2-0.4 s, and it
starts on its own in the middle of whichever cycle allocates past its threshold (once every 20
cycles or so): a gang's wait. So :class:`Collector` collects the young generations between
cycles and freezes what survives (``gc.freeze``: never scanned again by the automatic
collections; freed as usual when its last reference goes), and every ``every`` seconds, between
cycles, unfreezes and collects it all once, so that cyclic garbage among what was frozen is
freed too.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import gc
import logging
import time
from collections.abc import Callable
from typing import Any

from kubeplace.plan import gc_pause

log = logging.getLogger("kubeplace.serve.memory")
M_ARENA_MAX = -8
"""glibc's mallopt parameter number of the arena limit."""
ARENAS = 2


def _libc() -> Any | None:
    name = ctypes.util.find_library("c")
    if name is None:
        return None
    try:
        libc = ctypes.CDLL(name)
    except OSError:
        return None
    return libc if hasattr(libc, "malloc_trim") and hasattr(libc, "mallopt") else None


def limit_arenas(arenas: int = ARENAS) -> bool:
    """At most ``arenas`` malloc arenas for the whole process; False where that is not glibc's."""
    libc = _libc()
    return bool(libc is not None and libc.mallopt(M_ARENA_MAX, arenas) == 1)


class Trimmer:
    """``maybe()`` returns freed malloc memory to the kernel, at most once per ``every`` seconds."""

    def __init__(self, every: float = 30.0, clock: Callable[[], float] = time.monotonic,
                 trim: Callable[[], object] | None = None) -> None:
        self.every, self.clock = every, clock
        libc = _libc() if trim is None else None
        self._trim = trim if trim is not None else (lambda: libc.malloc_trim(0)) if libc is not None else None
        self._last = clock()
        self.trims = 0

    def maybe(self) -> None:
        if self._trim is None or self.clock() - self._last < self.every:
            return
        self._last = self.clock()
        self._trim()
        self.trims += 1


class Collector:
    """``between_cycles()``: the young generations collected and what survives frozen; a full
    collection of everything at most once per ``every`` seconds (see the module's docstring)."""

    def __init__(self, every: float = 300.0, clock: Callable[[], float] = time.monotonic) -> None:
        self.every, self.clock = every, clock
        self._last = clock()
        self.full = 0

    def between_cycles(self) -> None:
        if self.clock() - self._last >= self.every:
            self._last = self.clock()
            gc_pause.unfreeze()
            gc.collect()
            self.full += 1
        else:
            gc.collect(1)
        gc_pause.freeze()  # (through plan.gc_pause: its plans then leave the survivors frozen)

    def close(self) -> None:
        """Hands what was frozen back to the automatic collections."""
        gc_pause.unfreeze()
