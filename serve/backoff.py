"""Exponential backoff that never overflows, in the kube-scheduler's manner.

``initial`` doubled per attempt after the first, at most ``maximum``. The kube-scheduler's
``calculateBackoffDuration`` doubles by addition and stops as soon as the next doubling would pass
the maximum, so the attempt count can grow for ever; ``initial * 2.0 ** (attempts - 1)`` raises
``OverflowError`` past 1,024 attempts (a pod that never fits, retried every 10 s, gets there in
under three hours), and ``0.5 * 2 ** failures`` likewise past 1,025 failures.
"""

from __future__ import annotations

MAX_DOUBLINGS = 64
"""Doublings tried at most (a maximum this many doublings above the initial value is never met
in practice; it also bounds the loop for a zero ``initial``)."""


def doubling(attempts: int, initial: float, maximum: float) -> float:
    """Seconds of backoff after ``attempts`` failed attempts (0 for none): ``initial`` doubled
    ``attempts - 1`` times, at most ``maximum``."""
    if attempts <= 0:
        return 0.0
    duration = min(initial, maximum)
    for _ in range(min(attempts - 1, MAX_DOUBLINGS)):
        if duration > maximum - duration:  # (subtraction: the doubling itself never overflows)
            return maximum
        duration += duration
    return duration
