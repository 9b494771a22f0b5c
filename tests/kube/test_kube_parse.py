from __future__ import annotations

import datetime
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner

from kubeplace.cli.main import main
from kubeplace.kube.errors import InputError
from kubeplace.kube.objects import HostPort, Requirement, SelectorTerm, Snapshot, SpecRule, Taint, Toleration
from kubeplace.kube.parse import PriorityClass, build_snapshot, parse_namespace_labels, parse_node, parse_pod
from kubeplace.models.config import Configuration, Profile, instantiate
from kubeplace.models.plugins.volume_restrictions import INLINE_DISKS
from tests.builders import node, pod


def test_node_fields() -> None:
    built = node("n1").cpu("3920m").memory("16Gi").gpu(8).label("zone", "a").taint("gpu", "yes").unschedulable()
    parsed = built.build()
    assert parsed.name == "n1"
    assert parsed.uid == "uid-node-n1"
    assert parsed.labels["zone"] == "a"
    assert parsed.taints == (Taint("gpu", "yes", "NoSchedule"),)
    assert parsed.unschedulable
    assert parsed.allocatable == {"cpu": 3920, "memory": 16 * 1024**3, "nvidia.com/gpu": 8, "pods": 110}
    assert parsed.source == "builders"


def test_node_bad_allocatable_names_file_object_and_field() -> None:
    manifest = node("n1").allocatable("cpu", "12Zi").manifest()
    with pytest.raises(InputError) as caught:
        parse_node(manifest, "fixtures/x.yaml")
    assert str(caught.value) == (
        "fixtures/x.yaml: Node n1: status.allocatable.cpu: invalid quantity '12Zi' "
        "(expected a Kubernetes quantity such as 500m, 2 or 1.5Gi)"
    )


def test_pod_fields() -> None:
    built = (
        pod("web-1", ns="shop")
        .cpu("500m")
        .memory("1Gi")
        .gpu(1)
        .label("app", "web")
        .annotation("note", "x")
        .selector("disk", "ssd")
        .require("zone", "In", "a", "b")
        .require("gen", "Gt", "3")
        .or_term()
        .require("spare", "Exists")
        .tolerate("gpu", "yes", "NoSchedule")
        .tolerate("", operator="Exists")
        .host_port(8080)
        .host_port(53, protocol="UDP", host_ip="10.0.0.1")
        .priority(10)
        .owner("ReplicaSet", "web-abc")
        .created("2024-05-01T10:00:00Z")
    )
    parsed = built.build()
    assert (parsed.namespace, parsed.name, parsed.key, parsed.uid) == ("shop", "web-1", "shop/web-1", "uid-shop-web-1")
    assert parsed.labels == {"app": "web"}
    assert parsed.annotations == {"note": "x"}
    assert parsed.scheduler_name == "kubeplace"
    assert parsed.priority == 10
    assert parsed.requests == {"cpu": 500, "memory": 1024**3, "nvidia.com/gpu": 1, "pods": 1}
    assert parsed.node_selector == {"disk": "ssd"}
    assert parsed.required_terms == (
        SelectorTerm(match_expressions=(Requirement("zone", "In", ("a", "b")), Requirement("gen", "Gt", ("3",)))),
        SelectorTerm(match_expressions=(Requirement("spare", "Exists"),)),
    )
    assert parsed.tolerations == (Toleration("gpu", "Equal", "yes", "NoSchedule"), Toleration("", "Exists", "", ""))
    assert parsed.host_ports == (HostPort(8080, "TCP", ""), HostPort(53, "UDP", "10.0.0.1"))
    assert parsed.owner_kind == "ReplicaSet"
    assert parsed.creation == "2024-05-01T10:00:00Z"
    assert (parsed.phase, parsed.deleting, parsed.scheduling_gates, parsed.unmodelled) == ("Pending", False, (), ())
    assert parsed.node_name == ""


