"""When Karpenter may disrupt a node: its durations (``consolidateAfter``, a budget's
``duration``), its budgets' cron ``schedule`` and a NodeClaim's consolidatable time, as
Karpenter reads and evaluates them (``pkg/apis/v1/nodepool.go``, ``duration.go`` and
``pkg/controllers/nodeclaim/disruption/consolidation.go``).

- A duration is Go's ``time.ParseDuration`` of text the CRD's pattern admits: a sum of
  ``<n>s|m|h`` terms, refused when it exceeds Go's ``time.Duration`` (about 292 years) as Go
  refuses it. ``consolidateAfter: Never`` disables consolidation for the NodePool.
- A schedule is read as ``cron.ParseStandard("TZ=UTC " + schedule)`` (robfig/cron v3) reads it:
  one of its macros (``@daily``...) or five fields (minute, hour, day of month, month, day of
  week 0-6), each a comma list of ``*`` or ``?``, a value or a range ``a-b``, optionally
  ``/step``; month and weekday names (``jan``, ``mon``) in any case. Day of month and day of week
  both restricted match either; when one has an item ``*`` or ``?`` (without a step over 1: ``*/2``
  is restricted) both must match. What cron
  refuses (a sixth field, ``L``, ``#``, ``7`` for Sunday, a range backwards) is refused here too,
  and so is a date that never comes (``0 0 31 2 *``), which Karpenter would count as always
  active. The schedule is evaluated by croniter on that normalised text, in UTC.
- A budget is active at ``now`` when the schedule hits in ``(now - duration, now]``
  (``Budget.IsActive``: the next hit after ``now - duration`` is not after ``now``); one without
  a schedule always is.
- A NodeClaim is consolidatable once it is initialized and ``consolidateAfter`` has passed since
  its ``status.lastPodEventTime`` (a pod bound to it or gone from it), or since it was
  initialized when no pod event was recorded: what sets its ``Consolidatable`` condition.
"""

from __future__ import annotations

import datetime
import re
from decimal import Decimal

from croniter import CroniterBadDateError, croniter

from kubeplace.kube.errors import InputError
from kubeplace.kube.objects import NodeClaim, NodePool, NodePoolBudget

NEVER = "Never"
MAX_DURATION_NS = 2**63 - 1
"""Go's ``time.Duration`` (int64 nanoseconds): ``time.ParseDuration`` refuses more."""
_UNIT_NS = {"ns": 1, "us": 1_000, "µs": 1_000, "μs": 1_000, "ms": 1_000_000, "s": 10**9, "m": 60 * 10**9,
            "h": 3600 * 10**9}
_PART = re.compile(r"([0-9]+(?:\.[0-9]*)?|\.[0-9]+)(ns|us|µs|μs|ms|s|m|h)")
MACROS = {"@yearly": "0 0 1 1 *", "@annually": "0 0 1 1 *", "@monthly": "0 0 1 * *", "@weekly": "0 0 * * 0",
          "@daily": "0 0 * * *", "@midnight": "0 0 * * *", "@hourly": "0 * * * *"}
"""robfig/cron's descriptors that the CRD's pattern admits, as the five fields it reads them as."""
_MONTHS = ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec")
_DAYS = ("sun", "mon", "tue", "wed", "thu", "fri", "sat")
_FIELDS: tuple[tuple[str, int, int, dict[str, int]], ...] = (
    ("minute", 0, 59, {}),
    ("hour", 0, 23, {}),
    ("day of month", 1, 31, {}),
    ("month", 1, 12, {name: i + 1 for i, name in enumerate(_MONTHS)}),
    ("day of week", 0, 6, {name: i for i, name in enumerate(_DAYS)}),
)
"""robfig/cron's bounds and names of the five fields (``ParseStandard``)."""
_ITEM = re.compile(r"(?P<low>[*?]|[0-9]+|[A-Za-z]+)(?:-(?P<high>[0-9]+|[A-Za-z]+))?(?:/(?P<step>[0-9]+))?")
_LEAP_YEAR = datetime.datetime(2000, 1, 1, tzinfo=datetime.UTC)
"""Where a schedule is tried from to tell one that never matches (``0 0 31 2 *``)."""
CRON_YEARS = 5
"""robfig/cron's ``Next`` gives up (returns the zero time, which ``IsActive`` counts as active)
past five years after the time it starts from."""


def go_duration_ns(text: str) -> int | None:
    """A Go ``time.ParseDuration`` text (unsigned) in nanoseconds; None when it is not one, or
    when it exceeds Go's ``time.Duration`` (Go refuses it)."""
    if not text:
        return None
    total, at = Decimal(0), 0
    while at < len(text):
        part = _PART.match(text, at)
        if part is None:
            return None
        total += Decimal(part.group(1)) * _UNIT_NS[part.group(2)]
        at = part.end()
    return int(total) if total <= MAX_DURATION_NS else None


def duration_seconds(text: str) -> int:
    """Seconds of a duration the CRD's pattern admits (``1h30m``, ``90s``, ``10m0s``), as Go's
    ``time.ParseDuration`` sums it; InputError (field added by the caller) beyond Go's limit."""
    ns = go_duration_ns(text)
    if ns is None:
        raise InputError(f'invalid duration "{text}": longer than Go\'s time.Duration holds',
                         expected="at most 2562047h47m16s")
    return ns // 10**9


def consolidate_after_seconds(pool: NodePool) -> int | None:
    """The NodePool's ``consolidateAfter`` in seconds; None for ``Never`` (no consolidation)."""
    return None if pool.consolidate_after == NEVER else duration_seconds(pool.consolidate_after)


