"""The independent verifier of preemptions refuses every victim the rules forbid."""

from __future__ import annotations

import pytest

from kubeplace.kube.gangs import PLAIN_LABEL, PLAIN_MIN_MEMBER
from kubeplace.kube.objects import MIRROR_ANNOTATION
from kubeplace.plan.verify_preempt import verify_preemptions
from tests.builders import GANG_SOURCES, PodBuilder, node, pod, snapshot_of


def running(name: str, node_name: str = "n1", cpu: int = 2, priority: int = 1) -> PodBuilder:
    return pod(name).cpu(cpu).priority(priority).on(node_name).owner("ReplicaSet", "rs")


def details(*objects: object, placed: dict[str, str], victims: dict[str, tuple[str, ...]]) -> list[str]:
    snapshot = snapshot_of(*objects)  # type: ignore[arg-type]
    where = {p.name: p.node_name for p in snapshot.bound}
    found = verify_preemptions(snapshot, [("default", n, node) for n, node in placed.items()],
                               [("default", v, where.get(v, "n1"), tuple(f"default/{p}" for p in f))
                                for v, f in victims.items()], ("nvidia.com/gpucores",))
    return [v.detail for v in found]


BASE = (node("n1").cpu(4), node("n2").cpu(4))


def test_a_valid_preemption_passes() -> None:
    assert details(*BASE, running("v1"), running("v2"), pod("p").cpu(4).priority(10),
                   placed={"p": "n1"}, victims={"v1": ("p",), "v2": ("p",)}) == []


@pytest.mark.parametrize(("mark", "expected"), [
    (lambda b: b.annotation(MIRROR_ANNOTATION, "x"), "mirror or static"),
    (lambda b: b.annotation("kubernetes.io/config.source", "file"), "mirror or static"),
    (lambda b: b.owner("DaemonSet", "ds"), "DaemonSet"),
    (lambda b: b.deleting(), "already terminating"),
])
def test_pods_that_may_never_be_victims(mark: object, expected: str) -> None:
    victim = mark(running("v1", cpu=4))  # type: ignore[operator]
    found = details(*BASE, victim, pod("p").cpu(4).priority(10), placed={"p": "n1"}, victims={"v1": ("p",)})
    assert any(expected in d for d in found), found


def test_the_victim_must_run_on_the_node_named() -> None:
    found = details(*BASE, running("v1", "n2", 4), pod("p").cpu(4).priority(10), placed={"p": "n1"},
                    victims={"ghost": ("p",)})
    assert found == ["the victim is not a running pod on this node"]


@pytest.mark.parametrize(("preemptor", "expected"), [
    (pod("p").cpu(4).priority(1), "is not above the victim's priority"),
    (pod("p").cpu(4).priority(10).spec("preemptionPolicy", "Never"), "may not preempt"),
    (pod("p").cpu(4).priority(10).request("nvidia.com/gpucores", 30), "may not preempt"),
])
def test_who_may_preempt(preemptor: PodBuilder, expected: str) -> None:
    found = details(*BASE, running("v1", cpu=4), preemptor, placed={"p": "n1"}, victims={"v1": ("p",)})
    assert any(expected in d for d in found), found


def test_a_system_critical_victim_needs_a_more_critical_preemptor() -> None:
    found = details(*BASE, running("dns", cpu=4, priority=2_000_000_000), pod("p").cpu(4).priority(2_000_000_500),
                    placed={"p": "n1"}, victims={"dns": ("p",)})
    assert found == []


def test_the_preemptor_must_be_placed_where_the_victim_frees_room() -> None:
    found = details(*BASE, running("v1", cpu=4), pod("p").cpu(4).priority(10), placed={"p": "n2"},
                    victims={"v1": ("p",)})
    assert any("where the victim frees no room" in d for d in found), found
    found = details(*BASE, running("v1", cpu=4), pod("p").cpu(4).priority(10), placed={}, victims={"v1": ("p",)})
    assert any("is not a placed pending pod" in d for d in found), found
    found = details(*BASE, running("v1", cpu=4), placed={}, victims={"v1": ()})
    assert found == ["evicted for no placed pod"]