def test_pod_defaults() -> None:
    manifest: dict[str, Any] = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": {}}
    parsed = parse_pod(manifest)
    assert parsed.namespace == "default"
    assert parsed.scheduler_name == "default-scheduler"
    assert parsed.priority == 0
    assert parsed.phase == "Pending"
    assert parsed.required_terms is None
    assert parsed.requests == {"pods": 1}


def test_pod_state_fields() -> None:
    parsed = pod("p").on("n1").phase("Succeeded").deleting().gate("wait").build()
    assert parsed.node_name == "n1"
    assert parsed.finished
    assert parsed.deleting
    assert parsed.scheduling_gates == ("wait",)


def test_priority_from_priority_class_when_spec_priority_is_missing() -> None:
    manifest = pod("p").spec("priorityClassName", "high").manifest()
    assert parse_pod(manifest, priority_classes={"high": PriorityClass(5000)}).priority == 5000
    assert parse_pod(manifest).priority == 0


def test_unquoted_yaml_timestamp_is_turned_back_into_text() -> None:
    manifest = pod("p").manifest()
    manifest["metadata"]["creationTimestamp"] = datetime.datetime(2024, 5, 1, 10, 0, tzinfo=datetime.UTC)
    assert parse_pod(manifest).creation == "2024-05-01T10:00:00Z"


def test_sidecar_host_ports_count_but_ordinary_init_ports_do_not() -> None:
    init = [
        {"name": "s", "image": "x", "restartPolicy": "Always", "ports": [{"containerPort": 9, "hostPort": 9000}]},
        {"name": "i", "image": "x", "ports": [{"containerPort": 9, "hostPort": 9001}]},
    ]
    assert pod("p").spec("initContainers", init).build().host_ports == (HostPort(9000),)


def test_matchfields() -> None:
    affinity = _node_affinity([{"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n1"]}]}])
    parsed = pod("p").spec("affinity", affinity).build()
    assert parsed.required_terms == (SelectorTerm(match_fields=(Requirement("metadata.name", "In", ("n1",)),)),)


def test_empty_term_is_kept_and_matches_nothing_downstream() -> None:
    parsed = pod("p").spec("affinity", _node_affinity([{}])).build()
    assert parsed.required_terms == (SelectorTerm(),)


@pytest.mark.parametrize(
    ("term", "field", "problem"),
    [
        (
            {"matchExpressions": [{"key": "a", "operator": "Equals", "values": ["x"]}]},
            "operator",
            "unknown operator 'Equals'",
        ),
        (
            {"matchExpressions": [{"key": "a", "operator": "Gt", "values": ["x"]}]},
            "values",
            "Gt needs one integer value",
        ),
        (
            {"matchExpressions": [{"key": "a", "operator": "Lt", "values": ["1", "2"]}]},
            "values",
            "Lt needs one integer",
        ),
        ({"matchExpressions": [{"key": "a", "operator": "In"}]}, "values", "In without values"),
        ({"matchExpressions": [{"key": "a", "operator": "Exists", "values": ["x"]}]}, "values", "Exists with values"),
        ({"matchFields": [{"key": "metadata.uid", "operator": "In", "values": ["x"]}]}, "key", "unsupported field"),
    ],
    ids=["bad-operator", "gt-not-integer", "lt-two-values", "in-empty", "exists-with-values", "field-not-name"],
)
def test_bad_node_affinity(term: dict[str, Any], field: str, problem: str) -> None:
    manifest = pod("web-1").spec("affinity", _node_affinity([term])).manifest()
    with pytest.raises(InputError) as caught:
        parse_pod(manifest, "f.yaml")
    error = caught.value
    assert error.file == "f.yaml"
    assert error.obj == "Pod default/web-1"
    assert error.field.startswith(
        "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0].match"
    )
    assert error.field.endswith(f"[0].{field}")
    assert problem in error.problem


def test_no_terms_is_an_error() -> None:
    with pytest.raises(InputError, match="no node selector terms"):
        pod("p").spec("affinity", _node_affinity([])).build()


