"""The snapshot's pods sorted by (namespace, name), updated from the last answer with the pods that
came and went, are exactly those sorted from scratch, step after step of random changes; a key
that comes twice is refused as before."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kubeplace.kube import parse
from kubeplace.kube.errors import InputError
from kubeplace.kube.objects import Pod

STEPS = settings(max_examples=80, deadline=None, derandomize=True, database=None,
                 suppress_health_check=[HealthCheck.too_slow])
NAMESPACES = ("a", "a-b", "b")


def plain(pods: list[Pod]) -> list[Pod]:
    by_key = {(p.namespace, p.name): p for p in pods}
    return [by_key[k] for k in sorted(by_key)]


@STEPS
@given(st.lists(st.tuples(st.sampled_from(("add", "remove", "replace", "twice", "same object twice", "many")),
                          st.integers(0, 200)), min_size=1, max_size=25))
def test_kept_order_is_the_sorted_order_whatever_changes(steps: list[tuple[str, int]]) -> None:
    parse._LAST_SORTED.clear()
    pods = [Pod(NAMESPACES[i % 3], f"p{i}") for i in range(40)]
    serial = 1000
    for kind, n in steps:
        serial += 1
        if kind == "add":
            pods.append(Pod(NAMESPACES[n % 3], f"q{serial}"))
        elif kind == "remove" and pods:
            pods.pop(n % len(pods))
        elif kind == "replace" and pods:
            old = pods[n % len(pods)]
            pods[n % len(pods)] = Pod(old.namespace, old.name, uid=f"u{serial}")
        elif kind == "many":
            pods += [Pod(NAMESPACES[k % 3], f"m{serial}-{k}") for k in range(n % 30)]
        changed = list(pods)
        if kind == "twice" and pods:
            changed.append(Pod(pods[n % len(pods)].namespace, pods[n % len(pods)].name, uid="copy"))
        elif kind == "same object twice" and pods:
            changed.append(pods[n % len(pods)])
        if len(changed) != len(pods):
            with pytest.raises(InputError, match="duplicate pod"):
                parse._unique_pods(changed)
            continue
        got = parse._unique_pods(changed)
        want = plain(changed)
        assert len(got) == len(want) and all(g is w for g, w in zip(got, want, strict=True))
