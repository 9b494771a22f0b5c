"""One shape for time: a :class:`Budget` is a deadline on a clock.

Every solver phase (greedy, LNS, the CP-SAT/MILP calls, the LP bound, column generation,
pricing, cutting stock, provisioning, consolidation, rebalance, serve's cycle) takes a Budget
and hands its sub-phases a part of it: ``split(share)`` of what is left now, ``part(share)`` of
the whole from now, ``first(share)`` of the whole from its start; ``within`` caps, ``at_least``
floors. The shares are named in ``solver.shares``. A backend or a library is handed seconds at
the last moment: ``left()``.

With one worker the budget is counted, not read from the wall clock (:class:`CountedClock`):
the clock moves only by the time handed out to backend calls and ruin-and-recreate rounds, so
the number of rounds and every answer are the same from run to run.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass

Clock = Callable[[], float]


class CountedClock:
    """A clock that moves only when time is ``charge``-d: the counted budget of a deterministic solve."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now

    def charge(self, seconds: float) -> None:
        self.now += seconds


@dataclass(frozen=True)
class Budget:
    """``seconds`` from ``start`` on ``clock`` (``time.monotonic`` unless counted). The seconds are
    kept as given, not as a deadline, so that a counted budget's parts are exact from run to run."""

    start: float
    seconds: float
    clock: Clock = time.monotonic

    @classmethod
    def of(cls, seconds: float, clock: Clock = time.monotonic) -> Budget:
        """``seconds`` from now (``math.inf``: no limit)."""
        return cls(clock(), seconds, clock)

    @property
    def deadline(self) -> float:
        return self.start + self.seconds

    @property
    def total(self) -> float:
        """The seconds this budget was given (not what is left)."""
        return self.seconds

    @property
    def counted(self) -> bool:
        """On a :class:`CountedClock`: only what is ``charge``-d counts."""
        return isinstance(self.clock, CountedClock)

    def left(self) -> float:
        """Seconds left, never negative."""
        return max(0.0, self.seconds - (self.clock() - self.start))

    def expired(self) -> bool:
        """No time left (a budget split from a spent one is expired at once)."""
        return self.clock() - self.start >= self.seconds

    def split(self, share: float) -> Budget:
        """A phase's budget: ``share`` of the time left now."""
        return Budget(self.clock(), share * self.left(), self.clock)

    def part(self, share: float) -> Budget:
        """``share`` of this whole budget, from now: a phase sized by the limit, not by what is left."""
        return Budget(self.clock(), share * self.seconds, self.clock)

    def first(self, share: float) -> Budget:
        """The first ``share`` of this whole budget, counted from its start (whatever is already
        spent): a phase that must end by a fixed point of the parent's time."""
        return Budget(self.start, share * self.seconds, self.clock)

    def within(self, seconds: float) -> Budget:
        """At most ``seconds`` from now, and never past this budget's deadline."""
        return Budget(self.clock(), min(seconds, self.left()), self.clock)

    def at_least(self, seconds: float) -> Budget:
        """At least ``seconds`` from now, even past this budget's deadline: a call that must get
        some time to answer at all (each floor is named, with its reason, in ``solver.shares``)."""
        return Budget(self.clock(), max(seconds, self.left()), self.clock)

    def shortened(self, seconds: float) -> Budget:
        """This budget ending ``seconds`` earlier: its end kept for a phase after it."""
        return Budget(self.start, self.seconds - seconds, self.clock)

    def from_now(self) -> Budget:
        """This budget's seconds again, from now: a call whose preparation (building its model)
        is not charged to it."""
        return Budget(self.clock(), self.seconds, self.clock)

    def charge(self, seconds: float) -> None:
        """Counts ``seconds`` handed out when the clock is counted (a wall clock counts itself)."""
        if isinstance(self.clock, CountedClock):
            self.clock.charge(seconds)

    def spend(self, seconds: float) -> Budget:
        """A call's budget of ``seconds`` from now, charged to this one first when counted (a
        counted clock does not move while the call runs, so the call's own budget starts after
        the charge: it has all its ``seconds``)."""
        self.charge(seconds)
        return Budget(self.clock(), seconds, self.clock)


NO_DEADLINE = Budget(0.0, math.inf)
"""No deadline (tests, and phases with nothing to stop)."""
