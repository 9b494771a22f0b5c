"""The Helm chart deploy/chart/kubeplace: lint, render with default and non-default values, and the
raw manifests in deploy/ are exactly what it renders (one source)."""

from __future__ import annotations

import subprocess
import tomllib
from pathlib import Path
from typing import Any

import click
import pytest
import yaml

from kubeplace.cli.main import main
from kubeplace.models.config_load import load_configuration
from tests.install.helm import CHART, CUSTOM_VALUES, REPO_ROOT, find, helm, locate_helm, render

DEFAULT_NS = "kubeplace-system"

pytestmark = pytest.mark.helm


@pytest.fixture(scope="module")
def helm_bin() -> Path:
    return locate_helm()


@pytest.fixture(scope="module")
def default(helm_bin: Path) -> list[dict[str, Any]]:
    return render(helm_bin, "kubeplace", DEFAULT_NS)


@pytest.fixture(scope="module")
def custom(helm_bin: Path) -> list[dict[str, Any]]:
    return render(helm_bin, "sched", "ops", "--values", str(CUSTOM_VALUES))


def _args(container: dict[str, Any]) -> list[str]:
    return [str(a) for a in container["args"]]


def _parses(args: list[str]) -> click.Context:
    """The container's args as the CLI parses them (every flag exists, every value is accepted)."""
    command = main.get_command(click.Context(main), args[0])
    assert command is not None, args[0]
    return command.make_context(args[0], args[1:])


def test_helm_lint_default_and_non_default_values(helm_bin: Path) -> None:
    for extra in ([], ["--values", str(CUSTOM_VALUES)]):
        out = helm(helm_bin, "lint", "--strict", str(CHART), *extra)
        assert "0 chart(s) failed" in out


def test_the_raw_manifests_are_the_chart_rendered(helm_bin: Path, tmp_path: Path) -> None:
    subprocess.run(["bash", str(REPO_ROOT / "deploy" / "generate.sh"), str(tmp_path)], check=True,
                   env={"HELM": str(helm_bin), "PATH": "/usr/bin:/bin"}, timeout=120)
    for name in ("rbac.yaml", "serve.yaml", "rebalance-cronjob.yaml", "webhook.yaml"):
        committed = (REPO_ROOT / "deploy" / name).read_text()
        assert committed == (tmp_path / name).read_text(), f"deploy/{name} is stale: run deploy/generate.sh"


def test_chart_version_and_default_image_follow_the_package(default: list[dict[str, Any]]) -> None:
    chart = yaml.safe_load((CHART / "Chart.yaml").read_text())
    version = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["project"]["version"]
    assert chart["version"] == chart["appVersion"] == version
    container = find(default, "Deployment")["spec"]["template"]["spec"]["containers"][0]
    assert container["image"] == f"ghcr.io/kubeplace/kubeplace:{version}"


def test_defaults_serve_with_two_leader_elected_replicas_and_no_cronjob(default: list[dict[str, Any]]) -> None:
    kinds = sorted((o["kind"], o["metadata"]["name"]) for o in default)
    assert kinds == sorted([
        ("ServiceAccount", "kubeplace"), ("ClusterRole", "kubeplace"), ("ClusterRoleBinding", "kubeplace"),
        ("Role", "kubeplace-leader-election"), ("RoleBinding", "kubeplace-leader-election"),
        ("ClusterRole", "kubeplace-rebalancer"), ("ConfigMap", "kubeplace-config"), ("Deployment", "kubeplace"),
        ("Service", "kubeplace-metrics"), ("ClusterRole", "kubeplace-preemption"),
        ("ClusterRoleBinding", "kubeplace-preemption"),
    ])
    deployment = find(default, "Deployment")
    assert deployment["spec"]["replicas"] == 2
    pod = deployment["spec"]["template"]["spec"]
    serve = _parses(_args(pod["containers"][0]))
    assert serve.params["lease_name"] == "kubeplace" and serve.params["lease_namespace"] == DEFAULT_NS
    role = find(default, "Role", "kubeplace-leader-election")
    assert ["kubeplace"] in [r.get("resourceNames") for r in role["rules"]]
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["containers"][0]["securityContext"]["readOnlyRootFilesystem"] is True
    assert all(o["metadata"].get("namespace", DEFAULT_NS) == DEFAULT_NS for o in default)


