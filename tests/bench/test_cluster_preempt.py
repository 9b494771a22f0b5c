"""The preemption scenarios of `kubeplace bench cluster` and how a copy is measured, without a
control plane: the scenarios are what their docstrings say (kubeplace's own plan of each, on
paper, evicts only what they claim is needed), and victims, wasted evictions and gangs are
counted from the final pods and the Preempted events of either scheduler."""

from __future__ import annotations

import copy
from typing import Any

from kubeplace.kube.parse import build_snapshot
from kubeplace.models.config import Configuration, SolverSettings
from kubeplace.plan.preemption_plan import make_preemption_plan
from kubeplace_bench.cluster_preempt import PREEMPTION_SCENARIOS, preemption_measure
from kubeplace_bench.cluster_scenarios import Scenario


def on_paper(scenario: Scenario) -> Any:
    """kubeplace's plan of the scenario with the background running and the pods pending."""
    objects: list[Any] = list(scenario.nodes)
    objects += [{"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": n}, "value": v}
                for n, v in scenario.priority_classes]
    for group in scenario.background:
        for m in group:
            m = copy.deepcopy(m)
            m["metadata"]["namespace"] = "bench"
            m["status"] = {"phase": "Running"}
            objects.append(m)
    for m in scenario.pods:
        m = copy.deepcopy(m)
        m["metadata"]["namespace"] = "bench"
        m["spec"]["schedulerName"] = "kubeplace"
        objects.append(m)
    snapshot = build_snapshot([(o, "bench") for o in objects])
    config = Configuration()
    planned = make_preemption_plan(snapshot, config, config.profiles[0], SolverSettings(time_limit=20, workers=1))
    assert planned.violations == ()
    return planned.plan


def test_node_choice_needs_only_the_cheap_victims() -> None:
    scenario = PREEMPTION_SCENARIOS["preempt-node-choice"](0)
    plan = on_paper(scenario)
    assert len(plan.placements) == 15 and {v.priority for v in plan.preemptions} == {100}
    assert len(plan.preemptions) == 15


def test_the_gpu_gang_cannot_run_and_evicts_nobody() -> None:
    plan = on_paper(PREEMPTION_SCENARIOS["preempt-gpu-gang"](0))
    assert plan.placements == () and plan.preemptions == ()


def test_the_gpu_gang_that_fits_evicts_eight_whole_nodes_of_priority_100() -> None:
    plan = on_paper(PREEMPTION_SCENARIOS["preempt-gpu-gang-fits"](0))
    assert len(plan.placements) == 8 and len(plan.preemptions) == 64
    assert {v.priority for v in plan.preemptions} == {100}


def test_many_preemptors_need_only_victims_of_priority_100() -> None:
    plan = on_paper(PREEMPTION_SCENARIOS["preempt-many"](0))
    assert len(plan.placements) == 40 and len(plan.preemptions) == 40
    assert {v.priority for v in plan.preemptions} == {100}


def test_measure_victims_wasted_and_gangs_for_both_schedulers() -> None:
    scenario = PREEMPTION_SCENARIOS["preempt-gpu-gang"](0)
    background = [m["metadata"]["name"] for g in scenario.background for m in g]
    members = [m["metadata"]["name"] for m in scenario.pods]
    gone = background[16:24]  # the kube-scheduler freed gpu-02 for one member
    pods = [{"metadata": {"name": n, "uid": f"u-{n}"}, "spec": {"nodeName": "x"}} for n in background if n not in gone]
    pods += [{"metadata": {"name": n, "uid": f"u-{n}"}, "spec": {"nodeName": "gpu-02" if n == members[0] else ""}}
             for n in members]
    events = [{"reason": "Preempted", "involvedObject": {"name": v},
               "message": f"Preempted by pod u-{members[0]} on node gpu-02"} for v in gone]
    measured = preemption_measure(scenario, pods, events)
    assert measured == {"victims": 8, "victim_priorities": {"100": 8}, "highest_victim_priority": 100,
                        "preemptors": 8, "preemptors_bound": 1, "preemptors_running_usefully": 0,
                        "wasted_evictions": 8}
    events = [{"reason": "Preempted", "involvedObject": {"name": v},
               "message": f"Preempted by bench/{members[0]}, bench/{members[1]} on node gpu-02"} for v in gone]
    assert preemption_measure(scenario, pods, events)["wasted_evictions"] == 8
