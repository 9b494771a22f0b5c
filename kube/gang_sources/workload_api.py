"""The upstream Workload API's ``scheduling.k8s.io`` PodGroup, v1alpha2 (Kubernetes 1.36) and v1beta1
(1.37), of the same shape (pods join with ``spec.schedulingGroup.podGroupName``):
``spec.schedulingPolicy.gang.minCount`` is its min-member (``basic``: 1, no all-or-nothing) and
``spec.schedulingConstraints.topology[0].key`` its topology key. It has no quota-like field:
``gang.minCount`` is all that holds a group back. A server serving both versions lists each PodGroup
twice; the snapshot keeps one."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kubeplace.kube.errors import INT32_MAX, InputError, expect_int, expect_list, expect_mapping, expect_str
from kubeplace.kube.gang_sources.source import GangSource, PodGroupKind
from kubeplace.kube.objects import GangKey, Pod, PodGroup

GROUP = "scheduling.k8s.io"
VERSIONS = ("v1alpha2", "v1beta1")


def workload_pod_group(namespace: str, meta: Mapping[str, Any], spec: Mapping[str, Any], group: str) -> PodGroup:
    """A Workload API PodGroup (k8s.io/api scheduling v1alpha2 and v1beta1 ``PodGroupSpec``): exactly one
    of ``schedulingPolicy.basic`` (no all-or-nothing) and ``schedulingPolicy.gang``; at most one
    topology constraint (``maxItems=1``), whose key keeps the whole group in one domain."""
    policy = expect_mapping(spec.get("schedulingPolicy"), "spec.schedulingPolicy")
    gang, basic = policy.get("gang"), policy.get("basic")
    if (gang is None) == (basic is None):
        raise InputError("exactly one of basic and gang must be set", field="spec.schedulingPolicy",
                         expected="basic: {} or gang: {minCount: N}")
    min_member = 1
    if gang is not None:
        field = "spec.schedulingPolicy.gang.minCount"
        min_member = expect_int(expect_mapping(gang, "spec.schedulingPolicy.gang").get("minCount"), field, 1, INT32_MAX)
    constraints = expect_mapping(spec.get("schedulingConstraints"), "spec.schedulingConstraints")
    topology = expect_list(constraints.get("topology"), "spec.schedulingConstraints.topology")
    if len(topology) > 1:
        raise InputError(f"{len(topology)} topology constraints", field="spec.schedulingConstraints.topology",
                         expected="at most one")
    key = ""
    if topology:
        field = "spec.schedulingConstraints.topology[0].key"
        key = expect_str(expect_mapping(topology[0], "spec.schedulingConstraints.topology[0]").get("key"), field)
        if not key.strip():
            raise InputError("empty key", field=field, expected="a node label key")
    return PodGroup(namespace, meta["name"], min_member, created=str(meta.get("creationTimestamp", "")),
                    origin=group, topology_key=key.strip())


class WorkloadKind(PodGroupKind):
    def missing(self, namespace: str, name: str) -> str:
        """In the kube-scheduler's words (GangScheduling's PreEnqueue)."""
        return f'waiting for pods\'s pod group "{name}" to appear in scheduling queue'


def _member(pod: Pod) -> GangKey | None:
    return GangKey(pod.namespace, pod.scheduling_group) if pod.scheduling_group else None


SOURCE = GangSource(GROUP, _member, reads=tuple((GROUP, version, "podgroups") for version in reversed(VERSIONS)),
                    kind=WorkloadKind(GROUP, VERSIONS, workload_pod_group))