def test_the_configuration_from_values_is_what_serve_reads(default: list[dict[str, Any]], custom: list[dict[str, Any]],
                                                         tmp_path: Path) -> None:
    values = yaml.safe_load((CHART / "values.yaml").read_text())
    custom_values = yaml.safe_load(CUSTOM_VALUES.read_text())
    for objects, name, expected in ((default, "kubeplace-config", values["config"]),
                                    (custom, "sched-kubeplace-config", custom_values["config"]),
                                    (custom, "sched-kubeplace-rebalance-config", custom_values["rebalance"]["config"])):
        text = find(objects, "ConfigMap", name)["data"]["config.yaml"]
        assert yaml.safe_load(text) == expected
        (tmp_path / "config.yaml").write_text(text)
        load_configuration(tmp_path / "config.yaml")  # valid, or ConfigError


def test_non_default_values(custom: list[dict[str, Any]]) -> None:
    assert find(custom, "Namespace")["metadata"]["name"] == "ops"
    deployment = find(custom, "Deployment", "sched-kubeplace")
    pod = deployment["spec"]["template"]["spec"]
    container = pod["containers"][0]
    assert deployment["spec"]["replicas"] == 3
    assert container["image"] == "registry.example.test/platform/kubeplace:0.1.0-rc1"
    assert container["imagePullPolicy"] == "Always" and pod["imagePullSecrets"] == [{"name": "registry"}]
    assert pod["serviceAccountName"] == "placer" and "priorityClassName" not in pod
    assert set(pod) >= {"nodeSelector", "tolerations", "affinity"}
    serve = _parses(_args(container))
    assert serve.params["scheduler_name"] == "batch" and serve.params["batch_window"] == 2.5
    assert serve.params["lease_name"] == "sched-kubeplace" and serve.params["lease_namespace"] == "ops"
    assert serve.params["namespaces"] == ("batch-jobs",) and serve.params["metrics_port"] == 9090
    binding = find(custom, "ClusterRoleBinding", "sched-kubeplace")
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": "placer", "namespace": "ops"}]
    election = find(custom, "Role", "sched-kubeplace-leader-election")
    assert ["sched-kubeplace"] in [r.get("resourceNames") for r in election["rules"]]


def test_service_monitor_scrapes_the_schedulers_metrics_service(custom: list[dict[str, Any]]) -> None:
    service = find(custom, "Service", "sched-kubeplace-metrics")
    monitor = find(custom, "ServiceMonitor")
    assert monitor["metadata"]["labels"]["release"] == "prometheus"
    assert monitor["spec"]["selector"]["matchLabels"].items() <= service["metadata"]["labels"].items()
    assert monitor["spec"]["endpoints"] == [{"port": "metrics", "path": "/metrics", "interval": "15s"}]
    pod_labels = find(custom, "Deployment", "sched-kubeplace")["spec"]["template"]["metadata"]["labels"]
    cron_labels = find(custom, "CronJob")["spec"]["jobTemplate"]["spec"]["template"]["metadata"]["labels"]
    assert service["spec"]["selector"].items() <= pod_labels.items()
    assert not service["spec"]["selector"].items() <= cron_labels.items()  # the rebalance job is not scraped
    assert service["spec"]["ports"][0]["port"] == 9090


