"""The decision log of ``kubeplace serve``: one JSON line when a pod's (or gang's) decision
changes, a count for the repeats.

A pod retried every few seconds for the same reason would otherwise write the same line every
time (142,440 lines for 3,000 pods in two minutes in one run). A decision is logged when its
outcome, node or reason differs from the last one logged for the same pod or gang; a repeat is
counted, and each cycle's summary line says how many repeats it did not write.
"""

from __future__ import annotations

import logging
import threading
from typing import Any

from kubeplace.kube.objects import GangKey

log = logging.getLogger("kubeplace.serve")
MEMORY = 100_000
"""Pods and gangs whose last decision is remembered; beyond it the oldest half is forgotten
(a forgotten one is logged again at its next decision)."""
FINAL = ("bound", "preempted")
"""Outcomes after which a pod has no further decision: it is forgotten at once (a victim is
deleted: the watch's DELETED, which forgets a pod, may come before its decision is logged)."""


class DecisionLog:
    def __init__(self, memory: int = MEMORY) -> None:
        self.memory = memory
        self.repeats = 0
        """Decisions not written since :meth:`take_repeats` was last called."""
        self._last: dict[str, tuple[str, str, str]] = {}
        self._lock = threading.Lock()

    def __call__(self, **fields: Any) -> None:
        """Logs the decision (fields: pod or gang, node, outcome, why...) unless it repeats the
        last one of its pod or gang (then it is counted in :attr:`repeats`)."""
        subject = str(fields.get("pod") or fields.get("gang") or "")
        what = (str(fields.get("outcome", "")), str(fields.get("node", "")), str(fields.get("why", "")))
        with self._lock:
            if subject and self._last.get(subject) == what:
                self.repeats += 1
                return
            if what[0] in FINAL:
                self._last.pop(subject, None)
            elif subject:
                self._last[subject] = what
                if len(self._last) > self.memory:
                    for old in list(self._last)[: self.memory // 2]:
                        del self._last[old]
        decision(**fields)

    def forget(self, subject: str) -> None:
        """The pod or gang is gone (deleted, bound): its next decision, if any, is new."""
        with self._lock:
            self._last.pop(subject, None)

    def take_repeats(self) -> int:
        with self._lock:
            repeats, self.repeats = self.repeats, 0
            return repeats

    def remembered(self) -> int:
        with self._lock:
            return len(self._last)


def decision(**fields: Any) -> None:
    """One structured log line per decision (``cli.serve`` prints them as JSON)."""
    log.info("decision", extra={"fields": {k: str(v) if isinstance(v, GangKey) else v
                                           for k, v in fields.items() if v not in (None, "")}})
