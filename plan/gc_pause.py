"""Fewer garbage collections while a plan is made.

A plan of 100,000 pods allocates millions of small objects (per-pod keys, tuples, placements) and
keeps most of them until it is returned; CPython's collector, run every 700 allocations, then
walks the whole heap over and over: at 20,000 nodes x 100,000 pods it took 8.3 of the plan's 38 CPU
seconds. While a plan is made, what existed before it (the snapshot, the caches) is frozen out of
the collector's walks (``gc.freeze``) and the youngest generation is collected every
YOUNG_THRESHOLD allocations; cycles are still collected, and both are put back when it ends.
Where something else already froze objects (``serve.memory.Collector``, between serve's cycles,
through :func:`freeze`), the freezing is left to it: unfreezing at the plan's end would undo its
work. Whether it did is kept here, not asked of the collector: ``gc.get_freeze_count()`` walks
every frozen object (33 ns each: 30-60 ms per call with serve's store of 2,000 nodes frozen,
two or three calls per cycle, each a lone gang's wait).
"""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from contextlib import contextmanager

YOUNG_THRESHOLD = 50_000
OLDER_THRESHOLD = 20
"""Collections of a generation between two of the next one (CPython's default is 10)."""

_lock = threading.Lock()
_depth = [0]
_froze = [False]
_held = [False]
"""Whether objects were frozen through :func:`freeze` (and not unfrozen since)."""


def freeze() -> None:
    """``gc.freeze()``, remembered: the plans made until :func:`unfreeze` leave those objects frozen."""
    with _lock:
        gc.freeze()
        _held[0] = True


def unfreeze() -> None:
    """``gc.unfreeze()``, remembered (see :func:`freeze`)."""
    with _lock:
        gc.unfreeze()
        _held[0] = False


@contextmanager
def fewer_collections() -> Iterator[None]:
    """While open (nested: the outermost one counts), the collector runs as the module says."""
    with _lock:
        _depth[0] += 1
        outermost = _depth[0] == 1
        before = gc.get_threshold()
        if outermost:
            _froze[0] = not _held[0]
            if _froze[0]:
                gc.freeze()
            gc.set_threshold(max(before[0], YOUNG_THRESHOLD), max(before[1], OLDER_THRESHOLD),
                             max(before[2], OLDER_THRESHOLD))
    try:
        yield
    finally:
        with _lock:
            _depth[0] -= 1
            if outermost:
                gc.set_threshold(*before)
                if _froze[0]:
                    gc.unfreeze()
