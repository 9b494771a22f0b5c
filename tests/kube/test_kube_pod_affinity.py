"""kube.pod_affinity: inter-pod (anti-)affinity terms, spread constraints and preferred node
terms, parsed and validated as the API server does, with its matchLabelKeys merges."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner

from kubeplace.cli.main import main
from kubeplace.kube.errors import InputError
from kubeplace.kube.objects import (
    PodAffinityTerm,
    PreferredNodeTerm,
    Requirement,
    SelectorTerm,
    SpecRule,
    SpreadConstraint,
)
from kubeplace.kube.pod_affinity import in_scope, term_matches
from tests.builders import node, pod

REQ = "requiredDuringSchedulingIgnoredDuringExecution"
PREF = "preferredDuringSchedulingIgnoredDuringExecution"


def with_affinity(kind: str, when: str, *terms: dict[str, Any]) -> Any:
    return pod("p").label("app", "web").label("job", "j1").spec("affinity", {kind: {when: list(terms)}})


def spread(**constraint: Any) -> Any:
    base = {"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule"}
    return pod("p").label("app", "web").label("rev", "r2").spec("topologySpreadConstraints", [{**base, **constraint}])


def test_required_affinity_keeps_a_null_selector_term_anti_affinity_drops_it() -> None:
    built = with_affinity("podAffinity", REQ, {"topologyKey": "zone"}).build()
    assert built.affinity == (PodAffinityTerm(selector=None, topology_key="zone"),)
    built = with_affinity("podAntiAffinity", REQ, {"topologyKey": "zone"}).build()
    assert built.anti_affinity == ()


def test_term_fields_namespaces_and_namespace_selector() -> None:
    selector = {"matchLabels": {"app": "db"}, "matchExpressions": [{"key": "tier", "operator": "Exists"}]}
    term = {"labelSelector": selector,
            "namespaces": ["a"], "namespaceSelector": {"matchLabels": {"team": "x"}}, "topologyKey": "zone"}
    (parsed,) = with_affinity("podAffinity", REQ, term).build().affinity
    assert parsed == PodAffinityTerm(
        selector=(Requirement("app", "In", ("db",)), Requirement("tier", "Exists")),
        namespaces=("a",), namespace_selector=(Requirement("team", "In", ("x",)),), topology_key="zone")
    (everywhere,) = with_affinity("podAffinity", REQ, {**term, "namespaceSelector": {}}).build().affinity
    assert everywhere.namespace_selector == ()


def test_match_and_mismatch_label_keys_are_merged_as_the_api_server_does() -> None:
    term = {"labelSelector": {"matchLabels": {"app": "web"}}, "topologyKey": "zone",
            "matchLabelKeys": ["job", "absent"], "mismatchLabelKeys": ["app"]}
    (parsed,) = with_affinity("podAntiAffinity", REQ, term).build().anti_affinity
    assert parsed.selector == (Requirement("app", "In", ("web",)), Requirement("job", "In", ("j1",)),
                               Requirement("app", "NotIn", ("web",)))
    assert (parsed.match_label_keys, parsed.mismatch_label_keys) == (("job", "absent"), ("app",))
    # read back from an API server that merged already: unchanged
    merged = {**term, "labelSelector": {"matchLabels": {"app": "web"}, "matchExpressions": [
        {"key": "job", "operator": "In", "values": ["j1"]}, {"key": "app", "operator": "NotIn", "values": ["web"]}]}}
    (again,) = with_affinity("podAntiAffinity", REQ, merged).build().anti_affinity
    assert again.selector == parsed.selector


def test_preferred_terms_carry_their_weight() -> None:
    term = {"weight": 30, "podAffinityTerm": {"labelSelector": {}, "topologyKey": "kubernetes.io/hostname"}}
    built = with_affinity("podAntiAffinity", PREF, term).build()
    assert built.preferred_anti_affinity == (PodAffinityTerm(selector=(), topology_key="kubernetes.io/hostname",
                                                             weight=30),)
    assert built.preferred_affinity == () and built.spec_rules == frozenset()


def test_spread_constraint_defaults_and_merge() -> None:
    (c,) = spread(labelSelector={}, matchLabelKeys=["rev"]).build().spread
    assert c == SpreadConstraint(max_skew=1, topology_key="zone", hard=True,
                                 selector=(Requirement("rev", "In", ("r2",)),), match_label_keys=("rev",))
    soft_pod = spread(whenUnsatisfiable="ScheduleAnyway", nodeTaintsPolicy="Honor", nodeAffinityPolicy="Ignore")
    (soft,) = soft_pod.build().spread
    assert (soft.hard, soft.selector, soft.node_affinity_policy, soft.node_taints_policy) == (
        False, None, "Ignore", "Honor")
    (hard,) = spread(minDomains=3).build().spread
    assert hard.min_domains == 3


def test_preferred_node_terms() -> None:
    preference = {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]}
    affinity = {"nodeAffinity": {PREF: [{"weight": 7, "preference": preference}]}}
    built = pod("p").spec("affinity", affinity).build()
    assert built.preferred_node_terms == (PreferredNodeTerm(7, SelectorTerm((Requirement("zone", "In", ("a",)),))),)


def test_hard_rules_are_recorded_for_their_plugins() -> None:
    assert spread().build().spec_rules == {SpecRule.HARD_TOPOLOGY_SPREAD}
    term = {"labelSelector": {}, "topologyKey": "zone"}
    assert with_affinity("podAffinity", REQ, term).build().spec_rules == {SpecRule.REQUIRED_POD_AFFINITY}
    assert with_affinity("podAntiAffinity", REQ, term).build().spec_rules == {SpecRule.REQUIRED_POD_ANTI_AFFINITY}


AFF = "spec.affinity.podAffinity"
SPREAD = "spec.topologySpreadConstraints[0]"


@pytest.mark.parametrize(
    ("built", "message"),
    [
        (spread(maxSkew=0),
         f"{SPREAD}.maxSkew: maxSkew 0 is not a positive integer (expected an integer of at least 1)"),
        (spread(minDomains=0), f"{SPREAD}.minDomains: minDomains 0 is not a positive integer"),
        (spread(minDomains=2, whenUnsatisfiable="ScheduleAnyway"),
         f"{SPREAD}.minDomains: minDomains with whenUnsatisfiable ScheduleAnyway"),
        (spread(whenUnsatisfiable="Maybe"), f"{SPREAD}.whenUnsatisfiable: unknown whenUnsatisfiable 'Maybe'"),
        (spread(whenUnsatisfiable=None), f"{SPREAD}.whenUnsatisfiable: unknown whenUnsatisfiable None"),
        (spread(nodeTaintsPolicy="Always"), f"{SPREAD}.nodeTaintsPolicy: unknown policy 'Always'"),
        (spread(nodeAffinityPolicy="honor"), f"{SPREAD}.nodeAffinityPolicy: unknown policy 'honor'"),
        (spread(topologyKey=""), f"{SPREAD}.topologyKey: empty topologyKey"),
        (spread(matchLabelKeys=["rev"]), f"{SPREAD}.matchLabelKeys: set without a labelSelector"),
        (pod("p").spec("topologySpreadConstraints", [
            {"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule"}] * 2),
         "spec.topologySpreadConstraints[1]: duplicate {topologyKey, whenUnsatisfiable}"),
        (with_affinity("podAffinity", REQ, {"labelSelector": {}}), f"{AFF}.{REQ}[0].topologyKey: empty topologyKey"),
        (with_affinity("podAffinity", PREF, {"weight": 0, "podAffinityTerm": {"topologyKey": "zone"}}),
         f"{AFF}.{PREF}[0].weight: weight 0 is out of range (expected an integer from 1 to 100)"),
        (with_affinity("podAntiAffinity", PREF, {"weight": 101, "podAffinityTerm": {"topologyKey": "zone"}}),
         f"spec.affinity.podAntiAffinity.{PREF}[0].weight: weight 101 is out of range"),
        (with_affinity("podAffinity", PREF, {"weight": 5}), f"{AFF}.{PREF}[0].podAffinityTerm.topologyKey: empty"),
        (with_affinity("podAffinity", REQ, {"topologyKey": "zone", "matchLabelKeys": ["job"]}),
         f"{AFF}.{REQ}[0].matchLabelKeys: set without a labelSelector"),
        (with_affinity("podAffinity", REQ, {"topologyKey": "zone", "labelSelector": {},
                                           "matchLabelKeys": ["job"], "mismatchLabelKeys": ["job"]}),
         f"{AFF}.{REQ}[0].matchLabelKeys: 'job' is in both matchLabelKeys and mismatchLabelKeys"),
        (with_affinity("podAffinity", REQ, {"topologyKey": "zone", "labelSelector": {
            "matchExpressions": [{"key": "app", "operator": "In"}]}}),
         f"{AFF}.{REQ}[0].labelSelector.matchExpressions[0].values: In without values"),
        (pod("p").spec("affinity", {"nodeAffinity": {PREF: [{"weight": 200, "preference": {}}]}}),
         f"spec.affinity.nodeAffinity.{PREF}[0].weight: weight 200 is out of range"),
    ],
)
def test_invalid_rules_are_one_line_input_errors(built: Any, message: str) -> None:
    with pytest.raises(InputError) as caught:
        built.build()
    assert str(caught.value).startswith("builders: Pod default/p: ")
    assert message in str(caught.value) and "\n" not in str(caught.value)


NAMESPACES = {"subteam1.team1": {"team": "team1"}, "subteam1.team2": {"team": "team2"}}


@pytest.mark.parametrize(
    ("term", "namespace", "expected"),
    [
        (PodAffinityTerm((), topology_key="zone"), "own", True),
        (PodAffinityTerm((), topology_key="zone"), "other", False),
        (PodAffinityTerm((), namespaces=("a",), topology_key="zone"), "own", False),
        (PodAffinityTerm((), namespaces=("a",), namespace_selector=(), topology_key="zone"), "anything", True),
        (PodAffinityTerm((), namespace_selector=(Requirement("team", "In", ("team1",)),), topology_key="zone"),
         "subteam1.team1", True),
        (PodAffinityTerm((), namespace_selector=(Requirement("team", "In", ("team1",)),), topology_key="zone"),
         "subteam1.team2", False),
        (PodAffinityTerm((), namespace_selector=(Requirement("team", "In", ("team1",)),), topology_key="zone"),
         "no-object", False),
        (PodAffinityTerm((), namespace_selector=(Requirement("team", "DoesNotExist"),), topology_key="zone"),
         "no-object", True),
    ],
)
def test_namespace_scope_is_evaluated_exactly(term: PodAffinityTerm, namespace: str, expected: bool) -> None:
    assert in_scope(term, "own", namespace, NAMESPACES) is expected


def test_null_selector_matches_no_pod_empty_selector_every_pod() -> None:
    web = pod("w").label("app", "web").build()
    assert not term_matches(PodAffinityTerm(None, topology_key="zone"), "default", web, {})
    assert term_matches(PodAffinityTerm((), topology_key="zone"), "default", web, {})


# --- every label-key field of a pod's affinity terms and spread constraints (ValidateLabelName) ---

BAD_LABEL_KEYS = ["zone name", "a/b/c", "/zone", "Example.com/zone", "-zone", "z" * 64, "zone/", "x" * 254 + "/z"]
SELECTOR = {"matchLabels": {"app": "a"}}


def _affinity(kind: str, required: bool, term: dict[str, Any]) -> dict[str, Any]:
    if required:
        return {kind: {"requiredDuringSchedulingIgnoredDuringExecution": [term]}}
    return {kind: {"preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 5, "podAffinityTerm": term}]}}


def _term_cases(key: str) -> list[tuple[dict[str, Any], str]]:
    """(a pod spec field value, the field path that names ``key``) for every label-key field."""
    cases = []
    for kind in ("podAffinity", "podAntiAffinity"):
        for required in (True, False):
            at = (f"spec.affinity.{kind}.requiredDuringSchedulingIgnoredDuringExecution[0]" if required else
                  f"spec.affinity.{kind}.preferredDuringSchedulingIgnoredDuringExecution[0].podAffinityTerm")
            base = {"topologyKey": "zone", "labelSelector": SELECTOR}
            for term, where in (
                ({**base, "topologyKey": key}, "topologyKey"),
                ({**base, "labelSelector": {"matchLabels": {key: "a"}}}, "labelSelector.matchLabels"),
                ({**base, "labelSelector": {"matchExpressions": [{"key": key, "operator": "Exists"}]}},
                 "labelSelector.matchExpressions[0].key"),
                ({**base, "namespaceSelector": {"matchLabels": {key: "a"}}}, "namespaceSelector.matchLabels"),
                ({**base, "matchLabelKeys": [key]}, "matchLabelKeys[0]"),
                ({**base, "mismatchLabelKeys": [key]}, "mismatchLabelKeys[0]"),
            ):
                cases.append(({"affinity": _affinity(kind, required, term)}, f"{at}.{where}"))
    spread = {"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule", "labelSelector": SELECTOR}
    at = "spec.topologySpreadConstraints[0]"
    for constraint, where in (
        ({**spread, "labelSelector": {"matchLabels": {key: "a"}}}, "labelSelector.matchLabels"),
        ({**spread, "labelSelector": {"matchExpressions": [{"key": key, "operator": "Exists"}]}},
         "labelSelector.matchExpressions[0].key"),
        ({**spread, "matchLabelKeys": [key]}, "matchLabelKeys[0]"),
    ):
        cases.append(({"topologySpreadConstraints": [constraint]}, f"{at}.{where}"))
    cases.append(({"nodeSelector": {key: "a"}}, "spec.nodeSelector"))
    node_term = {"matchExpressions": [{"key": key, "operator": "Exists"}]}
    cases.append(({"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [node_term]}}}},
        "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0]"
        ".matchExpressions[0].key"))
    return cases


@pytest.mark.parametrize("key", BAD_LABEL_KEYS)
def test_every_label_key_field_is_a_valid_label_key_as_the_api_server_checks(key: str, tmp_path: Path) -> None:
    """validatePodAffinityTerm (topologyKey, selectors, matchLabelKeys / mismatchLabelKeys),
    validateTopologySpreadConstraints (selector, matchLabelKeys), ValidateNodeSelectorRequirement,
    the nodeSelector's keys (ValidateLabels):
    each refuses a key that is not a label key with ValidateLabelName's words, one line naming
    file, object and field."""
    for spec, field in _term_cases(key):
        path = tmp_path / "c.yaml"
        manifest = pod("p").cpu("1").label("app", "a").manifest()
        manifest["spec"].update(spec)
        path.write_text(yaml.safe_dump_all([node("n1").cpu("4").manifest(), manifest]))
        result = CliRunner().invoke(main, ["plan", str(path)])
        assert result.exit_code == 2 and result.stdout == "", (field, result.output)
        err = result.stderr.strip()
        assert len(err.splitlines()) == 1 and "Traceback" not in err, err
        assert err.startswith(f"error: {path}: Pod default/p: {field}: Invalid value: "), (field, err)
        assert "must" in err  # the API server's words: "name part must ...", "prefix part must ..."


def test_a_spread_topology_key_that_no_label_can_have_is_taken_as_the_api_server_takes_it(tmp_path: Path) -> None:
    """ValidateTopologyKey (validation.go) only refuses an empty one: the pod is stored, and the
    kube-scheduler finds no node with the key (the node's labels are label keys)."""
    path = tmp_path / "c.yaml"
    constraint = {"maxSkew": 1, "topologyKey": "zone name", "whenUnsatisfiable": "DoNotSchedule",
                  "labelSelector": SELECTOR}
    path.write_text(yaml.safe_dump_all([node("n1").cpu("4").manifest(), pod("p").cpu("1").label("app", "a")
                                        .spec("topologySpreadConstraints", [constraint]).manifest()]))
    result = CliRunner().invoke(main, ["plan", str(path), "-o", "json"])
    assert result.exit_code in (0, 1), result.output
    [left] = json.loads(result.stdout)["unplaced"]
    assert "didn't match pod topology spread constraints (missing required label)" in left["reasons"][0]
