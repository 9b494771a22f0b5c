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

from collections.abc import Iterable, Mapping, Sequence
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
from kubeplace.kube.objects import Node, Pod

KUEUE_WORKLOAD = "kueue.x-k8s.io/workload"
TOPOLOGY_GATE = "kueue.x-k8s.io/topology"
PODSET_LABEL = "kueue.x-k8s.io/podset"
KIND = ("kueue.x-k8s.io", "Workload")
API = ("kueue.x-k8s.io", "v1beta1", "workloads")

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