def test_bad_toleration_operator() -> None:
    with pytest.raises(InputError, match=r"spec.tolerations\[0\].operator: unknown operator 'Equals'"):
        pod("p").spec("tolerations", [{"key": "a", "operator": "Equals"}]).build()


def test_labels_must_be_strings() -> None:
    manifest = pod("p").manifest()
    manifest["metadata"]["labels"] = {"tier": 1}
    with pytest.raises(InputError, match=r"metadata.labels.tier: 1 is not a string \(expected a string; quote it"):
        parse_pod(manifest)


def test_missing_name() -> None:
    with pytest.raises(InputError, match=r"metadata\.name: missing name"):
        parse_pod({"apiVersion": "v1", "kind": "Pod", "metadata": {}})


@pytest.mark.parametrize(
    ("spec_field", "value", "reason"),
    [
        ("volumes", [{"name": "disk", "gcePersistentDisk": {"pdName": "d"}}], INLINE_DISKS),
    ],
)
def test_unmodelled_reasons(spec_field: str, value: Any, reason: str) -> None:
    parsed = pod("p").spec(spec_field, value).build()
    assert len(parsed.spec_rules) == 1 and parsed.unmodelled == ()  # the parser reads the rule, plugins judge it
    plugins = instantiate(Configuration(), Profile(), Snapshot((), (), ()))
    assert plugins.unmodelled(parsed) == (reason,)
    marked = plugins.mark_unmodelled(Snapshot((), (parsed,), ()))
    assert marked.pending[0].unmodelled == (reason,)


@pytest.mark.parametrize(
    ("spec_field", "value", "rule"),
    [
        ("affinity", {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [{"topologyKey": "zone"}]}},
         SpecRule.REQUIRED_POD_AFFINITY),
        ("affinity", {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [{"topologyKey": "zone"}]}},
         SpecRule.REQUIRED_POD_ANTI_AFFINITY),
        ("topologySpreadConstraints", [{"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule"}],
         SpecRule.HARD_TOPOLOGY_SPREAD),
    ],
)
def test_inter_pod_rules_are_modelled_not_left(spec_field: str, value: Any, rule: SpecRule) -> None:
    """Required pod (anti-)affinity and DoNotSchedule spread are read and modelled:
    InterPodAffinity and PodTopologySpread leave no pod to the default scheduler for them."""
    parsed = pod("p").spec(spec_field, value).build()
    assert parsed.spec_rules == {rule}
    assert instantiate(Configuration(), Profile(), Snapshot((), (), ())).unmodelled(parsed) == ()


