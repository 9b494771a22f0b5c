"""The scheduling queue: batching by window and size, backoff, unschedulable units retried on the
events that may help them (the kube-scheduler's QueueingHints) and after five minutes."""

from __future__ import annotations

import threading
import time

import pytest

from kubeplace.kube.objects import GangKey
from kubeplace.serve import hints
from kubeplace.serve.backoff import doubling
from kubeplace.serve.hints import CAPACITY, INTER_POD, ClusterEvent
from kubeplace.serve.queue import MAX_IN_UNSCHEDULABLE, SchedulingQueue
from tests.serve.fakes import Clock

GANG = GangKey("ns", "g")


def test_a_batch_closes_when_its_window_has_passed() -> None:
    queue = SchedulingQueue()
    queue.add("ns/a")
    started = time.monotonic()
    threading.Timer(0.05, queue.add, ["ns/b"]).start()
    assert queue.pop_batch(window=0.3, size=100) == ["ns/a", "ns/b"]
    assert 0.25 <= time.monotonic() - started < 2


def test_a_batch_closes_early_at_its_size_oldest_first() -> None:
    queue = SchedulingQueue()
    for unit in ("ns/a", "ns/b", "ns/c"):
        queue.add(unit)
    started = time.monotonic()
    assert queue.pop_batch(window=30, size=2) == ["ns/a", "ns/b"]
    assert time.monotonic() - started < 1
    assert queue.counts() == (1, 0)


def test_adding_a_unit_twice_keeps_one_entry() -> None:
    queue = SchedulingQueue()
    queue.add(GANG)
    queue.add(GANG)
    assert queue.pop_batch(window=0, size=10) == [GANG]


def test_nothing_to_do_returns_empty_after_the_timeout_or_when_stopped() -> None:
    queue = SchedulingQueue()
    assert queue.pop_batch(window=0, size=10, timeout=0.05) == []
    stop = threading.Event()
    stop.set()
    queue.add("ns/a")
    assert queue.pop_batch(window=10, size=10, stop=stop) == []


def test_backoff_doubles_per_attempt_up_to_the_maximum() -> None:
    clock = Clock()
    queue = SchedulingQueue(initial=1, maximum=10, clock=clock)
    backoffs = []
    for _ in range(6):
        queue.add("ns/a")
        assert queue.pop_batch(window=0, size=10, timeout=0) == ["ns/a"]
        backoffs.append(queue.unschedulable("ns/a", "Insufficient cpu"))
        clock.advance(backoffs[-1])
    assert backoffs == [1, 2, 4, 8, 10, 10]


def test_an_unschedulable_unit_comes_back_when_its_backoff_is_over() -> None:
    clock = Clock()
    queue = SchedulingQueue(initial=2, clock=clock)
    queue.add("ns/a")
    queue.pop_batch(window=0, size=10, timeout=0)
    queue.unschedulable("ns/a")
    queue.add("ns/a")  # seen again (a status update): still backing off
    assert queue.pop_batch(window=0, size=10, timeout=0) == []
    assert queue.backoff_of("ns/a") == 2
    clock.advance(2)
    assert queue.pop_batch(window=0, size=10, timeout=0) == ["ns/a"]


def test_a_cluster_change_retries_every_unschedulable_unit_once_its_backoff_is_over() -> None:
    """A wildcard event moves every unschedulable unit: to the active queue when its backoff is
    over, else to the backoff queue until it is (the kube-scheduler's queueAfterBackoff), while
    other units keep the queue busy."""
    clock = Clock()
    queue = SchedulingQueue(initial=60, maximum=60, clock=clock)
    for unit in ("ns/a", GANG):
        queue.add(unit)
    queue.pop_batch(window=0, size=10, timeout=0)
    queue.unschedulable("ns/a", hints=CAPACITY)
    queue.unschedulable(GANG, hints=CAPACITY)
    assert queue.counts() == (0, 2) and queue.pending() == {"active": 0, "backoff": 0, "unschedulable": 2}
    assert queue.cluster_changed() == 2
    assert queue.pending() == {"active": 0, "backoff": 2, "unschedulable": 0}
    queue.add("ns/busy")
    assert queue.pop_batch(window=0, size=10, timeout=0) == ["ns/busy"]
    queue.add("ns/busy-too")
    clock.advance(60)
    assert set(queue.pop_batch(window=0, size=10, timeout=0)) == {GANG, "ns/a", "ns/busy-too"}