def test_a_gang_is_evicted_whole() -> None:
    a = running("a", cpu=4).label(PLAIN_LABEL, "job").annotation(PLAIN_MIN_MEMBER, "1")
    b = running("b", "n2", 1).label(PLAIN_LABEL, "job").annotation(PLAIN_MIN_MEMBER, "1")
    found = details(*BASE, a, b, pod("p").cpu(4).priority(10), placed={"p": "n1"}, victims={"a": ("p",)})
    assert any("member(s) default/b kept" in d for d in found), found
    assert details(*BASE, a, b, pod("p").cpu(4).priority(10), placed={"p": "n1"},
                   victims={"a": ("p",), "b": ("p",)}) == []


@pytest.mark.parametrize("source", sorted(GANG_SOURCES))
def test_a_gang_of_every_source_is_evicted_whole(source: str) -> None:
    """The regression: the verifier's own copy of the gang rule knew neither KAI's annotation, nor
    the Workload API's ``spec.schedulingGroup``, nor Kueue, JobSet or LeaderWorkerSet, and let a
    plan evict such a gang in part."""
    mark = GANG_SOURCES[source]
    a, b = mark(running("a", cpu=4), "job"), mark(running("b", "n2", 1), "job")
    found = details(*BASE, a, b, pod("p").cpu(4).priority(10), placed={"p": "n1"}, victims={"a": ("p",)})
    assert any("member(s) default/b kept" in d for d in found), found
    assert details(*BASE, a, b, pod("p").cpu(4).priority(10), placed={"p": "n1"},
                   victims={"a": ("p",), "b": ("p",)}) == []


def test_a_gang_with_a_never_member_may_not_preempt() -> None:
    g0 = pod("g0").cpu(4).priority(10).label(PLAIN_LABEL, "g").annotation(PLAIN_MIN_MEMBER, "2")
    g1 = pod("g1").cpu(1).priority(10).label(PLAIN_LABEL, "g").annotation(PLAIN_MIN_MEMBER, "2")
    found = details(*BASE, running("v1", cpu=4), g0, g1.spec("preemptionPolicy", "Never"),
                    placed={"g0": "n1", "g1": "n2"}, victims={"v1": ("g0",)})
    assert any("may not preempt" in d for d in found), found


@pytest.mark.parametrize("source", sorted(GANG_SOURCES))
def test_a_never_member_of_a_gang_of_every_source_keeps_it_from_preempting(source: str) -> None:
    mark = GANG_SOURCES[source]
    g0, g1 = mark(pod("g0").cpu(4).priority(10), "g"), mark(pod("g1").cpu(1).priority(10), "g")
    found = details(*BASE, running("v1", cpu=4), g0, g1.spec("preemptionPolicy", "Never"),
                    placed={"g0": "n1", "g1": "n2"}, victims={"v1": ("g0",)})
    assert any("may not preempt" in d for d in found), found


def test_no_pod_counts_on_room_freed_by_a_victim_above_it() -> None:
    found = details(node("n1").cpu(4), running("mid", cpu=2, priority=5), running("low", cpu=2, priority=1),
                    pod("high").cpu(2).priority(10), pod("small").cpu(2).priority(3),
                    placed={"high": "n1", "small": "n1"}, victims={"mid": ("high",), "low": ("small",)})
    assert found == ["counts on room freed by victims it may not preempt: Insufficient cpu"]
    found = details(node("n1").cpu(4), running("low", cpu=4), pod("high").cpu(2).priority(10),
                    pod("never").cpu(2).priority(20).spec("preemptionPolicy", "Never"),
                    placed={"high": "n1", "never": "n1"}, victims={"low": ("high",)})
    assert found == ["counts on room freed by victims it may not preempt: Insufficient cpu"]


def test_it_shares_no_code_with_the_model() -> None:
    import ast
    from pathlib import Path

    from kubeplace.plan import verify_preempt

    tree = ast.parse(Path(verify_preempt.__file__).read_text())
    imported = {n.module or "" for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
    product = {m for m in imported if m.startswith("kubeplace")}
    assert {m for m in product if not m.startswith("kubeplace.kube.")} == {"kubeplace.plan.verify"}
    assert "kubeplace.kube.gangs" in product  # the one gang rule of the product, not a copy of it