@pytest.mark.parametrize(
    ("spec_field", "value"),
    [
        ("affinity", {"podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
            {"weight": 1, "podAffinityTerm": {"topologyKey": "zone"}}]}}),
        ("topologySpreadConstraints", [{"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "ScheduleAnyway"}]),
        ("volumes", [{"name": "tmp", "emptyDir": {}}, {"name": "cfg", "configMap": {"name": "c"}}]),
        ("volumes", [{"name": "data", "persistentVolumeClaim": {"claimName": "d"}}]),
        ("volumes", [{"name": "scratch", "ephemeral": {"volumeClaimTemplate": {}}}]),
    ],
)
def test_modelled_or_scoring_only_rules_are_not_reasons(spec_field: str, value: Any) -> None:
    parsed = pod("p").spec(spec_field, value).build()
    assert parsed.spec_rules == frozenset()
    assert instantiate(Configuration(), Profile(), Snapshot((), (), ())).unmodelled(parsed) == ()


def test_each_rule_is_judged_by_the_plugin_that_owns_it() -> None:
    """Disabling the plugin that owns a rule leaves its pods to kubeplace (as disabling a
    kube-scheduler plugin stops that rule being checked); the others still report theirs."""
    parsed = (pod("p").spec("resourceClaims", [{"name": "gpu", "resourceClaimName": "c"}])
              .spec("volumes", [{"name": "data", "gcePersistentDisk": {"pdName": "d"}}]).build())
    assert parsed.spec_rules == {SpecRule.RESOURCE_CLAIMS, SpecRule.INLINE_DISKS}
    plugins = instantiate(Configuration(), Profile(), Snapshot((), (), ()))
    assert plugins.unmodelled(parsed) == (INLINE_DISKS,)  # resource claims are modelled (DynamicResources)
    plugins = instantiate(Configuration(), Profile(disabled=("VolumeRestrictions",)), Snapshot((), (), ()))
    assert plugins.unmodelled(parsed) == ()


def test_namespace_labels() -> None:
    manifest = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team-a", "labels": {"t": "a"}}}
    assert parse_namespace_labels(manifest) == ("team-a", {"t": "a"})


SUBDOMAIN_RULE = ("a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', "
                  "and must start and end with an alphanumeric character (e.g. 'example.com', regex used for "
                  "validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')")
LABEL_RULE = ("a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start "
              "and end with an alphanumeric character (e.g. 'my-name' or '123-abc', regex used for validation is "
              "'[a-z0-9]([-a-z0-9]*[a-z0-9])?')")


@pytest.mark.parametrize(
    ("name", "message"),
    [("Web-1", f'Invalid value: "Web-1": {SUBDOMAIN_RULE}'),
     ("web_1", f'Invalid value: "web_1": {SUBDOMAIN_RULE}'),
     ("-web", f'Invalid value: "-web": {SUBDOMAIN_RULE}'),
     ("web.", f'Invalid value: "web.": {SUBDOMAIN_RULE}'),
     ("web\u202egnp", f'Invalid value: "web\u202egnp": {SUBDOMAIN_RULE}'),  # a bidi override
     ("web\n", f'Invalid value: "web\\n": {SUBDOMAIN_RULE}'),
     ("a" * 254, f'Invalid value: "{"a" * 254}": must be no more than 253 characters'),
     ("A" * 254, f'Invalid value: "{"A" * 254}": must be no more than 253 characters; '
                 f'Invalid value: "{"A" * 254}": {SUBDOMAIN_RULE}')],
)
def test_pod_and_node_names_are_dns_subdomains_as_the_api_server_checks(name: str, message: str) -> None:
    with pytest.raises(InputError) as caught:
        parse_pod(pod(name).manifest(), "f.yaml")
    assert str(caught.value) == f"f.yaml: Pod default/{name}: metadata.name: {message}"
    with pytest.raises(InputError) as caught:
        parse_node(node(name).manifest(), "f.yaml")
    assert str(caught.value) == f"f.yaml: Node {name}: metadata.name: {message}"


def test_names_the_api_server_takes_are_read() -> None:
    assert parse_pod(pod("a" * 253).manifest()).name == "a" * 253
    assert parse_pod(pod("web-1.shop.example-2", ns="t" * 63).manifest()).namespace == "t" * 63
    assert parse_node(node("ip-10-0-0-1.ec2.internal").manifest()).name == "ip-10-0-0-1.ec2.internal"
    assert parse_pod(pod("p").on("ip-10-0-0-1.ec2.internal").manifest()).node_name == "ip-10-0-0-1.ec2.internal"


@pytest.mark.parametrize(
    ("namespace", "message"),
    [("team.a", 'Invalid value: "team.a": must not contain dots'),
     ("Team", f'Invalid value: "Team": {LABEL_RULE}'),
     ("t" * 64, f'Invalid value: "{"t" * 64}": must be no more than 63 characters')],
)
def test_namespaces_are_dns_labels_as_the_api_server_checks(namespace: str, message: str) -> None:
    with pytest.raises(InputError) as caught:
        parse_pod(pod("p", ns=namespace).manifest(), "f.yaml")
    assert str(caught.value) == f"f.yaml: Pod {namespace}/p: metadata.namespace: {message}"
    manifest = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}}
    with pytest.raises(InputError) as caught:
        parse_namespace_labels(manifest, "f.yaml")
    assert str(caught.value) == f"f.yaml: Namespace {namespace}: metadata.name: {message}"