def cron_schedule(text: str) -> tuple[str, bool]:
    """The schedule as croniter reads it the way robfig/cron reads it (numbers only, every range
    explicit) and whether day of month and day of week are or-ed; InputError saying what cron
    refuses (field added by the caller)."""
    spec = text.strip()
    if spec.startswith("@"):
        if spec not in MACROS:
            raise InputError(f'unrecognized descriptor: "{spec}"', expected=_EXPECTED_CRON)
        spec = MACROS[spec]
    fields = spec.split()
    if len(fields) != len(_FIELDS):
        raise InputError(f"expected exactly 5 fields, found {len(fields)}: {text!r}", expected=_EXPECTED_CRON)
    parts, starred, every = [], [], []
    for raw, (name, low, high, names) in zip(fields, _FIELDS, strict=True):
        items = [_cron_item(item, name, low, high, names) for item in raw.split(",")]
        parts.append(",".join(item for item, _, _ in items))
        starred.append(any(star for _, star, _ in items))
        every.append(set().union(*(values for _, _, values in items)) == set(range(low, high + 1)))
    day_or = not (starred[2] or starred[4])
    if day_or and (every[2] or every[4]):  # or-ed with every day is every day; croniter would read
        parts[2] = parts[4] = "*"          # a whole range as '*' and then the other field alone
    expression = " ".join(parts)
    try:
        croniter(expression, _LEAP_YEAR, day_or=day_or).get_next(datetime.datetime)
    except CroniterBadDateError:
        raise InputError(f"{text!r} never matches a date", expected=_EXPECTED_CRON) from None
    return expression, day_or


_EXPECTED_CRON = "five cron fields (minute hour day-of-month month day-of-week 0-6) or @yearly, @monthly, " \
                 "@weekly, @daily, @midnight, @hourly"


def _cron_item(item: str, name: str, low: int, high: int, names: dict[str, int]) -> tuple[str, bool, set[int]]:
    """One comma item of a field in numbers (``*``, ``*/s``, ``a``, ``a-b``, ``a-b/s``), whether
    it is a star as robfig/cron's day rule sees one (``*`` or ``?`` with no step over 1), and the
    values it matches."""
    match = _ITEM.fullmatch(item)
    if match is None:
        raise InputError(f"invalid {name} {item!r}", expected=_EXPECTED_CRON)
    star = match["low"] in ("*", "?")
    start = low if star else _cron_value(match["low"], name, names)
    end = high if star or (match["high"] is None and match["step"] is not None) else start
    if match["high"] is not None:
        if star:
            raise InputError(f"invalid {name} {item!r}", expected=_EXPECTED_CRON)
        end = _cron_value(match["high"], name, names)
    step = 1 if match["step"] is None else int(match["step"])
    if start < low or end > high:
        raise InputError(f"{name} {item!r} is out of range {low}-{high}", expected=_EXPECTED_CRON)
    if start > end:
        raise InputError(f"{name} {item!r}: beginning of range ({start}) beyond end of range ({end})",
                         expected=_EXPECTED_CRON)
    if step == 0:
        raise InputError(f"{name} {item!r}: step of range should be a positive number", expected=_EXPECTED_CRON)
    values = set(range(start, end + 1, step))
    if star:  # robfig/cron counts only a whole-range star (no step over 1) as one for the day rule
        return ("*", True, values) if step == 1 else (f"*/{step}", False, values)
    if start == end:
        return str(start), False, values
    return (f"{start}-{end}" if step == 1 else f"{start}-{end}/{step}"), False, values


def _cron_value(text: str, name: str, names: dict[str, int]) -> int:
    if text.isdigit():
        return int(text)
    if text.lower() in names:
        return names[text.lower()]
    raise InputError(f"invalid {name} {text!r}", expected=_EXPECTED_CRON)


def budget_active(budget: NodePoolBudget, now: datetime.datetime) -> bool:
    """``Budget.IsActive`` at ``now``: no schedule, or a hit of it in ``(now - duration, now]``."""
    if not budget.schedule:
        return True
    expression, day_or = cron_schedule(budget.schedule)
    now = now.astimezone(datetime.UTC)
    checkpoint = now - datetime.timedelta(seconds=duration_seconds(budget.duration))
    try:
        hit: datetime.datetime = croniter(expression, checkpoint, day_or=day_or).get_next(datetime.datetime)
    except CroniterBadDateError:
        return True
    if hit.year > checkpoint.year + CRON_YEARS:
        return True
    return hit <= now


def not_consolidatable(pool: NodePool, claim: NodeClaim, now: datetime.datetime) -> str:
    """Why Karpenter would not consolidate a node of ``pool`` launched as ``claim`` at ``now``
    (its NodeClaim not ``Consolidatable``), or "". Only a node a NodeClaim owns is judged: one
    without is no Karpenter node to disrupt at all (Karpenter's, and kubeplace's, consolidation
    leave it alone)."""
    after = consolidate_after_seconds(pool)
    if after is None:
        return f"NodePool {pool.name} never consolidates (consolidateAfter Never)"
    if claim.initialized_at is None:
        return f"NodeClaim {claim.name} is not initialized"
    since = claim.last_pod_event if claim.last_pod_event is not None else claim.initialized_at
    left = since + after - now.timestamp()
    if left > 0:
        what = "its last pod event" if claim.last_pod_event is not None else "it was initialized"
        return (f"not consolidatable for another {left:.0f}s: NodePool {pool.name} consolidateAfter "
                f"{pool.consolidate_after} since {what}")
    return ""
