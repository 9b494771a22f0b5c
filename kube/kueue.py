"""Room promised by Kueue to the pods it has not ungated yet.

With topology-aware scheduling, Kueue admits a Workload with a ``topologyAssignment`` per PodSet
(``status.admission.podSetAssignments[].topologyAssignment``, kueue ``apis/kueue/v1beta1``): how
many pods go to each domain, a domain being the values of node labels (``levels``; only
``kubernetes.io/hostname`` when the topology has it). The job's pods are created with the
scheduling gate ``kueue.x-k8s.io/topology``; Kueue lifts it pod by pod, setting the nodeSelector of
the pod's domain. A gated pod is not pending yet, but its room is promised: kubeplace plans a
stand-in for it (``Pod.reserved_for`` = the gated pod) pinned to a domain whose count its
PodSet's ungated and running pods have not used up, in the Workload's gang, so that no other pod
takes it. Without the Workload object (or without a topology assignment) gated pods hold no room.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import replace
from typing import Any

from kubeplace.kube.errors import (
    INT32_MAX,
    InputError,
    expect_int,
    expect_list,
    expect_mapping,
    expect_name,
    expect_namespace,
    expect_str,
)
from kubeplace.kube.objects import NO_SCHEDULE, GangKey, Node, Pod, Taint
from kubeplace.kube.taints import untolerated

KUEUE_WORKLOAD = "kueue.x-k8s.io/workload"
TOPOLOGY_GATE = "kueue.x-k8s.io/topology"
PODSET_LABEL = "kueue.x-k8s.io/podset"
TAS_LABEL = "kueue.x-k8s.io/tas"
"""Set by Kueue on the pods of a workload it admitted with topology-aware scheduling."""
KIND = ("kueue.x-k8s.io", "Workload")
API = ("kueue.x-k8s.io", "v1beta1", "workloads")

HOSTNAME = "kubernetes.io/hostname"
LOST = {"node.kubernetes.io/unreachable": "unreachable", "node.kubernetes.io/not-ready": "NotReady"}
"""The node lifecycle controller's taints for a node whose kubelet stopped answering (Ready
Unknown) or that is not ready (Ready False), and what they say of the node."""
UNSCHEDULABLE = Taint("node.kubernetes.io/unschedulable", "", NO_SCHEDULE)
"""What a cordoned node (``spec.unschedulable``) counts as, for Kueue as for the scheduler."""

Domains = tuple[tuple[Mapping[str, str], int], ...]
"""A PodSet's topology assignment: (node selector of the domain, pods there)."""


def parse_workloads(objects: Iterable[tuple[Mapping[str, Any], str]],
                    label: Any) -> dict[tuple[str, str, str], Domains]:
    """The topology assignments of admitted Workloads by (namespace, workload, podset)."""
    found: dict[tuple[str, str, str], Domains] = {}
    for obj, where in objects:
        try:
            meta = expect_mapping(obj.get("metadata"), "metadata")
            namespace = expect_namespace(meta)
            name = expect_name(meta)
            admission = expect_mapping(expect_mapping(obj.get("status"), "status").get("admission"),
                                       "status.admission")
            field = "status.admission.podSetAssignments"
            for index, raw in enumerate(expect_list(admission.get("podSetAssignments"), field)):
                assignment = expect_mapping(raw, f"{field}[{index}]")
                podset = expect_str(assignment.get("name"), f"{field}[{index}].name") or "main"
                topology = assignment.get("topologyAssignment")
                if topology is not None:
                    found[(namespace, name, podset)] = _domains(topology, f"{field}[{index}].topologyAssignment")
        except InputError as error:
            raise error.located(file=where, obj=label(obj)) from None
    return found


def _domains(raw: object, field: str) -> Domains:
    topology = expect_mapping(raw, field)
    levels = [expect_str(level, f"{field}.levels[{i}]")
              for i, level in enumerate(expect_list(topology.get("levels"), f"{field}.levels"))]
    domains = []
    for d, item in enumerate(expect_list(topology.get("domains"), f"{field}.domains")):
        domain = expect_mapping(item, f"{field}.domains[{d}]")
        values = [expect_str(v, f"{field}.domains[{d}].values[{i}]")
                  for i, v in enumerate(expect_list(domain.get("values"), f"{field}.domains[{d}].values"))]
        if len(values) != len(levels):
            raise InputError(f"{len(values)} values for {len(levels)} levels", field=f"{field}.domains[{d}].values",
                             expected="one value per level")
        count = expect_int(domain.get("count"), f"{field}.domains[{d}].count", 0, INT32_MAX)
        domains.append((dict(zip(levels, values, strict=True)), count))
    return tuple(domains)