def test_rebalance_cronjob_when_enabled(custom: list[dict[str, Any]]) -> None:
    cron = find(custom, "CronJob", "sched-kubeplace-rebalance")
    assert cron["spec"]["schedule"] == "0 */6 * * *"
    pod = cron["spec"]["jobTemplate"]["spec"]["template"]["spec"]
    rebalance = _parses(_args(pod["containers"][0]))
    assert rebalance.params["apply_"] is False  # apply: false reports only
    assert rebalance.params["exclude_namespace"] == ("kube-system", "monitoring")
    assert rebalance.params["max_moves"] == 5 and rebalance.params["lease_namespace"] == "ops"
    assert pod["serviceAccountName"] == "sched-kubeplace-rebalance"
    evict = find(custom, "ClusterRoleBinding", "sched-kubeplace-rebalancer")
    assert evict["roleRef"]["name"] == "sched-kubeplace-rebalancer"
    assert evict["subjects"][0]["name"] == "sched-kubeplace-rebalance"
    find(custom, "ClusterRole", "sched-kubeplace-rebalancer")


def test_canary_webhook_when_enabled(custom: list[dict[str, Any]], helm_bin: Path) -> None:
    config = find(custom, "MutatingWebhookConfiguration", "sched-kubeplace-canary")
    hook = config["webhooks"][0]
    assert hook["failurePolicy"] == "Ignore" and hook["clientConfig"]["caBundle"].startswith("LS0t")
    service = find(custom, "Service", "sched-kubeplace-webhook")
    assert hook["clientConfig"]["service"] == {"name": "sched-kubeplace-webhook", "namespace": "ops",
                                               "path": "/mutate", "port": 443}
    assert hook["namespaceSelector"]["matchExpressions"][0]["values"] == ["kube-system", "ops"]
    deployment = find(custom, "Deployment", "sched-kubeplace-webhook")
    pod = deployment["spec"]["template"]
    assert service["spec"]["selector"].items() <= pod["metadata"]["labels"].items()
    metrics = find(custom, "Service", "sched-kubeplace-metrics")
    assert not metrics["spec"]["selector"].items() <= pod["metadata"]["labels"].items()
    webhook = _parses(_args(pod["spec"]["containers"][0]))
    assert webhook.params["default_share"] == "25%" and webhook.params["on_malformed"] == "ignore"
    assert pod["spec"]["volumes"][0]["secret"]["secretName"] == "canary-tls"
    role = find(custom, "ClusterRole", "sched-kubeplace-webhook")
    assert role["rules"] == [{"apiGroups": [""], "resources": ["namespaces"], "verbs": ["get"]}]
    out = subprocess.run([str(helm_bin), "template", "x", str(CHART), "--set", "webhook.enabled=true"],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode != 0 and "webhook.enabled needs webhook.caBundle" in out.stderr


def test_preemption_rights_follow_serve_preempt(default: list[dict[str, Any]], custom: list[dict[str, Any]],
                                                helm_bin: Path) -> None:
    """serve preempts by default and may then delete pods and patch pods/status; with
    serve.evictionApi it evicts instead (no delete); with serve.preempt=false it has neither."""
    rules = find(default, "ClusterRole", "kubeplace-preemption")["rules"]
    assert rules == [{"apiGroups": [""], "resources": ["pods"], "verbs": ["delete"]},
                     {"apiGroups": [""], "resources": ["pods/status"], "verbs": ["patch"]}]
    assert find(default, "ClusterRoleBinding", "kubeplace-preemption")["subjects"][0]["name"] == "kubeplace"
    serve = _parses(_args(find(default, "Deployment")["spec"]["template"]["spec"]["containers"][0]))
    assert serve.params["preempt"] is True and serve.params["eviction_api"] is False
    rules = find(custom, "ClusterRole", "sched-kubeplace-preemption")["rules"]
    assert rules[0] == {"apiGroups": [""], "resources": ["pods/eviction"], "verbs": ["create"]}
    serve = _parses(_args(find(custom, "Deployment", "sched-kubeplace")["spec"]["template"]["spec"]["containers"][0]))
    assert serve.params["eviction_api"] is True
    off = render(helm_bin, "kubeplace", DEFAULT_NS, "--set", "serve.preempt=false")
    assert not [o for o in off if o["metadata"]["name"] == "kubeplace-preemption"]
    serve = _parses(_args(find(off, "Deployment")["spec"]["template"]["spec"]["containers"][0]))
    assert serve.params["preempt"] is False


def test_rbac_reads_one_list_and_never_writes_pods(default: list[dict[str, Any]], custom: list[dict[str, Any]]) -> None:
    """The plan/bind/serve role and the rebalancer's read role read the same resources; no role
    of the chart may create, update or patch pods themselves, or touch secrets; only preemption's
    role may delete them."""
    serve_rules = find(default, "ClusterRole", "kubeplace")["rules"]
    serve_reads = [r for r in serve_rules if r["verbs"] in (["get", "list", "watch"], ["get", "list"])]
    assert find(custom, "ClusterRole", "sched-kubeplace-rebalance-read")["rules"] == serve_reads
    for objects in (default, custom):
        for role in (o for o in objects if o["kind"] in ("Role", "ClusterRole")):
            for rule in role["rules"]:
                assert "*" not in rule["verbs"] + rule["resources"] + rule["apiGroups"], rule
                assert "secrets" not in rule["resources"]
                if "pods" in rule["resources"]:
                    allowed = {"delete"} if role["metadata"]["name"].endswith("-preemption") else set()
                    assert set(rule["verbs"]) <= {"get", "list", "watch", *allowed}, rule


def test_rebalance_cronjob_consolidates_when_asked(default: list[dict[str, Any]], helm_bin: Path,
                                                   tmp_path: Path) -> None:
    """rebalance.consolidate: the job runs `rebalance --consolidate` (--replace, --catalogue from the
    values, which kubeplace reads back), and only then may it cordon and delete nodes and delete
    NodeClaims (and create them with replace: the new nodes come before the old go)."""
    from kubeplace.kube.files import load_catalogue

    values = tmp_path / "values.yaml"
    values.write_text(yaml.safe_dump({"rebalance": {"enabled": True, "consolidate": True, "replace": True,
                                                    "catalogue": {"instanceTypes": [{
                                                        "name": "m6i.large", "architecture": "amd64",
                                                        "capacity": {"cpu": "2", "memory": "8Gi"},
                                                        "offerings": [{"zone": "a", "capacityType": "on-demand",
                                                                       "pricePerHour": 0.096}]}]}}}))
    objects = render(helm_bin, "kubeplace", DEFAULT_NS, "--values", str(values))
    pod = find(objects, "CronJob", "kubeplace-rebalance")["spec"]["jobTemplate"]["spec"]["template"]["spec"]
    rebalance = _parses(_args(pod["containers"][0]))
    assert rebalance.params["consolidate"] and rebalance.params["replace_nodes"]
    assert rebalance.params["catalogue_paths"] == (Path("/etc/kubeplace/catalogue.yaml"),)
    catalogue = tmp_path / "catalogue.yaml"
    catalogue.write_text(find(objects, "ConfigMap", "kubeplace-rebalance-config")["data"]["catalogue.yaml"])
    assert [t.name for t in load_catalogue([catalogue])] == ["m6i.large"]
    rules = find(objects, "ClusterRole", "kubeplace-rebalance-consolidate")["rules"]
    assert rules == [{"apiGroups": [""], "resources": ["nodes"], "verbs": ["patch"]},
                     {"apiGroups": ["karpenter.sh"], "resources": ["nodeclaims"], "verbs": ["create", "delete"]}]
    assert find(objects, "ClusterRoleBinding", "kubeplace-rebalance-consolidate")["subjects"][0]["name"] == \
        "kubeplace-rebalance"
    removing = render(helm_bin, "kubeplace", DEFAULT_NS, "--set", "rebalance.enabled=true",
                      "--set", "rebalance.consolidate=true")  # without replace: no NodeClaim created
    assert find(removing, "ClusterRole", "kubeplace-rebalance-consolidate")["rules"][1]["verbs"] == ["delete"]
    plain = render(helm_bin, "kubeplace", DEFAULT_NS, "--set", "rebalance.enabled=true")
    assert not [o for o in plain if o["metadata"]["name"] == "kubeplace-rebalance-consolidate"]
    assert "--consolidate" not in _args(find(plain, "CronJob")["spec"]["jobTemplate"]["spec"]["template"]["spec"][
        "containers"][0])
