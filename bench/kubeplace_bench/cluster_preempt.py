"""Preemption scenarios for ``kubeplace bench cluster``, and how a copy's preemptions are measured.

A preemption scenario has *background* pods, bound by name to their nodes before the pending pods
arrive (in groups a little over a second apart, so that their start times, the kube-scheduler's
last tie-break, differ), and PriorityClasses the runner creates for the run. Both copies start
from the same running background; the kube-scheduler (default profile, DefaultPreemption) and
``kubeplace serve`` (preemption on) then see the same preemptors arrive.

Measured on the final state and the ``Preempted`` events (the kube-scheduler names its preemptor
by uid, kubeplace by ``namespace/name``): victims (background pods gone) and their priorities,
preemptors bound, and *wasted evictions*: victims evicted for pods none of which ended up running
usefully (not bound, or bound as part of a gang that is not complete).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from kubeplace.kube.objects import GPU
from kubeplace_bench.cluster_scenarios import Manifest, Scenario, node, pod

PRIORITY_CLASSES = (("bench-p100", 100), ("bench-p300", 300), ("bench-p500", 500), ("bench-p1000", 1000),
                    ("bench-p5000", 5000))
GANG_LABEL, GANG_MIN = "kubeplace.io/gang", "kubeplace.io/gang-min-member"
_BY_UID = re.compile(r"^Preempted by pod (\S+) on node (\S+)")
_BY_NAME = re.compile(r"^Preempted by (.+) on node (\S+)$")


def running(index: int, shape: str, node_name: str, cpu_m: int, priority: int, gpus: int = 0) -> Manifest:
    """A background pod bound to ``node_name`` at creation, of priority class bench-p<priority>."""
    manifest = pod(index, shape, cpu_m, 1024, gpus)
    manifest["metadata"]["name"] = f"bg{index:05d}-{shape}"
    manifest["spec"].update(nodeName=node_name, priorityClassName=f"bench-p{priority}",
                            terminationGracePeriodSeconds=1)
    return manifest


def pending(index: int, shape: str, cpu_m: int, priority: int, gpus: int = 0, gang: str = "",
            min_member: int = 0) -> Manifest:
    manifest = pod(index, shape, cpu_m, 1024, gpus)
    manifest["spec"]["priorityClassName"] = f"bench-p{priority}"
    if gang:
        manifest["metadata"]["labels"][GANG_LABEL] = gang
        manifest["metadata"]["annotations"] = {GANG_MIN: str(min_member)}
    return manifest


def node_choice(seed: int) -> Scenario:
    """(a) 150 full nodes of 4 CPU: 15 run a pod of priority 100, the others one of priority 500;
    15 pods of priority 1000 (4 CPU) arrive. Evicting the 15 pods of priority 100 is enough. The
    kube-scheduler evaluates at most max(10% of the nodes, 100) candidate nodes per preemption,
    from a random offset, so it misses some of the cheap nodes and evicts pods of priority 500."""
    rng = np.random.default_rng([seed, 11])
    n, cheap_count = 150, 15
    cheap = set(rng.choice(n, size=cheap_count, replace=False).tolist())
    nodes = [node(f"pre-{i:03d}", 4, 16) for i in range(n)]
    background = tuple(running(i, "p100" if i in cheap else "p500", f"pre-{i:03d}", 4000, 100 if i in cheap else 500)
                       for i in range(n))
    pods = [pending(k, "high", 4000, 1000) for k in range(cheap_count)]
    return Scenario("preempt-node-choice", f"{n} full nodes ({cheap_count} with a pod of priority 100, the rest 500); "
                    f"{cheap_count} pods of priority 1000", tuple(nodes), tuple(pods),
                    background=(background,), priority_classes=PRIORITY_CLASSES)


def gpu_gang(seed: int, nodes_count: int = 8) -> Scenario:
    """(b) 8 nodes of 8 GPUs, full of 1-GPU pods: of priority 100, but for one GPU on each of 2
    nodes held by a pod of priority 5000. An 8-pod gang of priority 1000 (minMember 8) needs 8 whole
    nodes (8 GPUs per pod): only 6 can be freed, so it cannot run. kubeplace evicts nobody; the
    kube-scheduler, which knows no gangs, evicts for the members that fit and leaves the others
    pending, its evictions wasted. With ``nodes_count`` 10 (preempt-gpu-gang-fits) 8 nodes can be
    freed and the gang runs: 64 victims of priority 100 are needed."""
    del seed
    nodes = [node(f"gpu-{i:02d}", 64, 256, gpus=8) for i in range(nodes_count)]
    background: list[Manifest] = []
    for i in range(nodes_count):
        for g in range(8):
            priority = 5000 if i < 2 and g == 0 else 100
            background.append(running(len(background), f"p{priority}", f"gpu-{i:02d}", 1000, priority, gpus=1))
    pods = [pending(k, "gang", 4000, 1000, gpus=8, gang="train", min_member=8) for k in range(8)]
    name = "preempt-gpu-gang" if nodes_count == 8 else "preempt-gpu-gang-fits"
    return Scenario(name, f"{nodes_count} nodes x 8 GPUs full of 1-GPU pods (2 GPUs held at priority 5000); "
                    "an 8-pod gang of 8-GPU pods, priority 1000", tuple(nodes), tuple(pods),
                    background=(tuple(background),), priority_classes=PRIORITY_CLASSES)


def gpu_gang_fits(seed: int) -> Scenario:
    return gpu_gang(seed, nodes_count=10)


def many(seed: int) -> Scenario:
    """(c) 40 nodes of 4 CPU: 20 run two 2-CPU pods (priority 100 and 300), then, a second later,
    the other 20 one 4-CPU pod of priority 100. 20 pods of 2 CPU and then 20 of 4 CPU (priority
    1000) arrive at once. One at a time, the kube-scheduler sends each 2-CPU pod where it evicts a
    single pod of priority 100, the youngest (the 4-CPU ones), so the 4-CPU pods must then evict
    both pods of the other nodes, priority 300 included. Together: each 2-CPU pod evicts the 2-CPU
    pod of priority 100, each 4-CPU pod a 4-CPU one: 40 victims, all of priority 100."""
    del seed
    nodes = [node(f"many-{i:02d}", 4, 16) for i in range(40)]
    older: list[Manifest] = []
    for i in range(20):
        older.append(running(len(older), "p100s", f"many-{i:02d}", 2000, 100))
        older.append(running(len(older), "p300s", f"many-{i:02d}", 2000, 300))
    younger = tuple(running(100 + i, "p100b", f"many-{20 + i:02d}", 4000, 100) for i in range(20))
    pods = [pending(k, "small", 2000, 1000) for k in range(20)]
    pods += [pending(20 + k, "big", 4000, 1000) for k in range(20)]
    return Scenario("preempt-many", "40 full nodes of 4 CPU (20 with 2 pods of priority 100 and 300, 20 with one of "
                    "100); 20 pods of 2 CPU and 20 of 4 CPU, priority 1000, at once", tuple(nodes), tuple(pods),
                    background=(tuple(older), younger), priority_classes=PRIORITY_CLASSES)


PREEMPTION_SCENARIOS = {"preempt-node-choice": node_choice, "preempt-gpu-gang": gpu_gang,
                        "preempt-gpu-gang-fits": gpu_gang_fits, "preempt-many": many}


def preemption_measure(scenario: Scenario, pods: Sequence[Mapping[str, Any]],
                       events: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Victims, their priorities, preemptors bound and wasted evictions, from the final pods and
    the ``Preempted`` events of one copy."""
    by_name = {p["metadata"]["name"]: p for p in pods}
    uid_to_name = {p["metadata"].get("uid", ""): p["metadata"]["name"] for p in pods}
    background = {m["metadata"]["name"]: int(m["spec"]["priorityClassName"].removeprefix("bench-p"))
                  for group in scenario.background for m in group}
    victims = sorted(name for name in background if name not in by_name)
    preemptors = [m["metadata"]["name"] for m in scenario.pods]
    bound = {name for name in preemptors if (by_name.get(name, {}).get("spec") or {}).get("nodeName")}
    useful = _useful(scenario, bound)
    causes: dict[str, set[str]] = {}
    for event in events:
        if event.get("reason") != "Preempted":
            continue
        victim = (event.get("involvedObject") or {}).get("name", "")
        causes.setdefault(victim, set()).update(_preemptors(str(event.get("message", "")), uid_to_name))
    wasted = [v for v in victims if not (causes.get(v, set()) & useful)]
    priorities: dict[str, int] = {}
    for v in victims:
        priorities[str(background[v])] = priorities.get(str(background[v]), 0) + 1
    return {"victims": len(victims), "victim_priorities": dict(sorted(priorities.items())),
            "highest_victim_priority": max((background[v] for v in victims), default=None),
            "preemptors": len(preemptors), "preemptors_bound": len(bound), "preemptors_running_usefully": len(useful),
            "wasted_evictions": len(wasted)}


def _useful(scenario: Scenario, bound: set[str]) -> set[str]:
    """Bound preemptors whose gang (if any) has every minMember member bound."""
    gangs: dict[str, list[str]] = {}
    for m in scenario.pods:
        gang = (m["metadata"].get("labels") or {}).get(GANG_LABEL, "")
        if gang:
            gangs.setdefault(gang, []).append(m["metadata"]["name"])
    out = set(bound)
    for members in gangs.values():
        need = int(next(m for m in scenario.pods if m["metadata"]["name"] == members[0])["metadata"]
                   ["annotations"][GANG_MIN])
        if sum(1 for name in members if name in bound) < need:
            out -= set(members)
    return out


def _preemptors(message: str, uid_to_name: Mapping[str, str]) -> set[str]:
    found = _BY_UID.match(message)
    if found:
        return {uid_to_name.get(found.group(1), found.group(1))}
    found = _BY_NAME.match(message)
    if found:
        return {key.strip().rpartition("/")[2] for key in found.group(1).split(",")}
    return set()


__all__ = ["GPU", "PREEMPTION_SCENARIOS", "preemption_measure"]
