"""On small random clusters, the victims kubeplace chooses are the proven optimum of the stated
order, found again here by brute force over every set of victims and every placement.

The brute force shares nothing with the model: it enumerates each subset of the evictable units
(a pod, or a running gang whole) and each node (or none) for each pending pod, keeps the
combinations the rules allow (capacity; a pod never counts on room freed by a victim it may not
preempt itself; every eviction is for a placed pod of higher priority on the victim's node) and
ranks them by the order stated in docs/rules.md (Preemption): pods placed net of pods evicted, priority by
priority from the highest, then the highest victim priority, then PodDisruptionBudget violations,
then the victims weighted 1 + their priority's rank.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kubeplace.kube.gangs import PLAIN_LABEL, PLAIN_MIN_MEMBER
from kubeplace.kube.objects import Snapshot
from kubeplace.models.config import Configuration, SolverSettings
from kubeplace.plan.preemption_plan import make_preemption_plan
from tests.builders import node, pod, snapshot_of
from tests.scenarios import usable_backends

BACKENDS = usable_backends()
EXAMPLES = settings(max_examples=150, deadline=None, derandomize=True, database=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
RESOURCES = ("cpu", "memory")
NEVER = "Never"


@dataclass(frozen=True)
class Running:
    name: str
    node: int
    cpu: int
    memory: int
    priority: int
    gang: str = ""
    app: str = ""


@dataclass(frozen=True)
class Waiting:
    name: str
    cpu: int
    memory: int
    priority: int
    never: bool = False


@dataclass(frozen=True)
class Case:
    nodes: tuple[tuple[int, int], ...]  # (cpu, memory GiB)
    running: tuple[Running, ...]
    pending: tuple[Waiting, ...]
    allowed: int  # disruptions the PodDisruptionBudget of app=web allows

    def snapshot(self) -> Snapshot:
        objects: list[Any] = [node(f"n{i}").cpu(c).memory(f"{m}Gi") for i, (c, m) in enumerate(self.nodes)]
        for r in self.running:
            b = pod(r.name).cpu(r.cpu).memory(f"{r.memory}Gi").priority(r.priority).on(f"n{r.node}")
            b = b.owner("ReplicaSet", "rs")
            if r.gang:
                b = b.label(PLAIN_LABEL, r.gang).annotation(PLAIN_MIN_MEMBER, "1")
            if r.app:
                b = b.label("app", r.app)
            objects.append(b)
        for w in self.pending:
            b = pod(w.name).cpu(w.cpu).memory(f"{w.memory}Gi").priority(w.priority)
            if w.never:
                b = b.spec("preemptionPolicy", NEVER)
            objects.append(b)
        objects.append({"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
                        "metadata": {"name": "web", "namespace": "default"},
                        "spec": {"selector": {"matchLabels": {"app": "web"}}},
                        "status": {"disruptionsAllowed": self.allowed}})
        return snapshot_of(*objects)


@st.composite
def cases(draw: st.DrawFn) -> Case:
    nodes = tuple((draw(st.sampled_from((2, 4))), draw(st.sampled_from((4, 8))))
                  for _ in range(draw(st.integers(1, 3))))
    used = [[0, 0] for _ in nodes]
    running = []
    for k in range(draw(st.integers(1, 5))):
        i = draw(st.integers(0, len(nodes) - 1))
        cpu, memory = draw(st.integers(1, 2)), draw(st.sampled_from((0, 1, 2)))
        if used[i][0] + cpu > nodes[i][0] or used[i][1] + memory > nodes[i][1]:
            continue
        used[i][0] += cpu
        used[i][1] += memory
        running.append(Running(f"r{k}", i, cpu, memory, draw(st.sampled_from((0, 1, 5))),
                               draw(st.sampled_from(("", "", "", "g"))), draw(st.sampled_from(("", "web")))))
    pending = tuple(Waiting(f"p{k}", draw(st.integers(1, 3)), draw(st.sampled_from((0, 1, 3))),
                            draw(st.sampled_from((0, 3, 10))), draw(st.sampled_from((False, False, False, True))))
                    for k in range(draw(st.integers(1, 3))))
    return Case(nodes, tuple(running), pending, draw(st.integers(0, 1)))


# --- the brute force ------------------------------------------------------------------------


def best_key(case: Case) -> tuple[Any, ...]:
    powers = [-(1 << 40) if w.never else w.priority for w in case.pending]
    top = max(powers)
    units: dict[str, list[Running]] = {}
    for r in case.running:
        units.setdefault(r.gang or r.name, []).append(r)
    unit_priority = {u: max(r.priority for r in pods) for u, pods in units.items()}
    evictable = [u for u in units if unit_priority[u] < top]
    tiers = sorted({unit_priority[u] for u in evictable})
    priorities = sorted({w.priority for w in case.pending} | set(tiers), reverse=True)
    best: tuple[Any, ...] | None = None
    for n_evicted in range(len(evictable) + 1):
        for gone in itertools.combinations(evictable, n_evicted):
            evicted = {r.name for u in gone for r in units[u]}
            for where in itertools.product(range(-1, len(case.nodes)), repeat=len(case.pending)):
                if not _valid(case, powers, units, unit_priority, gone, evicted, where):
                    continue
                victims = [r for r in case.running if r.name in evicted]
                placed = [sum(1 for w, n in zip(case.pending, where, strict=True) if n >= 0 and w.priority == p)
                          - sum(1 for r in victims if unit_priority[r.gang or r.name] == p) for p in priorities]
                rank = {p: tiers.index(p) for p in tiers}
                highest = max((rank[unit_priority[r.gang or r.name]] + 1 for r in victims), default=0)
                violations = max(0, sum(1 for r in victims if r.app == "web") - case.allowed)
                cost = sum(rank[unit_priority[r.gang or r.name]] + 1 for r in victims)
                key = (tuple(-x for x in placed), highest, violations, cost)
                best = key if best is None or key < best else best
    assert best is not None
    return best


def _valid(case: Case, powers: list[int], units: dict[str, list[Running]], unit_priority: dict[str, int],
           gone: tuple[str, ...], evicted: set[str], where: tuple[int, ...]) -> bool:
    for i, (cpu, memory) in enumerate(case.nodes):
        here = [k for k, n in enumerate(where) if n == i]
        running = [r for r in case.running if r.node == i]
        for k in here:  # pods of power >= mine, beside every pod I may not evict
            mates = [case.pending[j] for j in here if powers[j] >= powers[k]]
            staying = [r for r in running if r.name not in evicted or unit_priority[r.gang or r.name] >= powers[k]]
            if not _fits((cpu, memory), mates, staying):
                return False
    for u in gone:  # every unit evicted for a placed pod of higher power where one of its pods runs
        nodes = {r.node for r in units[u]}
        if not any(where[k] in nodes and powers[k] > unit_priority[u] for k in range(len(where))):
            return False
    return True


def _fits(capacity: tuple[int, int], placed: list[Waiting], staying: list[Running]) -> bool:
    for r, total in enumerate(capacity):
        need = sum((w.cpu, w.memory)[r] for w in placed)
        if need > 0 and need + sum((s.cpu, s.memory)[r] for s in staying) > total:
            return False
    return True


def kubeplace_key(case: Case, backend: str) -> tuple[tuple[Any, ...], str]:
    config = Configuration()
    planned = make_preemption_plan(case.snapshot(), config, config.profiles[0],
                                   SolverSettings(backend=backend, time_limit=10, workers=1, seed=0))
    assert planned.violations == (), planned.violations
    plan = planned.plan
    priority = {w.name: w.priority for w in case.pending}
    preemption = plan.summary.preemption
    assert preemption is not None
    victims = {v.name for v in plan.preemptions}
    by_name = {r.name: r for r in case.running}
    units: dict[str, list[Running]] = {}
    for r in case.running:
        units.setdefault(r.gang or r.name, []).append(r)
    top = max((-(1 << 40) if w.never else w.priority) for w in case.pending)
    unit_priority = {u: max(r.priority for r in pods) for u, pods in units.items()}
    tiers = sorted({p for p in unit_priority.values() if p < top})
    priorities = sorted(set(priority.values()) | set(tiers), reverse=True)
    placed = tuple(-sum(1 for p in plan.placements if priority[p.name] == q)
                   + sum(1 for v in victims if unit_priority[by_name[v].gang or v] == q) for q in priorities)
    highest = max((tiers.index(unit_priority[by_name[v].gang or v]) + 1 for v in victims), default=0)
    violations = max(0, sum(1 for v in victims if by_name[v].app == "web") - case.allowed)
    cost = sum(tiers.index(unit_priority[by_name[v].gang or v]) + 1 for v in victims)
    return (placed, highest, violations, cost), preemption.status


@pytest.mark.parametrize("backend", BACKENDS)
@EXAMPLES
@given(case=cases())
def test_victims_are_the_proven_optimum_of_the_stated_order(case: Case, backend: str) -> None:
    found, status = kubeplace_key(case, backend)
    assert status == "optimal"
    assert found == best_key(case), case
