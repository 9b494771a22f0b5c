"""``kube.memo.IdentityMemo``: a value per live object and argument tuple, the last VARIANTS
argument tuples per object, forgotten with the object, and small (one object per object)."""

from __future__ import annotations

import gc
import tracemalloc

from kubeplace.kube.memo import IdentityMemo
from kubeplace.kube.objects import Pod


def test_a_value_is_computed_once_per_object_and_arguments_and_the_oldest_arguments_go_first() -> None:
    calls: list[tuple[str, int]] = []

    def shape(pod: Pod, n: int) -> str:
        calls.append((pod.name, n))
        return f"{pod.key}:{n}"

    memo = IdentityMemo(shape, variants=2)
    a, b = Pod("ns", "a"), Pod("ns", "a")  # equal, not the same object
    assert [memo(a, 1), memo(a, 1), memo(b, 1)] == ["ns/a:1"] * 3
    assert calls == [("a", 1), ("a", 1)]
    assert memo(a, 2) == "ns/a:2" and memo(a, 1) == "ns/a:1" and len(calls) == 3
    memo(a, 3)  # a third argument tuple: the oldest (1) goes
    assert len(memo) == 2 + 1
    memo(a, 2)
    memo(a, 1)
    assert calls[3:] == [("a", 3), ("a", 1)]


def test_an_entry_goes_with_its_object() -> None:
    memo = IdentityMemo(lambda pod: pod.key)
    pods = [Pod("ns", f"p{i}") for i in range(100)]
    assert list(map(memo, pods))[99] == "ns/p99"
    assert len(memo) == 100
    del pods[50:]
    gc.collect()
    assert len(memo) == 50
    memo.clear()
    assert len(memo) == 0


def test_an_object_s_entry_is_one_small_object() -> None:
    # 100,000 pods each remembered by a few memos: a closure, a tuple and a dict per entry
    # besides the weak reference took 0.6 KiB each, 100 MiB of a 20,000 x 100,000 plan
    pods = [Pod("ns", f"p{i}") for i in range(5000)]
    memo = IdentityMemo(lambda pod: 1)
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        list(map(memo, pods))
        per_entry = (tracemalloc.get_traced_memory()[0] - before) / len(pods)
    finally:
        tracemalloc.stop()
    assert per_entry < 250, per_entry