def test_a_pods_node_name_is_a_dns_subdomain() -> None:
    with pytest.raises(InputError) as caught:
        parse_pod(pod("p").on("Node_1").manifest(), "f.yaml")
    assert str(caught.value) == f'f.yaml: Pod default/p: spec.nodeName: Invalid value: "Node_1": {SUBDOMAIN_RULE}'


def test_an_invalid_name_in_a_file_is_one_line_and_exit_2(tmp_path: Path) -> None:
    snap = tmp_path / "c.yaml"
    snap.write_text(yaml.safe_dump_all([node("n1").cpu("2").manifest(), pod("p\u202e$^$").cpu("1").manifest()]))
    out = CliRunner().invoke(main, ["plan", str(snap)])
    assert out.exit_code == 2 and out.stdout == ""
    assert out.stderr == (f"error: {snap}: Pod default/p\\u202e$^$: metadata.name: Invalid value: "
                          f'"p\\u202e$^$": {SUBDOMAIN_RULE}\n')


def _node_affinity(terms: list[Any]) -> dict[str, Any]:
    return {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": terms}}}


@pytest.mark.parametrize("value", [10**23, 2**31, -(2**31) - 1, True, 1.5, "100"])
def test_priority_is_an_int32_as_in_the_api(value: Any) -> None:
    with pytest.raises(InputError, match=r"spec\.priority: .* \(expected an integer from -2147483648 to 2147483647\)"):
        parse_pod(pod("p").priority(value).manifest(), "f.yaml")
    assert pod("p").priority(2**31 - 1).build().priority == 2**31 - 1
    assert pod("p").priority(-(2**31)).build().priority == -(2**31)


@pytest.mark.parametrize("value", [10**23, True, None, "5"])
def test_priority_class_value_is_an_int32(value: Any) -> None:
    classes = {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": "huge"},
               "value": value}
    with pytest.raises(InputError) as caught:
        build_snapshot([(classes, "f.yaml"), (pod("p").spec("priorityClassName", "huge").manifest(), "f.yaml")])
    assert str(caught.value).startswith("f.yaml: PriorityClass huge: value: ")


@pytest.mark.parametrize(
    ("taint", "message"),
    [
        ({"key": "a", "effect": "Bogus"},
         "spec.taints[0].effect: unsupported effect 'Bogus' (expected NoSchedule, PreferNoSchedule, NoExecute)"),
        ({"key": "a"}, "spec.taints[0].effect: missing effect (expected NoSchedule, PreferNoSchedule, NoExecute)"),
        ({"key": "a", "effect": "noschedule"}, "spec.taints[0].effect: unsupported effect 'noschedule'"),
        ({"effect": "NoSchedule"}, "spec.taints[0].key: missing key"),
    ],
)
def test_taints_are_validated_as_the_api_server_does(taint: dict[str, str], message: str) -> None:
    # ignored before: a taint with a misspelt effect kept nothing off the node
    manifest = node("n1").manifest()
    manifest["spec"]["taints"] = [taint]
    with pytest.raises(InputError) as caught:
        parse_node(manifest, "f.yaml")
    assert str(caught.value).startswith(f"f.yaml: Node n1: {message}")


@pytest.mark.parametrize(
    ("toleration", "message"),
    [
        ({"key": "a", "operator": "Exists", "value": "x"},
         "spec.tolerations[0].value: value must be empty when operator is 'Exists', got 'x'"),
        ({"key": "a", "value": "x", "effect": "NoScheduled"},
         "spec.tolerations[0].effect: unsupported effect 'NoScheduled' "
         "(expected NoSchedule, PreferNoSchedule, NoExecute or none)"),
    ],
)
def test_tolerations_are_validated_as_the_api_server_does(toleration: dict[str, str], message: str) -> None:
    with pytest.raises(InputError) as caught:
        parse_pod(pod("p").spec("tolerations", [toleration]).manifest(), "f.yaml")
    assert str(caught.value) == f"f.yaml: Pod default/p: {message}"


@pytest.mark.parametrize("text", ["-3", "0", "three", "2147483648", "٣", "9" * 5000])
def test_gang_min_member_annotation_is_refused_not_clamped(text: str) -> None:
    # "-3" became min-member 1 before: a typo silently changed the gang's all-or-nothing rule
    member = pod("p").label("kubeplace.io/gang", "g").annotation("kubeplace.io/gang-min-member", text).manifest()
    with pytest.raises(InputError) as caught:
        build_snapshot([(member, "f.yaml")])
    assert str(caught.value) == (f"f.yaml: Pod default/p: metadata.annotations.kubeplace.io/gang-min-member: "
                                 f"got {text!r} (expected an integer from 1 to 2147483647)")


def test_pod_group_min_member_is_an_int32() -> None:
    group = {"apiVersion": "scheduling.x-k8s.io/v1alpha1", "kind": "PodGroup", "metadata": {"name": "g"},
             "spec": {"minMember": 2**31}}
    with pytest.raises(InputError, match=r"spec\.minMember: 2147483648 is out of range \(expected an integer"):
        build_snapshot([(group, "f.yaml")])


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"spec": "x"}, "PodGroup default/g: spec: str is not a mapping"),
        ({"spec": {"minResources": 1.5}}, "PodGroup default/g: spec.minResources: float is not a mapping"),
        ({"metadata": ["g"]}, "PodGroup default/?: metadata.name: missing name"),
        ({"spec": {"scheduleTimeoutSeconds": True}}, "PodGroup default/g: spec.scheduleTimeoutSeconds: True is not"),
        ({"spec": {"minResources": {"cpu": "1e400"}}}, "PodGroup default/g: spec.minResources.cpu: quantity"),
    ],
)
def test_malformed_pod_groups_are_input_errors(change: dict[str, Any], message: str) -> None:
    # AttributeError tracebacks before (found by tests/cli/test_cli_fuzz.py)
    group = {"apiVersion": "scheduling.x-k8s.io/v1alpha1", "kind": "PodGroup", "metadata": {"name": "g"}, **change}
    with pytest.raises(InputError) as caught:
        build_snapshot([(group, "f.yaml")])
    assert str(caught.value).startswith(f"f.yaml: {message}")


