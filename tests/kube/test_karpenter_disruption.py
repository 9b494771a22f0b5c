"""Karpenter's disruption timing: durations, budget schedules evaluated at an injected now
(``Budget.IsActive``), and when a NodeClaim is consolidatable."""

from __future__ import annotations

import datetime
from typing import Any

import pytest

from kubeplace.kube.errors import InputError
from kubeplace.kube.karpenter_disruption import (
    budget_active,
    consolidate_after_seconds,
    cron_schedule,
    duration_seconds,
    not_consolidatable,
)
from kubeplace.kube.objects import NodeClaim, NodePool, NodePoolBudget

UTC = datetime.UTC


def at(text: str) -> datetime.datetime:
    return datetime.datetime.fromisoformat(text).replace(tzinfo=UTC)


@pytest.mark.parametrize(("text", "seconds"), [("0s", 0), ("30s", 30), ("1h30m", 5400), ("10m0s", 600),
                                               ("1h1h", 7200), ("2562047h", 2562047 * 3600)])
def test_durations_as_go_sums_them(text: str, seconds: int) -> None:
    assert duration_seconds(text) == seconds


def test_a_duration_go_cannot_hold_is_refused() -> None:
    with pytest.raises(InputError, match=r"longer than Go.s time\.Duration"):
        duration_seconds("2562048h")


def test_never_disables_consolidation() -> None:
    assert consolidate_after_seconds(NodePool("p", consolidate_after="Never")) is None
    assert consolidate_after_seconds(NodePool("p", consolidate_after="1m30s")) == 90


# 9:00 UTC on weekdays for 8 hours; 2024-01-01 is a Monday
WEEKDAYS = NodePoolBudget("0", (), "0 9 * * mon-fri", "8h")


@pytest.mark.parametrize(("now", "active"), [
    ("2024-01-01T08:59:59", False),  # before the hit
    ("2024-01-01T09:00:00", True),   # the hit itself: Next(now - 8h) is not after now
    ("2024-01-01T16:59:59", True),
    ("2024-01-01T17:00:00", False),  # exactly the duration after: the window is (now - duration, now]
    ("2024-01-06T12:00:00", False),  # Saturday
    ("2024-01-08T10:00:00", True),   # Monday again
])
def test_a_scheduled_budget_is_active_within_duration_after_each_hit(now: str, active: bool) -> None:
    assert budget_active(WEEKDAYS, at(now)) is active


def test_the_schedule_is_read_in_utc() -> None:
    tokyo = datetime.timezone(datetime.timedelta(hours=9))
    # 18:00 in Tokyo is 09:00 UTC: active; 09:00 in Tokyo is 00:00 UTC: not
    assert budget_active(WEEKDAYS, datetime.datetime(2024, 1, 1, 18, 0, tzinfo=tokyo))
    assert not budget_active(WEEKDAYS, datetime.datetime(2024, 1, 1, 9, 0, tzinfo=tokyo))


def test_macros_and_budgets_without_a_schedule() -> None:
    daily = NodePoolBudget("0", (), "@daily", "1h")
    assert budget_active(daily, at("2024-03-05T00:30:00"))
    assert not budget_active(daily, at("2024-03-05T01:30:00"))
    assert budget_active(NodePoolBudget("0"), at("2024-03-05T01:30:00"))


def test_day_of_month_and_day_of_week_as_cron_combines_them() -> None:
    # both restricted: either matches (the 13th, or any Friday)
    either = NodePoolBudget("0", (), "0 0 13 * fri", "1h")
    assert budget_active(either, at("2024-02-13T00:10:00"))  # a Tuesday the 13th
    assert budget_active(either, at("2024-02-02T00:10:00"))  # a Friday the 2nd
    # one of them '*' or '?': both must match (any day of month that is a Friday)
    both = NodePoolBudget("0", (), "0 0 ? * fri", "1h")
    assert not budget_active(both, at("2024-02-13T00:10:00")) and budget_active(both, at("2024-02-02T00:10:00"))
    # '*/2' is a step, not a star, for robfig/cron: either matches (odd days, or any Monday)
    stepped = NodePoolBudget("0", (), "0 0 */2 * mon", "1h")
    assert budget_active(stepped, at("2024-01-08T00:10:00"))  # Monday the 8th
    assert budget_active(stepped, at("2024-01-09T00:10:00"))  # Tuesday the 9th
    assert not budget_active(stepped, at("2024-01-10T00:10:00"))  # Wednesday the 10th
    # or-ed with a day of week that covers the week: every day
    assert budget_active(NodePoolBudget("0", (), "0 0 */6 * sun-sat", "1h"), at("2024-01-10T00:10:00"))


