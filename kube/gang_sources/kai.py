"""KAI-Scheduler's ``scheduling.run.ai/v2alpha2`` PodGroup (pods join with the annotation
``pod-group-name``): ``spec.minMember``, and ``spec.topologyConstraint``'s ``requiredTopologyLevel`` /
``preferredTopologyLevel`` as the (preferred) topology key. It has no quota-like field: ``minMember``
alone holds the group back."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kubeplace.kube.errors import INT32_MAX, expect_int, expect_mapping, expect_str
from kubeplace.kube.gang_sources.source import GangSource, PodGroupKind, annotation_member
from kubeplace.kube.objects import PodGroup

GROUP = "scheduling.run.ai"
VERSION = "v2alpha2"
ANNOTATION = "pod-group-name"


def kai_pod_group(namespace: str, meta: Mapping[str, Any], spec: Mapping[str, Any], group: str) -> PodGroup:
    """A KAI-Scheduler PodGroup: ``minMember`` (an int32 of at least 1, its CRD's ``Minimum=1``; 1 when
    left out or null), and the required and preferred topology levels (node label keys) of
    ``topologyConstraint``. ``subGroups`` are not read."""
    raw = spec.get("minMember")
    min_member = 1 if raw is None else expect_int(raw, "spec.minMember", 1, INT32_MAX)
    topology = expect_mapping(spec.get("topologyConstraint"), "spec.topologyConstraint")
    keys = [expect_str(topology.get(name), f"spec.topologyConstraint.{name}").strip()
            for name in ("requiredTopologyLevel", "preferredTopologyLevel")]
    return PodGroup(namespace, meta["name"], min_member, created=str(meta.get("creationTimestamp", "")),
                    origin=group, topology_key=keys[0], preferred_topology_key=keys[1])


SOURCE = GangSource(GROUP, annotation_member(ANNOTATION), reads=((GROUP, VERSION, "podgroups"),),
                    kind=PodGroupKind(GROUP, (VERSION,), kai_pod_group), annotations=(ANNOTATION,))