def test_an_idle_queue_plans_a_unit_backing_off_after_an_event_at_once() -> None:
    """No unit active: a unit an event moved to the backoff queue is planned before its backoff is
    over, the soonest backoff first (the kube-scheduler's SchedulerPopFromBackoffQ): a gang that
    waits for room does not sit out its backoff, up to 10 s, while a departure freed it and the
    next arrival takes it. Not a unit backing off after a failure the cycle did not understand
    (its podErrorBackoffQ), nor a gang still waiting for its members."""
    clock = Clock()
    queue = SchedulingQueue(initial=8, maximum=8, clock=clock)
    for unit in ("ns/a", GANG, "ns/error"):
        queue.add(unit)
    queue.add(GangKey("ns", "waiting"), complete=False)
    queue.pop_batch(window=0, size=10, timeout=0)
    queue.unschedulable(GANG, hints=CAPACITY)
    clock.advance(1)
    queue.unschedulable("ns/a", hints=CAPACITY)
    queue.unschedulable(GangKey("ns", "waiting"), hints=CAPACITY)
    queue.unschedulable("ns/error", "cycle failed")  # (no hints: backs off by itself)
    assert queue.pending() == {"active": 0, "backoff": 1, "unschedulable": 3}
    assert queue.next_due(window=1, size=10, quiet=0.2, per_unit=0.001) == clock() + 8  # ns/error's backoff
    queue.add(GangKey("ns", "members"), complete=False)  # active, waiting for its members: still idle
    assert queue.move(hints.ASSIGNED_POD_DELETE) == 3
    assert queue.next_due(window=1, size=10, quiet=0.2, per_unit=0.001) == clock()
    assert queue.pop_batch(window=1, size=10, timeout=0, quiet=0.2, per_unit=0.001) == [GANG, "ns/a"]
    assert queue.moved[("active", "PopFromBackoffQ")] == 2
    assert queue.pending() == {"active": 1, "backoff": 2, "unschedulable": 0}
    assert queue.pop_batch(window=1, size=10, timeout=0, quiet=0.2, per_unit=0.001) == []
    clock.advance(8)  # their backoffs over (and "members" has waited the window for its members)
    assert queue.pop_batch(window=1, size=10, timeout=0, quiet=0.2, per_unit=0.001) == [
        GangKey("ns", "members"), "ns/error"]


def unschedulable_after_backoff(queue: SchedulingQueue, clock: Clock, unit: str,
                                hints: frozenset[ClusterEvent] = CAPACITY) -> None:
    """``unit`` tried, unschedulable with ``hints``, and its backoff over."""
    queue.add(unit)
    assert queue.pop_batch(window=0, size=10, timeout=0) == [unit]
    backoff = queue.unschedulable(unit, "0/1 nodes are available: 1 Insufficient cpu.", hints)
    clock.advance(backoff)


def test_an_unschedulable_unit_is_not_retried_by_the_timer_nor_an_unrelated_event() -> None:
    clock = Clock()
    queue = SchedulingQueue(initial=1, maximum=10, clock=clock)
    unschedulable_after_backoff(queue, clock, "ns/a")
    for _ in range(29):  # 290 s: far past its backoff, before the flush
        clock.advance(10)
        assert queue.pop_batch(window=0, size=10, timeout=0) == []
    assert queue.move(hints.ASSIGNED_POD_ADD) == 0  # a pod placed helps a pod that lacks room nowhere
    assert queue.move(hints.NODE_DELETE) == 0
    assert queue.pop_batch(window=0, size=10, timeout=0) == [] and queue.is_unschedulable("ns/a")
    assert queue.next_due(window=0, size=10) == 1320.0  # the first flush (every 30 s) 5 minutes after its attempt


@pytest.mark.parametrize("event", [hints.NODE_ADD, hints.ASSIGNED_POD_DELETE, hints.ASSIGNED_POD_SCALE_DOWN,
                                   hints.NODE_ALLOCATABLE, hints.NODE_LABEL, hints.NODE_TAINT])
def test_an_event_that_may_make_room_retries_an_unschedulable_unit(event: ClusterEvent) -> None:
    clock = Clock()
    queue = SchedulingQueue(clock=clock)
    unschedulable_after_backoff(queue, clock, "ns/a")
    assert queue.move(event) == 1
    assert queue.pop_batch(window=0, size=10, timeout=0) == ["ns/a"]
    assert queue.moved[("active", event.label())] == 1


