"""The shared scenario catalogue in ``fixtures/scenarios``: loading, planning, probing backends.

Each scenario is a folder with ``cluster.yaml`` (Kubernetes Node/Pod/Namespace objects) and
``expected.yaml``::

    description: what the scenario covers and why the answer is what it is
    profile: balance | binpack          # optional, default balance
    config: {PlacementConfiguration}    # optional, inline
    rule_plugin: NodeAffinity           # optional: the filter plugin enforcing the rule covered
    preempt: true                       # optional: planned as ``plan --preempt``
    preference_plugin: PodTopologySpread   # optional: the score plugin whose preference is covered
    expect:
      pods_placed: 2                    # exact
      pods_unplaced: 1                  # exact, not counting pods left to the default scheduler
      placed_weight: 3
      placed: {ns/name: node}           # pods whose node is forced
      unplaced: [ns/name]               # exactly these (not counting left_to_default_scheduler)
      left_to_default_scheduler: [ns/name]   # exactly these
      not_planned: [ns/name]            # neither placed nor reported unplaced
      pods_per_node: {node: count}      # pending pods placed on each listed node
      nodes_receiving: 1                # distinct nodes receiving pending pods
      objective: 0.0                    # exact objective, where the optimum is unique
      reason_contains: {ns/name: "Insufficient cpu"}
      reason_contains_any: "Too many pods"   # in the reasons of some unplaced pod
      greedy_pods_placed: 4             # what the better greedy heuristic places
      victims: [ns/name]                # exactly the pods evicted (with preempt)
      preempted_for: {ns/name: [ns/name]}   # the pods a victim is evicted for
"""

from __future__ import annotations

import dataclasses
import functools
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from kubeplace.kube.files import load_snapshot
from kubeplace.kube.objects import Snapshot
from kubeplace.models.config import Configuration, Profile, SolverSettings
from kubeplace.models.config_load import parse_configuration
from kubeplace.models.framework import Objective
from kubeplace.models.linear import LinearBuilder
from kubeplace.plan.pipeline import Planned, make_plan
from kubeplace.plan.preemption_plan import make_preemption_plan, verify_preempting
from kubeplace.plan.verify import Violation
from kubeplace.solver.backends import available_backends, get_backend
from kubeplace.solver.backends.base import Status
from kubeplace.solver.budget import Budget

SCENARIOS_DIR = Path(__file__).resolve().parent.parent / "fixtures" / "scenarios"


@dataclass(frozen=True)
class Scenario:
    name: str
    folder: Path
    description: str
    profile_name: str | None
    config_doc: dict[str, Any] | None
    rule_plugin: str | None
    expect: dict[str, Any]
    preempt: bool = False
    preference_plugin: str | None = None

    def snapshot(self) -> Snapshot:
        return load_snapshot([self.folder / "cluster.yaml"])

    def config(self, disabled: tuple[str, ...] = (), unweighted: tuple[str, ...] = ()) -> tuple[Configuration, Profile]:
        """The scenario's configuration and profile (objective from ``profile``), with
        ``disabled`` plugins removed and the score weight of the ``unweighted`` ones set to 0."""
        config = (Configuration() if self.config_doc is None
                  else parse_configuration(self.config_doc, f"{self.folder}/expected.yaml"))
        first = config.profiles[0]
        objective = Objective(self.profile_name) if self.profile_name else first.objective
        args = dict(first.plugin_args)
        for name in unweighted:
            args[name] = dataclasses.replace(args.get(name) or config.registry[name].args_type(), weight=0)
        profile = dataclasses.replace(first, objective=objective, disabled=first.disabled + disabled, plugin_args=args)
        return dataclasses.replace(config, profiles=(profile, *config.profiles[1:])), profile


def scenario_names() -> list[str]:
    return sorted(p.name for p in SCENARIOS_DIR.iterdir() if (p / "expected.yaml").is_file())


@functools.cache
def load_scenario(name: str) -> Scenario:
    folder = SCENARIOS_DIR / name
    doc = yaml.safe_load((folder / "expected.yaml").read_text())
    return Scenario(name, folder, doc["description"], doc.get("profile"), doc.get("config"),
                    doc.get("rule_plugin"), doc["expect"], bool(doc.get("preempt")), doc.get("preference_plugin"))


def plan_scenario(scenario: Scenario, backend: str, disabled: tuple[str, ...] = (),
                  unweighted: tuple[str, ...] = ()) -> Planned:
    snapshot = scenario.snapshot()
    config, profile = scenario.config(disabled, unweighted)
    planner = make_preemption_plan if scenario.preempt else make_plan
    return planner(snapshot, config, profile, SolverSettings(backend=backend, time_limit=10, workers=1, seed=0))


def verify_planned(scenario: Scenario, planned: Planned) -> list[Violation]:
    """The verifier's findings for ``planned``, against the scenario's full rules, GPU devices included,
    on the cluster its victims leave, and its victims."""
    config, profile = scenario.config()
    return verify_preempting(scenario.snapshot(), planned.plan.placements, planned.plan.preemptions, config, profile)


@functools.cache
def backend_problem(name: str) -> str | None:
    """Why backend ``name`` cannot solve here (e.g. highspy not loadable beside OR-tools), or None.

    Probes with a one-variable model, since ``MilpBackend.solve`` reports an unusable solver as
    ``Status.ERROR`` with the reason in ``message`` rather than raising.
    """
    b = LinearBuilder()
    x = b.add_vars(np.array([0], dtype=np.int64), np.array([1], dtype=np.int64))
    b.add_objective(x, np.array([1], dtype=np.int64))
    result = get_backend(name).solve(b.build(maximize=True), SolverSettings(workers=1, seed=0), Budget.of(5))
    if result.status == Status.ERROR:
        return result.message or f"{name}: status error"
    if result.status != Status.OPTIMAL or result.objective != 1:
        return f"{name}: probe model answered {result.status.value}, objective {result.objective}"
    return None


def usable_backends() -> list[str]:
    return [b for b in available_backends() if backend_problem(b) is None]