def test_a_pod_group_given_twice_is_refused_as_the_api_server_refuses_it() -> None:
    group = {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
             "metadata": {"name": "g", "namespace": "ml"}, "spec": {"minMember": 1}}
    with pytest.raises(InputError) as caught:
        build_snapshot([(group, "a.yaml"), ({**group, "spec": {"minMember": 2}}, "b.yaml")])
    assert str(caught.value).startswith("b.yaml: PodGroup ml/g: duplicate PodGroup (first defined in a.yaml)")
    other = {**group, "apiVersion": "scheduling.x-k8s.io/v1alpha1"}  # another kind of the same name
    assert len(build_snapshot([(group, "a.yaml"), (other, "b.yaml")]).pod_groups) == 2
    served_twice = [({"apiVersion": f"scheduling.k8s.io/{version}", "kind": "PodGroup",
                      "metadata": {"name": "w"}, "spec": {"schedulingPolicy": {"basic": {}}}}, "cluster")
                    for version in ("v1alpha2", "v1beta1")]
    assert len(build_snapshot(served_twice).pod_groups) == 1


@pytest.mark.parametrize("value", [0, "", "3", 3.0, False, True, [], {}, 2**31])
def test_a_kai_min_member_that_is_not_an_int32_of_at_least_1_is_refused(value: Any) -> None:
    group = {"apiVersion": "scheduling.run.ai/v2alpha2", "kind": "PodGroup", "metadata": {"name": "g"},
             "spec": {"minMember": value}}
    with pytest.raises(InputError, match=r"PodGroup default/g: spec\.minMember: .*expected an integer from 1 to"):
        build_snapshot([(group, "f.yaml")])


