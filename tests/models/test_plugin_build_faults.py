"""A user plugin's build failing on the run's snapshot (models/plugin_guard.attributed_build): the
pending pods and nodes it fails on are found by halving, within ATTRIBUTION_BUILDS builds; a
build that fails on no one object, or on too many to find within the budget, is whole."""

from __future__ import annotations

import pytest

from kubeplace.kube.objects import Snapshot
from kubeplace.models.framework import PluginError, RunContext
from kubeplace.models.plugin_guard import ATTRIBUTION_BUILDS, attributed_build
from tests.builders import node, pod


def snapshot(pods: int, nodes: int) -> Snapshot:
    return Snapshot(tuple(node(f"n{i}").cpu("4").build() for i in range(nodes)),
                    tuple(pod(f"p{i}").cpu("1").build() for i in range(pods)), ())


class Counting:
    """A build failing on the pods and nodes named in ``bad``, counting its calls."""

    def __init__(self, bad: set[str]) -> None:
        self.bad, self.calls = bad, 0

    def __call__(self, ctx: RunContext) -> str:
        self.calls += 1
        if any(o.name in self.bad for o in (*ctx.snapshot.pending, *ctx.snapshot.nodes)):
            raise ValueError("broke")
        return "built"


@pytest.mark.parametrize("bad", [{"p37"}, {"n12"}, {"p3", "p90", "n0"}])
def test_the_objects_a_build_fails_on_are_found_within_a_few_builds(bad: set[str]) -> None:
    build = Counting(bad)
    built, faults = attributed_build("Broken", build, RunContext(snapshot(100, 20)))
    assert built == "built"
    assert set(faults.pods) == {f"default/{b}" for b in bad if b[0] == "p"}, faults
    assert set(faults.nodes) == {b for b in bad if b[0] == "n"}, faults
    assert set(faults.pods.values()) | set(faults.nodes.values()) == {
        "plugin Broken failed: build(): ValueError: broke"}
    assert build.calls <= 3 + 2 * 7 * len(bad), build.calls  # (7 halvings of 100)


def test_a_build_failing_on_every_node_or_past_the_budget_is_whole() -> None:
    with pytest.raises(PluginError, match="plugin 'Broken' failed to build: ValueError: broke"):
        attributed_build("Broken", Counting({"n0", "n1"}), RunContext(snapshot(5, 2)))
    build = Counting({f"p{i}" for i in range(0, 100, 2)})  # 50 pods at fault: past the budget
    with pytest.raises(PluginError, match="failed to build"):
        attributed_build("Broken", build, RunContext(snapshot(100, 2)))
    assert build.calls <= ATTRIBUTION_BUILDS + 1


def test_a_build_failing_on_nothing_it_can_leave_out_is_whole() -> None:
    def build(ctx: RunContext) -> str:
        raise ValueError("always")

    with pytest.raises(PluginError, match="failed to build: ValueError: always"):
        attributed_build("Broken", build, RunContext(snapshot(3, 3)))
