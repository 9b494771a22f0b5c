"""Which running pods may move: every rule with a case, and its reason."""

from __future__ import annotations

from typing import Any

import pytest

from kubeplace.kube.errors import InputError
from kubeplace.kube.gpu_conventions import GpuConventions
from kubeplace.kube.objects import Snapshot
from kubeplace.kube.parse import parse_pod
from kubeplace.models.config import Configuration, Profile, instantiate
from kubeplace.rebalance import movable as mv
from kubeplace.rebalance.movable import Rules, exclusion, facts_of
from kubeplace_bench.rebalance_clusters import node, pod


def _reason(manifest: dict[str, Any], rules: Rules | None = None) -> str:
    """As ``build_layout`` reads a running pod: the default plugins say what they cannot model."""
    plugins = instantiate(Configuration(), Profile(), Snapshot((), (), ()))
    (pod,) = plugins.mark_unmodelled(Snapshot((), (), (parse_pod(manifest),))).bound
    return exclusion(pod, facts_of(manifest), rules or Rules(), frozenset({"n1"}))


def running(**kwargs: Any) -> dict[str, Any]:
    return pod("p", kwargs.pop("namespace", "app"), 100, 64, node_name="n1", **kwargs)


def with_meta(manifest: dict[str, Any], **meta: Any) -> dict[str, Any]:
    manifest["metadata"].update(meta)
    return manifest


def test_an_ordinary_replicaset_pod_may_move() -> None:
    assert _reason(running()) == ""


@pytest.mark.parametrize(("manifest", "reason"), [
    (with_meta(running(), annotations={mv.MIRROR_ANNOTATION: "x"}), mv.MIRROR),
    (with_meta(running(), annotations={mv.SOURCE_ANNOTATION: "file"}), mv.STATIC),
    (running(owner=("Node", "n1")), mv.STATIC),
    (running(owner=("DaemonSet", "agent")), mv.DAEMONSET),
    (with_meta(running(), deletionTimestamp="2024-01-01T00:00:00Z"), mv.DELETING),
    (running(owner=None), mv.BARE),
    (with_meta(running(), annotations={mv.EVICT_ANNOTATION: "false"}), mv.USER_ANNOTATION),
    (pod("p", "app", 100, 64, owner=("ReplicaSet", "rs")), mv.NOT_RUNNING),
    (pod("p", "app", 100, 64, node_name="elsewhere"), mv.NOT_RUNNING),
    (with_meta(running(), labels={"scheduling.x-k8s.io/pod-group": "train"}), mv.GANG),
    (with_meta(running(), annotations={"scheduling.k8s.io/group-name": "train"}), mv.GANG),
    (with_meta(running(), labels={"kubeplace.io/gang": "train"}), mv.GANG),
])  # fmt: skip
def test_pods_that_never_move(manifest: dict[str, Any], reason: str) -> None:
    assert _reason(manifest) == reason


def test_system_critical_priority_stays() -> None:
    manifest = running()
    manifest["spec"]["priority"] = 2_000_000_000
    assert _reason(manifest) == mv.CRITICAL
    manifest["spec"]["priority"] = 1_999_999_999
    assert _reason(manifest) == ""


def test_local_storage_stays_unless_allowed() -> None:
    for volume in ({"name": "scratch", "emptyDir": {}}, {"name": "logs", "hostPath": {"path": "/var/log"}}):
        manifest = running(volumes=[volume])
        assert _reason(manifest).startswith(mv.LOCAL_STORAGE)
        assert _reason(manifest, Rules(allow_local_storage=True)) == ""
    assert _reason(running(volumes=[{"name": "cfg", "configMap": {"name": "c"}}])) == ""


def test_user_exclusions_by_namespace_and_selector_and_scope() -> None:
    manifest = running(labels={"tier": "db"})
    assert _reason(manifest, Rules(exclude_namespaces=frozenset({"app"}))).startswith(mv.USER_NAMESPACE)
    assert _reason(manifest, Rules(exclude_selector="tier=db")) == mv.USER_SELECTOR
    assert _reason(manifest, Rules(exclude_selector="tier=web")) == ""
    assert _reason(manifest, Rules(only_namespaces=frozenset({"other"}))) == mv.OUT_OF_SCOPE
    assert _reason(manifest, Rules(only_selector="tier!=db")) == mv.OUT_OF_SCOPE


def test_unmodelled_rules_and_gpu_shares_stay() -> None:
    anti = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"topologyKey": "kubernetes.io/hostname", "labelSelector": {"matchLabels": {"a": "b"}}}]}}
    assert _reason(running(affinity=anti)).startswith("placement rule not modelled")
    share = running()
    share["spec"]["containers"][0]["resources"] = {"requests": {"koordinator.sh/gpu-core": "50"},
                                                   "limits": {"koordinator.sh/gpu-core": "50"}}
    assert _reason(share) == mv.GPU_SHARE
    claimed = running()
    claimed["spec"]["resourceClaims"] = [{"name": "gpu", "resourceClaimName": "c"}]
    assert _reason(claimed) == mv.RESOURCE_CLAIMS  # its devices are allocated for its node


def test_a_share_of_the_configured_gpu_conventions_stays() -> None:
    """The rebalancer reads the configured conventions, not the default names."""
    manifest = running()
    manifest["spec"]["containers"][0]["resources"] = {"requests": {"example.com/share": "50"},
                                                      "limits": {"example.com/share": "50"}}
    plugins = instantiate(Configuration(), Profile(), Snapshot((), (), ()))
    (bound,) = plugins.mark_unmodelled(Snapshot((), (), (parse_pod(manifest),))).bound
    gpu = GpuConventions(percent_of_gpus=("example.com/share",))
    assert exclusion(bound, facts_of(manifest), Rules(), frozenset({"n1"}), gpu) == mv.GPU_SHARE
    assert exclusion(bound, facts_of(manifest), Rules(), frozenset({"n1"})) == ""


def test_a_malformed_selector_is_an_input_error() -> None:
    with pytest.raises(InputError):
        Rules(exclude_selector="a in (b").check()


def test_node_helper_is_a_node() -> None:
    assert node("n1", 1000, 1024)["kind"] == "Node"