@pytest.mark.parametrize(("spec", "min_member"), [({}, 1), ({"minMember": None}, 1), ({"minMember": 4}, 4)])
def test_a_kai_min_member_left_out_is_1(spec: dict[str, Any], min_member: int) -> None:
    group = {"apiVersion": "scheduling.run.ai/v2alpha2", "kind": "PodGroup", "metadata": {"name": "g"}, "spec": spec}
    assert build_snapshot([(group, "f.yaml")]).pod_groups[0].min_member == min_member


def test_host_network_container_ports_are_host_ports_as_the_api_server_defaults_them() -> None:
    ports = [{"containerPort": 9100}, {"containerPort": 53, "protocol": "UDP", "hostPort": 5353}]
    containers = [{"name": "e", "image": "x", "ports": ports}]
    built = pod("p").spec("hostNetwork", True).spec("containers", containers).build()
    assert built.host_ports == (HostPort(9100), HostPort(5353, "UDP"))
    assert pod("p").spec("containers", containers).build().host_ports == (HostPort(5353, "UDP"),)
    bad = [{"name": "e", "image": "x", "ports": [{"containerPort": 0}]}]
    with pytest.raises(InputError, match=r"spec.containers\[0\].ports\[0\].containerPort.*invalid containerPort 0"):
        pod("p").spec("hostNetwork", True).spec("containers", bad).build()


def priority_class(name: str, value: int, default: bool = False) -> dict[str, Any]:
    return {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": name},
            "value": value, **({"globalDefault": True} if default else {})}


def test_the_global_default_priority_class_gives_a_pod_without_one_its_value() -> None:
    snapshot = build_snapshot([(priority_class("normal", 100, default=True), "c.yaml"),
                               (pod("p").manifest(), "p.yaml")], scheduler_name="kubeplace")
    assert snapshot.pending[0].priority == 100


LIMITED_GPU = {"name": "c", "image": "x", "resources": {"requests": {"nvidia.com/gpu": "2"},
                                                        "limits": {"nvidia.com/gpu": "1"}}}
AFFINITY_BAD_KEY = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
    {"labelSelector": {"matchLabels": {"app": "a"}}, "topologyKey": "zone name"}]}}


@pytest.mark.parametrize(("objects", "message"), [
    ([priority_class("a", 1, default=True), priority_class("b", 2, default=True)],
     "c.yaml: PriorityClass b: globalDefault: PriorityClass a is already marked as default. "
     "Only one default can exist"),
    ([priority_class("high", 1000), pod("p").spec("priorityClassName", "high").priority(5).manifest()],
     r"c.yaml: Pod default/p: spec.priority: the integer value of priority \(5\) must not be provided in pod spec; "
     r"priority admission controller computed 1000 from the given PriorityClass name"),
    ([pod("p").spec("volumes", [{"name": "data", "emptyDir": {}}, {"name": "data", "emptyDir": {}}]).manifest()],
     r"c.yaml: Pod default/p: spec.volumes\[1\].name: Duplicate value: 'data'"),
    ([pod("p").spec("containers", [LIMITED_GPU]).manifest()],
     r"c.yaml: Pod default/p: spec.containers\[0\].resources.requests: must be equal to nvidia.com/gpu limit of 1"),
    ([pod("p").spec("affinity", AFFINITY_BAD_KEY).manifest()],
     r"c.yaml: Pod default/p: spec.affinity.podAntiAffinity.requiredDuringSchedulingIgnoredDuringExecution\[0\]"
     r'.topologyKey: Invalid value: "zone name": name part must consist of alphanumeric characters'),
], ids=["two-global-defaults", "priority-against-class", "duplicate-volume", "extended-request-not-limit",
        "topology-key"])  # fmt: skip
def test_what_the_api_server_refuses_is_refused_in_one_line(objects: list[dict[str, Any]], message: str) -> None:
    with pytest.raises(InputError, match=message) as refused:
        build_snapshot([(obj, "c.yaml") for obj in objects])
    assert "\n" not in str(refused.value)