def test_a_pod_placed_retries_only_the_units_that_wait_for_one() -> None:
    clock = Clock()
    queue = SchedulingQueue(clock=clock)
    unschedulable_after_backoff(queue, clock, "ns/plain")
    unschedulable_after_backoff(queue, clock, "ns/affine", CAPACITY | INTER_POD)
    assert queue.move(hints.ASSIGNED_POD_ADD) == 1
    assert queue.pop_batch(window=0, size=10, timeout=0) == ["ns/affine"]
    assert queue.is_unschedulable("ns/plain")


def test_its_own_update_retries_an_unschedulable_unit() -> None:
    clock = Clock()
    queue = SchedulingQueue(clock=clock)
    unschedulable_after_backoff(queue, clock, "ns/a", frozenset())
    queue.add("ns/a")  # seen again (a status update): nothing new for it
    assert queue.pop_batch(window=0, size=10, timeout=0) == []
    queue.updated("ns/a")  # its spec changed (smaller requests, a toleration...)
    assert queue.pop_batch(window=0, size=10, timeout=0) == ["ns/a"]


def test_an_unschedulable_unit_is_retried_after_five_minutes_without_any_event() -> None:
    """The safety net: podMaxInUnschedulablePodsDuration (5 minutes) from its last attempt, at the
    next of the flushes the kube-scheduler runs every 30 s (units come back together)."""
    clock = Clock(0.0)
    queue = SchedulingQueue(clock=clock)
    queue.add("ns/a")
    queue.pop_batch(window=0, size=10, timeout=0)
    queue.unschedulable("ns/a", "Insufficient cpu", CAPACITY)
    assert queue.next_due(window=0, size=10) == MAX_IN_UNSCHEDULABLE == 300.0
    clock.now = 299.9
    assert queue.pop_batch(window=0, size=10, timeout=0) == []
    clock.now = 300.0
    assert queue.pop_batch(window=0, size=10, timeout=0) == ["ns/a"]
    assert queue.moved[("active", "WildCardUnschedulableTimeout")] == 1
    queue.unschedulable("ns/a", "Insufficient cpu", CAPACITY, retry_by=330.0)  # (a gang's timeout, say)
    assert queue.next_due(window=0, size=10) == 330.0
    clock.now = 330.0
    assert queue.pop_batch(window=0, size=10, timeout=0) == ["ns/a"]
    queue.forget("ns/a")
    for unit, at in (("ns/b", 331.0), ("ns/c", 345.0), ("ns/d", 360.0)):  # tried within one 30 s period
        clock.now = at
        queue.add(unit)
        assert queue.pop_batch(window=0, size=10, timeout=0) == [unit]
        queue.unschedulable(unit, "Insufficient cpu", CAPACITY)
    assert queue.next_due(window=0, size=10) == 660.0
    clock.now = 660.0
    assert queue.pop_batch(window=0, size=10, timeout=0) == ["ns/b", "ns/c", "ns/d"]  # one batch


def test_an_event_while_a_unit_is_planned_retries_it_at_once_if_it_may_help() -> None:
    clock = Clock()
    queue = SchedulingQueue(initial=60, maximum=60, clock=clock)
    for unit in ("ns/a", "ns/b"):
        queue.add(unit)
    assert queue.pop_batch(window=0, size=10, timeout=0) == ["ns/a", "ns/b"]
    queue.move(hints.ASSIGNED_POD_ADD)  # (no unit waits: remembered for those in flight)
    assert queue.unschedulable("ns/a", hints=CAPACITY | INTER_POD) == 0.0  # its plan is stale
    assert queue.unschedulable("ns/b", hints=CAPACITY) == 60  # nothing it waits for happened
    assert queue.pop_batch(window=0, size=10, timeout=0) == ["ns/a"]


