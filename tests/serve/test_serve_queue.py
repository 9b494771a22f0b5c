"""The scheduling queue: batching by window and size, backoff, retries on cluster changes."""

from __future__ import annotations

import threading
import time

from kubeplace.serve.queue import SchedulingQueue
from tests.serve.fakes import Clock


def test_a_batch_closes_when_its_window_has_passed() -> None:
    queue = SchedulingQueue()
    queue.add("pod:a")
    started = time.monotonic()
    threading.Timer(0.05, queue.add, ["pod:b"]).start()
    assert queue.pop_batch(window=0.3, size=100) == ["pod:a", "pod:b"]
    assert 0.25 <= time.monotonic() - started < 2


def test_a_batch_closes_early_at_its_size_oldest_first() -> None:
    queue = SchedulingQueue()
    for unit in ("pod:a", "pod:b", "pod:c"):
        queue.add(unit)
    started = time.monotonic()
    assert queue.pop_batch(window=30, size=2) == ["pod:a", "pod:b"]
    assert time.monotonic() - started < 1
    assert queue.counts() == (1, 0)


def test_adding_a_unit_twice_keeps_one_entry() -> None:
    queue = SchedulingQueue()
    queue.add("gang:ns/g")
    queue.add("gang:ns/g")
    assert queue.pop_batch(window=0, size=10) == ["gang:ns/g"]


def test_nothing_to_do_returns_empty_after_the_timeout_or_when_stopped() -> None:
    queue = SchedulingQueue()
    assert queue.pop_batch(window=0, size=10, timeout=0.05) == []
    stop = threading.Event()
    stop.set()
    queue.add("pod:a")
    assert queue.pop_batch(window=10, size=10, stop=stop) == []


def test_backoff_doubles_per_attempt_up_to_the_maximum() -> None:
    clock = Clock()
    queue = SchedulingQueue(initial=1, maximum=10, clock=clock)
    backoffs = []
    for _ in range(6):
        queue.add("pod:a")
        assert queue.pop_batch(window=0, size=10, timeout=0) == ["pod:a"]
        backoffs.append(queue.unschedulable("pod:a", "Insufficient cpu"))
        clock.advance(backoffs[-1])
    assert backoffs == [1, 2, 4, 8, 10, 10]


def test_an_unschedulable_unit_comes_back_when_its_backoff_is_over() -> None:
    clock = Clock()
    queue = SchedulingQueue(initial=2, clock=clock)
    queue.add("pod:a")
    queue.pop_batch(window=0, size=10, timeout=0)
    queue.unschedulable("pod:a")
    queue.add("pod:a")  # seen again (a status update): still backing off
    assert queue.pop_batch(window=0, size=10, timeout=0) == []
    assert queue.backoff_of("pod:a") == 2
    clock.advance(2)
    assert queue.pop_batch(window=0, size=10, timeout=0) == ["pod:a"]


def test_a_cluster_change_retries_every_unschedulable_unit_at_once() -> None:
    clock = Clock()
    queue = SchedulingQueue(initial=60, maximum=60, clock=clock)
    for unit in ("pod:a", "gang:ns/g"):
        queue.add(unit)
    queue.pop_batch(window=0, size=10, timeout=0)
    queue.unschedulable("pod:a")
    queue.unschedulable("gang:ns/g")
    assert queue.counts() == (0, 2)
    assert queue.cluster_changed() == 2
    assert sorted(queue.pop_batch(window=0, size=10, timeout=0)) == ["gang:ns/g", "pod:a"]


def test_a_new_gang_member_retries_its_gang_only() -> None:
    clock = Clock()
    queue = SchedulingQueue(initial=60, clock=clock)
    for unit in ("gang:ns/g", "pod:a"):
        queue.add(unit)
    queue.pop_batch(window=0, size=10, timeout=0)
    queue.unschedulable("gang:ns/g")
    queue.unschedulable("pod:a")
    queue.activate("gang:ns/g")
    assert queue.pop_batch(window=0, size=10, timeout=0) == ["gang:ns/g"]


def test_a_change_while_a_unit_is_planned_skips_its_backoff() -> None:
    clock = Clock()
    queue = SchedulingQueue(initial=60, clock=clock)
    queue.add("gang:ns/g")
    assert queue.pop_batch(window=0, size=10, timeout=0) == ["gang:ns/g"]
    queue.activate("gang:ns/g")  # a member arrived during the cycle
    assert queue.unschedulable("gang:ns/g") == 0
    assert queue.pop_batch(window=0, size=10, timeout=0) == ["gang:ns/g"]


def test_requeue_and_done_and_forget() -> None:
    clock = Clock()
    queue = SchedulingQueue(clock=clock)
    for unit in ("pod:a", "pod:b", "pod:c"):
        queue.add(unit)
    assert queue.pop_batch(window=0, size=10, timeout=0) == ["pod:a", "pod:b", "pod:c"]
    queue.done("pod:a")
    queue.requeue("pod:b")  # interrupted: straight back, no backoff
    queue.forget("pod:c")
    assert queue.pop_batch(window=0, size=10, timeout=0) == ["pod:b"]
    assert queue.counts() == (0, 0)
    queue.add("pod:a")  # a unit done may come back (a new pod with the same name)
    assert queue.counts() == (1, 0)
