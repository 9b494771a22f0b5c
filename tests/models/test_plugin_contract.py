"""The plugin contract: a plugin is called at the extension points its factory declares and
checked against them when built; score plugins see the problem they score; any plugin may say
which rules of a pod it cannot model (the pod is then left to the default scheduler)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import pytest

from kubeplace.models.config import Configuration, Profile, SolverSettings, instantiate
from kubeplace.models.framework import GangDomainsTerm, PluginError, build_plugins
from kubeplace.models.plugins import in_tree_registry
from kubeplace.models.plugins.node_unschedulable import NodeUnschedulable
from kubeplace.plan.checks import verify_plan
from kubeplace.plan.pipeline import make_plan
from kubeplace.plugins import (
    CONSTRAINT,
    FILTER,
    SCORE,
    NodesUsedTerm,
    ObjectiveTerm,
    PluginFactory,
    Pod,
    Problem,
    RunContext,
    Snapshot,
)
from tests.builders import node, pod, snapshot_of
from tests.models.test_model_gang_topology import NODES, TWO_ZONES, member, preferring, zones_of

FAST = SolverSettings(time_limit=5, workers=1)
EMPTY = RunContext(Snapshot((), (), ()))


@dataclass(frozen=True)
class Gpuless:
    """A score plugin (no terms) that says it cannot model pods labelled ``needs: special-hardware``."""

    name: str = "Gpuless"

    def terms(self, problem: Problem) -> Sequence[ObjectiveTerm]:
        return ()

    def unmodelled(self, pod: Pod) -> tuple[str, ...]:
        return ("special hardware",) if pod.labels.get("needs") == "special-hardware" else ()


def with_plugin(factory: PluginFactory) -> tuple[Configuration, Profile]:
    profile = Profile(enabled=(factory.name,))
    return Configuration(profiles=(profile,), registry={**in_tree_registry(), factory.name: factory}), profile


def test_a_plugin_says_what_it_cannot_model_and_the_pod_is_left_to_the_default_scheduler() -> None:
    config, profile = with_plugin(PluginFactory("Gpuless", SCORE, None, lambda _a, _c: Gpuless()))
    odd = pod("odd").cpu("1").label("needs", "special-hardware")
    snap = snapshot_of(node("n").cpu("4"), pod("plain").cpu("1"), odd)
    planned = make_plan(snap, config, profile, FAST)
    plan = planned.plan
    assert planned.violations == ()  # every plan a test makes is verified (make_plan runs the verifier)
    assert [p.name for p in plan.placements] == ["plain"]
    (left,) = plan.unplaced
    assert left.name == "odd" and left.reasons == ("left to the default scheduler: special hardware",)
    odd_uid = next(p.uid for p in snap.pending if p.name == "odd")
    bad = [*plan.placements, type(plan.placements[0])("default", "odd", "n", odd_uid)]
    assert [v.rule for v in verify_plan(snap, bad, config, profile)] == ["Unmodelled"]  # nor may a plan file bind it


def test_a_score_plugin_sees_the_problem_it_scores() -> None:
    seen: list[Problem] = []

    @dataclass(frozen=True)
    class PackIfCrowded:
        name: str = "PackIfCrowded"

        def terms(self, problem: Problem) -> Sequence[ObjectiveTerm]:
            seen.append(problem)
            return [NodesUsedTerm(1)] if int(problem.count.sum()) > 2 else []

    config, profile = with_plugin(PluginFactory("PackIfCrowded", SCORE, None, lambda _a, _c: PackIfCrowded()))
    snap = snapshot_of(node("a").cpu("4"), node("b").cpu("4"), *[pod(f"p{i}").cpu("1") for i in range(3)])
    planned = make_plan(snap, config, profile, FAST)
    assert planned.violations == ()
    assert seen and seen[-1] is planned.aggregation.problem
    assert NodesUsedTerm(1) in planned.terms
    assert len({p.node for p in planned.plan.placements}) == 1  # the term counts: packed, not balanced


def test_the_gang_domain_term_comes_from_a_plugin_that_a_profile_may_disable() -> None:
    snap = snapshot_of(*TWO_ZONES, preferring("job", 3), *[member(f"w{i}") for i in range(3)])
    default = make_plan(snap, Configuration(), Profile(), FAST)
    assert default.violations == ()
    assert GangDomainsTerm(10) in default.terms and zones_of(default.plan, NODES) == {"b"}
    without = Profile(disabled=("GangTopologyPreference",))
    planned = make_plan(snap, Configuration(profiles=(without,)), without, FAST)
    assert planned.violations == ()
    assert not any(isinstance(t, GangDomainsTerm) for t in planned.terms)
    assert zones_of(planned.plan, NODES) == {"a", "b"}  # balance alone splits the gang


@dataclass(frozen=True)
class Both(NodeUnschedulable):
    """A filter that is a score plugin too."""

    name: str = "Both"

    def terms(self, problem: Problem) -> Sequence[ObjectiveTerm]:
        return [NodesUsedTerm(1)]


def test_a_plugin_is_called_only_at_the_points_it_declares() -> None:
    plugins = build_plugins([(PluginFactory("Both", FILTER, None, lambda _a, _c: Both()), None)], EMPTY)
    assert [p.name for p in plugins.filters] == ["Both"] and plugins.scores == ()
    both = build_plugins([(PluginFactory("Both", (FILTER, SCORE), None, lambda _a, _c: Both()), None)], EMPTY)
    assert [p.name for p in both.scores] == ["Both"]
    in_tree = instantiate(Configuration(), Profile(), Snapshot((), (), ()))
    assert "NodePorts" in {p.name for p in in_tree.filters} & {p.name for p in in_tree.constraints}


@pytest.mark.parametrize(("point", "missing"), [(FILTER, "reason, pod_key(), node_key(), filter()"),
                                                (CONSTRAINT, "pod_key(), constraints()")])
def test_a_plugin_lacking_a_declared_point_is_refused_naming_what_it_lacks(point: str, missing: str) -> None:
    factory: Any = PluginFactory("Both", (SCORE, point), None, lambda _a, _c: Gpuless())
    with pytest.raises(PluginError) as raised:
        build_plugins([(factory, None)], EMPTY)
    assert str(raised.value) == f"plugin 'Both' declares extension point {point} but does not implement {missing}"


def test_implements_answers_as_isinstance_without_listing_the_members_again(monkeypatch: pytest.MonkeyPatch) -> None:
    """``models.framework.implements`` answers as ``isinstance`` against the optional protocols for
    every in-tree plugin and args of the default profile, and for objects whose instance or
    ``__getattr__`` decides, without listing the protocol's members again at each call (Python
    3.11's ``isinstance`` does, each time)."""
    import typing

    from kubeplace.models.framework import (
        ExtraResources,
        FilterError,
        NodeKeyBasis,
        NodeReasons,
        PodDefaults,
        Rejects,
        Unmodelled,
        implements,
    )

    protocols = (ExtraResources, FilterError, NodeKeyBasis, NodeReasons, PodDefaults, Rejects, Unmodelled)
    snap = snapshot_of(node("n1"), pod("p"))
    plugins = instantiate(Configuration(), Profile(), snap)
    config = Configuration()
    args = [config.profile(None).plugin_args.get(name) or (f.args_type() if f.args_type else None)
            for name, f in in_tree_registry().items()]

    class Blocked:  # a member shadowed by None on the instance: not implemented
        def defaulted(self, snapshot: Snapshot) -> Snapshot:
            return snapshot

    blocked = Blocked()
    blocked.defaulted = None  # type: ignore[assignment,method-assign]

    class Forwarding:  # members answered by __getattr__
        def __getattr__(self, name: str) -> Any:
            return lambda *a: ()

    class Given:  # a member given on the instance
        pass

    given = Given()
    given.unmodelled = lambda p: ()  # type: ignore[attr-defined]
    objects = [*plugins.filters, *plugins.scores, *plugins.constraints, *args, Blocked(), Forwarding(),
               given, Given(), 3, None]
    assert not implements(blocked, PodDefaults)  # isinstance says yes; calling None would raise
    for obj in objects:
        for protocol in protocols:
            assert implements(obj, protocol) == isinstance(obj, protocol), (obj, protocol)
    listed = []
    members = typing._get_protocol_attrs  # type: ignore[attr-defined]
    monkeypatch.setattr(typing, "_get_protocol_attrs", lambda cls: listed.append(cls) or members(cls))
    decided = [o for o in [*plugins.filters, *args] if isinstance(getattr(o, "__dict__", None), dict)]
    for obj in decided:
        for protocol in protocols:
            implements(obj, protocol)
    assert len(decided) > 5 and listed == []


def test_a_snapshot_with_nothing_to_mark_is_the_same_snapshot() -> None:
    """``mark_unmodelled`` gives the snapshot back when no pod has a reason to add: the verifier
    then reads the bound pods indexed by node once per cycle, not again on a copy."""
    snap = snapshot_of(node("n1"), pod("p"), pod("q").on("n1"))
    plugins = instantiate(Configuration(), Profile(), snap)
    assert plugins.mark_unmodelled(snap, bound=False) is snap
    assert plugins.mark_unmodelled(snap) is snap