def test_the_unschedulable_tables_stay_bounded() -> None:
    """Units parked and moved again and again: the flush heap is rebuilt, the hint groups go."""
    clock = Clock()
    queue = SchedulingQueue(initial=0.001, maximum=0.001, clock=clock)
    units = [f"ns/p{i}" for i in range(50)]
    for _ in range(100):
        for unit in units:
            queue.add(unit)
        assert len(queue.pop_batch(window=0, size=100, timeout=0)) == 50
        for i, unit in enumerate(units):
            queue.unschedulable(unit, hints=CAPACITY | (INTER_POD if i % 2 else frozenset()))
        clock.advance(1)
        queue.move(hints.NODE_ADD)
    sizes = queue.sizes()
    assert sizes["queue_flushes"] <= 2 * 50 + 16 and sizes["queue_hint_groups"] == 0
    assert sizes["queue_unschedulable"] == 0 and sizes["queue_active"] == 50


def test_a_new_gang_member_retries_its_gang_only() -> None:
    clock = Clock()
    queue = SchedulingQueue(initial=60, clock=clock)
    for unit in (GANG, "ns/a"):
        queue.add(unit)
    queue.pop_batch(window=0, size=10, timeout=0)
    queue.unschedulable(GANG)
    queue.unschedulable("ns/a")
    queue.activate(GANG)
    assert queue.pop_batch(window=0, size=10, timeout=0) == [GANG]


def test_a_change_while_a_unit_is_planned_skips_its_backoff() -> None:
    clock = Clock()
    queue = SchedulingQueue(initial=60, clock=clock)
    queue.add(GANG)
    assert queue.pop_batch(window=0, size=10, timeout=0) == [GANG]
    queue.activate(GANG)  # a member arrived during the cycle
    assert queue.unschedulable(GANG) == 0
    assert queue.pop_batch(window=0, size=10, timeout=0) == [GANG]


def test_requeue_and_done_and_forget() -> None:
    clock = Clock()
    queue = SchedulingQueue(clock=clock)
    for unit in ("ns/a", "ns/b", "ns/c"):
        queue.add(unit)
    assert queue.pop_batch(window=0, size=10, timeout=0) == ["ns/a", "ns/b", "ns/c"]
    queue.done("ns/a")
    queue.requeue("ns/b")  # interrupted: straight back, no backoff
    queue.forget("ns/c")
    assert queue.pop_batch(window=0, size=10, timeout=0) == ["ns/b"]
    assert queue.counts() == (0, 0)
    queue.add("ns/a")  # a unit done may come back (a new pod with the same name)
    assert queue.counts() == (1, 0)


def test_a_batch_closes_when_arrivals_pause_and_stays_open_while_they_go_on() -> None:
    clock = Clock(0.0)
    queue = SchedulingQueue(clock=clock)
    queue.add("ns/a")
    clock.advance(0.15)
    queue.add("ns/b")  # arrivals go on: the batch stays open
    clock.advance(0.1)
    assert queue.pop_batch(window=1.0, size=100, timeout=0, quiet=0.2) == []
    clock.advance(0.1)  # nothing new for 0.2 s: what is there is all there is
    assert queue.pop_batch(window=1.0, size=100, timeout=0, quiet=0.2) == ["ns/a", "ns/b"]
    queue.add("ns/c")
    assert queue.pop_batch(window=1.0, size=100, timeout=0) == []  # without quiet: the whole window


def test_a_unit_bound_while_the_cluster_changed_is_not_planned_again() -> None:
    """A change in the cluster during a unit's cycle retries it at once if it was not placed (its
    plan may be stale), but a unit that was bound has nothing left to plan: it does not come back
    (it used to come back for an empty plan)."""
    clock = Clock()
    queue = SchedulingQueue(clock=clock)
    for unit in ("ns/bound", "ns/unplaced"):
        queue.add(unit)
    assert queue.pop_batch(window=0, size=10) == ["ns/bound", "ns/unplaced"]
    queue.cluster_changed()
    queue.done("ns/bound")
    assert queue.unschedulable("ns/unplaced") == 0.0
    assert queue.pop_batch(window=0, size=10, timeout=0) == ["ns/unplaced"]
    assert queue.counts() == (0, 0)


def test_next_due_is_when_pop_batch_would_hand_over_without_waiting() -> None:
    clock = Clock(100.0)
    queue = SchedulingQueue(initial=2, maximum=10, clock=clock)
    assert queue.next_due(window=1.0, size=10, quiet=0.2) is None
    queue.add("ns/a")
    clock.advance(0.1)
    queue.add("ns/b")
    assert queue.next_due(window=1.0, size=10, quiet=0.2) == 100.3  # quiet since b came
    assert queue.next_due(window=1.0, size=2) == 100.1  # full at its size: now
    clock.now = 100.3
    assert queue.pop_batch(window=1.0, size=10, timeout=0, quiet=0.2) == ["ns/a", "ns/b"]
    queue.unschedulable("ns/a")
    queue.done("ns/b")
    assert queue.next_due(window=1.0, size=10, quiet=0.2) == 102.3  # a's backoff ends