def test_robfig_crons_five_year_search_is_kept() -> None:
    """Its Next gives up five years after the time it starts from and returns the zero time,
    which IsActive counts as active: from 2097 the next 29 February is in 2104 (2100 is no leap year)."""
    leap = NodePoolBudget("0", (), "0 0 29 2 *", "1h")
    assert budget_active(leap, at("2097-03-01T00:00:00"))
    assert not budget_active(leap, at("2099-03-01T00:00:00"))


@pytest.mark.parametrize(("schedule", "expression"), [
    ("@weekly", "0 0 * * 0"), ("5/10 * 1,15 jan-MAR ?", "5-59/10 * 1,15 1-3 *"), ("3-3/2 * * * SUN", "3 * * * 0"),
])
def test_schedules_read_as_robfig_cron_reads_them(schedule: str, expression: str) -> None:
    assert cron_schedule(schedule)[0] == expression


@pytest.mark.parametrize(("schedule", "words"), [
    ("0 0 * * 7", "out of range 0-6"), ("0 0 L * *", "invalid day of month"), ("0 0 * * 1#2", "invalid day of week"),
    ("0 0 * * * *", "exactly 5 fields"), ("@reboot", "unrecognized descriptor"), ("0 0 31 2 *", "never matches"),
    ("*/0 * * * *", "positive"), ("*-5 * * * *", "invalid minute"), ("0 0 * jan-foo *", "invalid month"),
    ("TZ=Asia/Tokyo 0 9 * *", "invalid minute"), ("1,,2 * * * *", "invalid minute"),
])
def test_what_cron_refuses_is_refused(schedule: str, words: str) -> None:
    with pytest.raises(InputError, match=words):
        cron_schedule(schedule)


POOL = NodePool("p", consolidate_after="5m")


def claim(initialized: str | None = "2024-01-01T00:00:00", last_pod_event: str | None = None) -> NodeClaim:
    return NodeClaim("c", "p", initialized_at=at(initialized).timestamp() if initialized else None,
                     last_pod_event=at(last_pod_event).timestamp() if last_pod_event else None)


def test_consolidatable_after_consolidate_after_since_the_last_pod_event() -> None:
    assert not_consolidatable(POOL, claim(), at("2024-01-01T00:05:00")) == ""
    assert "another 60s" in not_consolidatable(POOL, claim(), at("2024-01-01T00:04:00"))
    late = claim(last_pod_event="2024-01-01T00:10:00")
    assert "since its last pod event" in not_consolidatable(POOL, late, at("2024-01-01T00:14:59"))
    assert not_consolidatable(POOL, late, at("2024-01-01T00:15:00")) == ""
    assert "not initialized" in not_consolidatable(POOL, claim(None), at("2024-02-01T00:00:00"))
    assert "consolidateAfter Never" in not_consolidatable(NodePool("p", consolidate_after="Never"), claim(),
                                                          at("2030-01-01T00:00:00"))


def test_a_node_claims_timing_is_read_from_its_status() -> None:
    from kubeplace.kube.karpenter import parse_node_claim

    def parsed(status: dict[str, Any]) -> NodeClaim:
        return parse_node_claim({"metadata": {"name": "c"}, "spec": {}, "status": status})

    read = parsed({"conditions": [{"type": "Launched", "status": "True", "lastTransitionTime": "2024-01-01T00:00:00Z"},
                                  {"type": "Initialized", "status": "True",
                                   "lastTransitionTime": "2024-01-01T00:01:00Z"}],
                   "lastPodEventTime": "2024-01-01T00:02:00.5Z"})
    assert read.initialized_at == at("2024-01-01T00:01:00").timestamp()
    assert read.last_pod_event == at("2024-01-01T00:02:00.5").timestamp()
    waiting = parsed({"conditions": [{"type": "Initialized", "status": "Unknown"}], "lastPodEventTime": ""})
    assert (waiting.initialized_at, waiting.last_pod_event) == (None, None)
    with pytest.raises(InputError) as caught:
        parsed({"conditions": [{"type": "Initialized", "status": "True", "lastTransitionTime": "yesterday"}]})
    assert caught.value.field == "status.conditions[0].lastTransitionTime"
    with pytest.raises(InputError) as caught:
        parsed({"lastPodEventTime": "2024-01-01T00:02:00"})
    assert caught.value.field == "status.lastPodEventTime" and "no time zone" in caught.value.problem