def gated_stand_ins(pods: Sequence[Pod], nodes: Mapping[str, Node],
                    assignments: Mapping[tuple[str, str, str], Domains]) -> list[Pod]:
    """A stand-in for each pod Kueue admitted but still gates, pinned to a domain of its PodSet's
    assignment that the PodSet's other pods (running there, or pinned there) leave room in."""
    groups: dict[tuple[str, str, str], list[Pod]] = {}
    for pod in pods:
        workload = pod.annotations.get(KUEUE_WORKLOAD, "")
        if workload and not pod.finished and not pod.deleting:
            groups.setdefault((pod.namespace, workload, pod.labels.get(PODSET_LABEL, "main")), []).append(pod)
    out: list[Pod] = []
    for key, members in sorted(groups.items()):
        domains = assignments.get(key)
        gated = sorted((p for p in members if TOPOLOGY_GATE in p.scheduling_gates and not p.node_name),
                       key=lambda p: p.name)
        if not domains or not gated:
            continue
        left = [count for _, count in domains]
        for pod in members:
            if pod in gated:
                continue
            labels = nodes[pod.node_name].labels if pod.node_name in nodes else pod.node_selector
            d = next((d for d, (selector, _) in enumerate(domains)
                      if left[d] > 0 and all(labels.get(k) == v for k, v in selector.items())), None)
            if d is not None:
                left[d] -= 1
        for pod in gated:
            d = next((d for d in range(len(domains)) if left[d] > 0), None)
            if d is None:
                break
            left[d] -= 1
            out.append(replace(pod, name=f"{pod.name}.gated", uid="", scheduling_gates=(), reserved_for=pod.key,
                               node_selector={**pod.node_selector, **domains[d][0]}))
    return out


def lost_host_holds(pending: Sequence[Pod], nodes: Sequence[Node],
                    member_of: Callable[[Pod], GangKey | None]) -> dict[GangKey, str]:
    """Per gang of an admitted Workload whose topology assignment pins pending pods (labelled
    ``kueue.x-k8s.io/tas``; Kueue's nodeSelector ``kubernetes.io/hostname``) to a node they cannot
    run on now, why it waits.

    Kueue's node failure controller treats such a node as failed for the workload (deleted, not
    Ready, or, with ``TASReplaceNodeOnNodeTaints``, an untolerated NoSchedule taint the
    workload's pods there are stuck pending behind, ``spec.unschedulable`` counting as one): it
    lists it in the Workload's ``status.unhealthyNodes`` and looks for a replacement node
    (``TASFailedNodeReplacement``), or evicts the Workload and requeues it (reason
    ``NodeFailures``; at once when more than one node failed). Until then no placement of the
    whole workload exists, and the pods Kueue admitted together wait together."""
    by_host: dict[str, Node] = {}
    pinned: dict[GangKey, dict[str, tuple[str, list[str]]]] = {}
    for pod in pending:
        host = pod.node_selector.get(HOSTNAME, "")
        key = member_of(pod) if host and pod.annotations.get(KUEUE_WORKLOAD) and TAS_LABEL in pod.labels else None
        if key is None:
            continue
        if not by_host:  # (only when a pod is pinned: every cycle's pending pods ask this)
            for node in nodes:
                by_host.setdefault(node.labels.get(HOSTNAME, node.name), node)
        why = _lost(by_host.get(host), pod)
        if why:
            pinned.setdefault(key, {}).setdefault(host, (why, []))[1].append(
                pod.reserved_for.split("/", 1)[1] if pod.reserved_for else pod.name)
    holds: dict[GangKey, str] = {}
    for key, hosts in pinned.items():
        waiting = sum(1 for pod in pending if member_of(pod) == key)
        lost = " and ".join(f"{', '.join(sorted(names))} to node {host}, which {why}"
                            for host, (why, names) in sorted(hosts.items()))
        remedy = (f"to replace node {next(iter(hosts))} or to evict and requeue it (NodeFailures)" if len(hosts) == 1
                  else "to evict and requeue it (NodeFailures: more than one of its nodes failed)")
        holds[key] = (f"Kueue workload {key} waits for Kueue {remedy}: its topology assignment pins {lost}; "
                      f"its {waiting} pending pod{'s' if waiting > 1 else ''}, admitted together, wait together")
    return holds


def _lost(node: Node | None, pod: Pod) -> str:
    """Why ``pod`` cannot run on the node it is pinned to ("" when it can, as far as the node's
    health and taints go)."""
    if node is None:
        return "is not in the cluster (deleted)"
    taints = (*node.taints, *((UNSCHEDULABLE,) if node.unschedulable else ()))
    blocking = untolerated(pod.tolerations, taints)
    for taint in blocking:
        if taint.key in LOST:
            return f"is {LOST[taint.key]} (taint {taint.key}:{taint.effect})"
    if UNSCHEDULABLE in blocking:
        return "is cordoned (spec.unschedulable)"
    if blocking:
        taint = blocking[0]
        shown = f"{taint.key}={taint.value}" if taint.value else taint.key
        return f"has the taint {shown}:{taint.effect} its pods do not tolerate"
    return ""