def test_backoff_stays_at_the_maximum_past_a_thousand_attempts() -> None:
    """A pod that never fits is retried every 10 s for ever: ``2.0 ** attempts`` overflowed at
    the 1,025th attempt (under three hours) and stopped the scheduler."""
    clock = Clock()
    queue = SchedulingQueue(initial=1, maximum=10, clock=clock)
    for attempt in range(1, 3001):
        queue.add("ns/a")
        assert queue.pop_batch(window=0, size=10, timeout=0) == ["ns/a"]
        backoff = queue.unschedulable("ns/a", "Insufficient cpu")
        assert backoff == (10 if attempt >= 5 else 2 ** (attempt - 1))
        clock.advance(backoff)


def test_doubling_as_the_kube_scheduler_computes_it() -> None:
    assert [doubling(a, 1, 10) for a in range(7)] == [0, 1, 2, 4, 8, 10, 10]
    assert doubling(10**9, 1, 10) == doubling(2000, 0.5, 10) == 10
    assert doubling(10**9, 0, 10) == 0  # (no loop of a billion steps either)
    assert doubling(3, 20, 10) == 10  # an initial above the maximum is the maximum


# ---------------------------------------------------------------------- the adaptive window

WINDOW, QUIET, PER_UNIT = 1.0, 0.2, 0.001


def adaptive_pop(queue: SchedulingQueue, size: int = 10_000) -> list[object]:
    return list(queue.pop_batch(WINDOW, size, timeout=0, quiet=QUIET, per_unit=PER_UNIT))


def test_a_lone_unit_in_an_idle_queue_is_handed_over_at_once() -> None:
    """It waited the fixed window (1 s), or the quiet time (0.2 s), before: latency with nothing else to do."""
    clock = Clock()
    queue = SchedulingQueue(clock=clock)
    queue.add("ns/a")
    assert adaptive_pop(queue) == ["ns/a"]
    queue.add(GANG, complete=True)
    assert queue.next_due(WINDOW, 10_000, QUIET, PER_UNIT) == clock.now
    assert adaptive_pop(queue) == [GANG]


def test_a_burst_created_pod_by_pod_within_the_least_window_gets_one_plan() -> None:
    """A client creates a burst's pods one request each (tens of milliseconds apart on a loaded API
    server): planning the first alone at once would split the burst, live, where ``kubeplace
    simulate``'s pods arriving at one instant are planned together (tests/e2e/test_fidelity_e2e.py
    drifted 5-6 points so). With ``least`` the batch stays open that long after its oldest unit;
    a gang whose members took longer than that to create is handed over as it completes."""
    clock, least = Clock(), 0.05
    queue = SchedulingQueue(clock=clock)

    def pop() -> list[object]:
        return list(queue.pop_batch(WINDOW, 10_000, timeout=0, quiet=QUIET, per_unit=PER_UNIT, least=least))

    for unit in ("ns/a", "ns/b", "ns/c"):
        queue.add(unit)
        assert pop() == []
        clock.advance(0.02)
    due = queue.next_due(WINDOW, 10_000, QUIET, PER_UNIT, least)
    assert due == pytest.approx(1000.0 + least + 2 * PER_UNIT)
    clock.now = due
    assert pop() == ["ns/a", "ns/b", "ns/c"]
    queue.add(GANG, complete=False)
    clock.advance(0.08)  # its members take 80 ms to create
    queue.activate(GANG, complete=True)
    assert pop() == [GANG]


def test_under_a_backlog_the_window_grows_with_it_oldest_first() -> None:
    clock = Clock()
    queue = SchedulingQueue(clock=clock)
    units = [f"ns/p{i}" for i in range(11)]
    for unit in units:
        queue.add(unit)
    assert queue.next_due(WINDOW, 10_000, QUIET, PER_UNIT) == clock.now + 10 * PER_UNIT
    assert adaptive_pop(queue) == []  # ten more waiting: the batch stays open 10 ms for more to join
    clock.advance(10 * PER_UNIT)
    assert adaptive_pop(queue) == units


