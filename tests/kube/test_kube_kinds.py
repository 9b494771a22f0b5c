"""Which objects a snapshot reads: decided by API group and kind; the rest is skipped and counted."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner

from kubeplace.cli.main import main
from kubeplace.kube.errors import InputError
from kubeplace.kube.files import load_snapshot
from tests.builders import node, pod


def obj(api_version: str, kind: str, name: str, **extra: Any) -> dict[str, Any]:
    return {"apiVersion": api_version, "kind": kind, "metadata": {"name": name, "namespace": "default"}, **extra}


REAL_CLUSTER_EXTRAS = [  # what `kubectl get` of a real cluster holds beside nodes and pods
    obj("admissionregistration.k8s.io/v1", "ValidatingWebhookConfiguration", "w"),  # RuntimeClasses are read
    obj("v1", "PodTemplate", "t"),
    obj("v1", "ConfigMap", "c"),
    obj("storage.k8s.io/v1", "VolumeAttributesClass", "vac", driverName="ebs.csi.aws.com"),
    obj("certificates.k8s.io/v1", "CertificateSigningRequest", "csr"),
    obj("kueue.x-k8s.io/v1beta1", "ClusterQueue", "cq"),
    obj("kueue.x-k8s.io/v1beta1", "ResourceFlavor", "rf"),
    obj("kueue.x-k8s.io/v1beta1", "LocalQueue", "lq"),  # Workloads are read (promised room), queues are not
    obj("kubeflow.org/v1", "PyTorchJob", "pt"),
    obj("trainer.kubeflow.org/v1alpha1", "TrainJob", "tj"),
    obj("scheduling.volcano.sh/v1beta1", "Queue", "q1"),
    obj("scheduling.volcano.sh/v1beta1", "Queue", "q2"),
    obj("topology.volcano.sh/v1alpha1", "HyperNode", "h"),
    obj("karpenter.sh/v1alpha1", "NodeOverlay", "no"),  # NodePools and NodeClaims are read, overlays are not
    obj("autoscaling.k8s.io/v1", "VerticalPodAutoscaler", "vpa"),
    obj("serving.kserve.io/v1beta1", "InferenceService", "isvc"),
    obj("ray.io/v1", "RayCluster", "ray"),
    obj("batch/v1", "CronJob", "cj"),  # Jobs are read (their followers are planned), CronJobs are not
    obj("example.com/v1", "Pod", "not-a-pod"),  # a CRD named Pod is not a Pod
    obj("scheduling.run.ai/v2", "Queue", "kai", spec={}),  # KAI's PodGroups are read, its queues are not
]


def write(path: Path, *documents: Any) -> Path:
    path.write_text(yaml.safe_dump_all(documents, sort_keys=False))
    return path


def test_a_real_clusters_dump_is_read_and_the_rest_counted(tmp_path: Path) -> None:
    member = pod("a").cpu("1").label("scheduling.x-k8s.io/pod-group", "kai")  # names a PodGroup the dump lacks
    file = write(tmp_path / "dump.yaml", node("n1").cpu("4").manifest(), member.manifest(), *REAL_CLUSTER_EXTRAS)
    snapshot = load_snapshot([file])
    assert [n.name for n in snapshot.nodes] == ["n1"] and [p.key for p in snapshot.pending] == ["default/a"]
    assert snapshot.pod_groups == ()
    assert snapshot.skipped_kinds["Queue.scheduling.volcano.sh"] == 2
    assert snapshot.skipped_kinds["Pod.example.com"] == 1 and snapshot.skipped_kinds["PodTemplate"] == 1
    assert sum(snapshot.skipped_kinds.values()) == len(REAL_CLUSTER_EXTRAS)


def test_plan_says_in_one_line_what_it_skipped(tmp_path: Path) -> None:
    file = write(tmp_path / "dump.yaml", node("n1").cpu("4").memory("4Gi").manifest(), pod("a").cpu("1").manifest(),
                 *REAL_CLUSTER_EXTRAS)
    result = CliRunner().invoke(main, ["plan", str(file), "-o", "json"])
    assert result.exit_code == 0, result.stderr
    notes = [line for line in result.stderr.splitlines() if line.startswith("note: skipped")]
    assert notes == [f"note: skipped {len(REAL_CLUSTER_EXTRAS)} objects of kinds placement does not read: "
                     "2 Queue.scheduling.volcano.sh, 1 CertificateSigningRequest.certificates.k8s.io, "
                     "1 ClusterQueue.kueue.x-k8s.io, 1 ConfigMap, 1 CronJob.batch, 1 HyperNode.topology.volcano.sh, "
                     "1 InferenceService.serving.kserve.io, 1 LocalQueue.kueue.x-k8s.io and 11 more kinds"]


def test_typed_lists_of_read_kinds_are_expanded(tmp_path: Path) -> None:
    group = {"metadata": {"name": "g", "namespace": "default"}, "spec": {"minMember": 2}}
    typed = {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroupList", "items": [group]}
    file = write(tmp_path / "x.yaml", typed, {"apiVersion": "v1", "kind": "NodeList", "items": [
        {k: v for k, v in node("n1").cpu("4").manifest().items() if k not in ("kind", "apiVersion")}]})
    snapshot = load_snapshot([file])
    assert [str(g.key) for g in snapshot.pod_groups] == ["default/g"] and [n.name for n in snapshot.nodes] == ["n1"]


@pytest.mark.parametrize(("document", "problem"), [
    (obj("v1", "Pods", "p"), "kind: unknown kind 'Pods' in the core API"),  # core v1's kinds are all known
    ({"kind": "RuntimeClass", "metadata": {"name": "x"}}, "apiVersion: missing apiVersion"),
    ({"apiVersion": "node.k8s.io/v1", "metadata": {"name": "x"}}, "missing kind"),
])  # fmt: skip
def test_only_malformed_objects_are_refused(tmp_path: Path, document: Any, problem: str) -> None:
    with pytest.raises(InputError, match=problem):
        load_snapshot([write(tmp_path / "x.yaml", document)])


def test_a_pods_key_is_spelled_once_and_follows_a_replaced_name() -> None:
    import pickle
    from dataclasses import replace

    from kubeplace.kube.objects import Pod

    pod = Pod("ns", "a")
    assert pod.key == "ns/a" and pod.key is pod.key
    assert replace(pod, name="b").key == "ns/b" and replace(pod, namespace="other").key == "other/a"
    again = pickle.loads(pickle.dumps(pod))
    assert again == pod and again.key == "ns/a"
