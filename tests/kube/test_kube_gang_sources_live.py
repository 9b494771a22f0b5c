"""The live reader lists every gang source kubeplace reads, as from files."""

from __future__ import annotations

from typing import Any

from kubeplace.kube.gangs import GANG_APIS
from kubeplace.kube.live import load_live_snapshot
from tests.builders import pod
from tests.kube.test_kube_preemption_fields import Reader


def group(api: str, name: str, spec: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": api, "kind": "PodGroup", "metadata": {"name": name, "namespace": "ml"}, "spec": spec}


class GangReader(Reader):
    """A server serving the Workload API in both versions (each PodGroup listed twice) and KAI's."""

    def __init__(self) -> None:
        workload = {"schedulingPolicy": {"gang": {"minCount": 4}},
                    "schedulingConstraints": {"topology": [{"key": "r"}]}}
        self.served = {
            (api, version, "podgroups"): [group(f"{api}/{version}", name, spec)]
            for api, version, name, spec in (("scheduling.k8s.io", "v1alpha2", "a", workload),
                                             ("scheduling.k8s.io", "v1beta1", "a", workload),
                                             ("scheduling.run.ai", "v2alpha2", "b", {"minMember": 2}))}
        self.asked: list[tuple[str, str, str]] = []

    def list_objects(self, group: str, version: str, plural: str) -> list[dict[str, Any]]:
        self.asked.append((group, version, plural))
        return self.served.get((group, version, plural), [])

    def list_pods(self, namespace: str | None = None, label_selector: str | None = None,
                  field_selector: str | None = None) -> list[dict[str, Any]]:
        return [pod("w", "ml").cpu("1").spec("schedulingGroup", {"podGroupName": "a"}).manifest()]


def test_the_live_reader_lists_the_workload_api_and_kai_podgroups() -> None:
    reader = GangReader()
    snapshot = load_live_snapshot(reader)
    assert set(GANG_APIS) <= set(reader.asked)
    assert [(g.key.name, g.origin, g.min_member, g.topology_key) for g in snapshot.pod_groups] == [
        ("a", "scheduling.k8s.io", 4, "r"), ("b", "scheduling.run.ai", 2, "")]
    assert snapshot.pending[0].scheduling_group == "a"