def test_the_window_is_bounded_by_the_batch_window_and_the_size() -> None:
    clock = Clock()
    queue = SchedulingQueue(clock=clock)
    for i in range(5_000):  # 5 s at 1 ms a unit: the batch window (1 s) bounds it
        queue.add(f"ns/p{i}")
        clock.advance(0.0001)
    assert queue.next_due(WINDOW, 10_000, None, PER_UNIT) == 1000.0 + WINDOW
    clock.now = 1000.0 + WINDOW - 0.001
    assert queue.pop_batch(WINDOW, 10_000, timeout=0, per_unit=PER_UNIT) == []
    clock.now = 1000.0 + WINDOW
    assert len(queue.pop_batch(WINDOW, 10_000, timeout=0, per_unit=PER_UNIT)) == 5_000
    for i in range(5_000):
        queue.add(f"ns/q{i}")
    assert len(adaptive_pop(queue, size=1_000)) == 1_000  # the size closes it at once, as before


def test_a_gang_waits_for_its_members_then_is_handed_over_as_soon_as_it_is_complete() -> None:
    clock = Clock()
    queue = SchedulingQueue(clock=clock)
    queue.add(GANG, complete=False)  # its first member
    assert adaptive_pop(queue) == []
    clock.advance(0.05)
    queue.activate(GANG, complete=False)
    assert queue.next_due(WINDOW, 10_000, None, PER_UNIT) == 1000.0 + WINDOW
    clock.advance(0.05)
    queue.activate(GANG, complete=True)  # its last member
    assert adaptive_pop(queue) == [GANG]


def test_an_incomplete_gang_does_not_ride_along_until_it_is_due_itself() -> None:
    clock = Clock()
    queue = SchedulingQueue(clock=clock)
    queue.add(GANG, complete=False)
    queue.add("ns/a")
    assert adaptive_pop(queue) == ["ns/a"]  # (and one incomplete gang does not close a batch of size 1)
    clock.advance(WINDOW)  # waited the whole window for its members: planned (and reported waiting)
    assert adaptive_pop(queue) == [GANG]


def test_incomplete_gangs_neither_fill_a_batch_nor_go_when_arrivals_pause() -> None:
    """Their members may still be on their way (a busy API server): planned half there, each
    member got a FailedScheduling Event and the gang a cycle more."""
    clock = Clock()
    queue = SchedulingQueue(clock=clock)
    gangs = [GangKey("ns", f"g{i}") for i in range(3)]
    for gang in gangs:
        queue.add(gang, complete=False)
    assert queue.pop_batch(WINDOW, 2, timeout=0, quiet=QUIET, per_unit=PER_UNIT) == []
    clock.advance(QUIET)
    queue.add("ns/a")
    clock.advance(QUIET)
    assert adaptive_pop(queue) == ["ns/a"]
    assert queue.next_due(WINDOW, 10_000, QUIET, PER_UNIT) == 1000.0 + WINDOW
    clock.advance(WINDOW - 2 * QUIET)
    assert adaptive_pop(queue) == gangs


def test_with_the_fixed_window_every_unit_goes_when_arrivals_pause_as_before() -> None:
    clock = Clock()
    queue = SchedulingQueue(clock=clock)
    queue.add(GANG, complete=False)
    queue.add("ns/a")
    assert queue.pop_batch(WINDOW, 10, timeout=0, quiet=QUIET) == []
    clock.advance(QUIET)
    assert queue.pop_batch(WINDOW, 10, timeout=0, quiet=QUIET) == [GANG, "ns/a"]
    queue.add("ns/b")
    clock.advance(WINDOW / 2)
    queue.add(GangKey("ns", "young"), complete=False)
    clock.advance(WINDOW / 2)
    assert queue.pop_batch(WINDOW, 10, timeout=0) == ["ns/b", GangKey("ns", "young")]


def test_a_gang_completed_while_it_was_planned_comes_back_complete() -> None:
    clock = Clock()
    queue = SchedulingQueue(clock=clock)
    queue.add(GANG, complete=False)
    clock.advance(WINDOW)
    assert adaptive_pop(queue) == [GANG]
    queue.activate(GANG, complete=True)  # its last member arrived during the cycle
    assert queue.unschedulable(GANG, "gang waiting") == 0
    assert adaptive_pop(queue) == [GANG]
    queue.done(GANG)
    assert queue.sizes()["queue_incomplete"] == 0
