"""Inter-pod (anti-)affinity terms and topology spread constraints of a pod, as typed objects.

Parsing does what the API server does before the pod is stored: it validates the fields
(``pkg/apis/core/validation``: a topologyKey that is not empty (and, in an affinity term, a
label key: a spread constraint's is not checked further, and no node has a label it cannot be),
label keys in the selectors and in matchLabelKeys / mismatchLabelKeys, weights 1..100, maxSkew and
minDomains of at least 1, known whenUnsatisfiable and inclusion policies) and merges
``matchLabelKeys`` / ``mismatchLabelKeys`` into the label selectors (``strategy.go
mutatePodAffinity``, ``mutateTopologySpreadConstraints``). The merge is idempotent, so a pod
read back from an API server that already merged is unchanged.

:func:`term_matches` is the kube-scheduler's ``AffinityTerm.Matches``: the namespace scope
(namespaceSelector evaluated exactly against the snapshot's Namespace labels) and the selector.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from kubeplace.kube.errors import InputError, expect_list, expect_mapping, expect_str
from kubeplace.kube.objects import (
    DO_NOT_SCHEDULE,
    HONOR,
    IGNORE,
    SCHEDULE_ANYWAY,
    Pod,
    PodAffinityTerm,
    Requirement,
    SpreadConstraint,
)
from kubeplace.kube.selectors import expect_label_key, label_selector, matches

POD_AFFINITY = "podAffinity"
POD_ANTI_AFFINITY = "podAntiAffinity"
REQUIRED = "requiredDuringSchedulingIgnoredDuringExecution"
PREFERRED = "preferredDuringSchedulingIgnoredDuringExecution"
SPREAD_FIELD = "spec.topologySpreadConstraints"
POLICIES = (HONOR, IGNORE)


def required_terms(spec: Mapping[str, Any], labels: Mapping[str, str], kind: str) -> tuple[PodAffinityTerm, ...]:
    """The required terms of ``kind`` (podAffinity or podAntiAffinity). Anti-affinity terms
    with a null labelSelector are dropped (they match nothing); affinity ones are kept (they
    make the pod unschedulable, as in the kube-scheduler)."""
    field = f"spec.affinity.{kind}.{REQUIRED}"
    raw_terms = expect_list(_rules(spec, kind).get(REQUIRED), field)
    terms = [_term(raw, f"{field}[{i}]", labels, 0) for i, raw in enumerate(raw_terms)]
    return tuple(t for t in terms if t.selector is not None or kind == POD_AFFINITY)


def preferred_terms(spec: Mapping[str, Any], labels: Mapping[str, str], kind: str) -> tuple[PodAffinityTerm, ...]:
    """The weighted preferred terms of ``kind``, each term carrying its weight."""
    field = f"spec.affinity.{kind}.{PREFERRED}"
    terms = []
    for i, raw in enumerate(expect_list(_rules(spec, kind).get(PREFERRED), field)):
        weighted = expect_mapping(raw, f"{field}[{i}]")
        weight = _weight(weighted.get("weight"), f"{field}[{i}].weight")
        term_field = f"{field}[{i}].podAffinityTerm"
        terms.append(_term(weighted.get("podAffinityTerm"), term_field, labels, weight))
    return tuple(terms)


def spread_constraints(spec: Mapping[str, Any], labels: Mapping[str, str]) -> tuple[SpreadConstraint, ...]:
    """The pod's topologySpreadConstraints, validated and with matchLabelKeys merged."""
    found: list[SpreadConstraint] = []
    for i, raw in enumerate(expect_list(spec.get("topologySpreadConstraints"), SPREAD_FIELD)):
        field = f"{SPREAD_FIELD}[{i}]"
        found.append(_spread(expect_mapping(raw, field), field, labels))
        if any((c.topology_key, c.hard) == (found[-1].topology_key, found[-1].hard) for c in found[:-1]):
            raise InputError("duplicate {topologyKey, whenUnsatisfiable}", field=field,
                             expected="one constraint per topologyKey and whenUnsatisfiable")
    return tuple(found)


def in_scope(term: PodAffinityTerm, owner_namespace: str, namespace: str,
             namespace_labels: Mapping[str, Mapping[str, str]]) -> bool:
    """Whether pods of ``namespace`` are in the namespace scope of ``term``, carried by a pod of
    ``owner_namespace``. A namespaceSelector is evaluated against the namespace's labels; a
    namespace without a Namespace object has no labels (``GetNamespaceLabelsSnapshot``)."""
    if not term.namespaces and term.namespace_selector is None:
        return namespace == owner_namespace
    if namespace in term.namespaces:
        return True
    if term.namespace_selector is None:
        return False
    return matches(term.namespace_selector, namespace_labels.get(namespace, {}))


def selects(selector: Sequence[Requirement] | None, labels: Mapping[str, str]) -> bool:
    """A label selector: None (null) matches nothing, an empty one everything."""
    return selector is not None and matches(selector, labels)


def term_matches(term: PodAffinityTerm, owner_namespace: str, pod: Pod,
                 namespace_labels: Mapping[str, Mapping[str, str]]) -> bool:
    """``AffinityTerm.Matches``: ``pod`` is in the term's namespace scope and its selector."""
    return in_scope(term, owner_namespace, pod.namespace, namespace_labels) and selects(term.selector, pod.labels)


def _rules(spec: Mapping[str, Any], kind: str) -> Mapping[str, Any]:
    affinity = expect_mapping(spec.get("affinity"), "spec.affinity")
    return expect_mapping(affinity.get(kind), f"spec.affinity.{kind}")


def _term(raw: object, field: str, labels: Mapping[str, str], weight: int) -> PodAffinityTerm:
    term = expect_mapping(raw, field)
    topology_key = expect_str(term.get("topologyKey"), f"{field}.topologyKey")
    if not topology_key:
        raise InputError("empty topologyKey", field=f"{field}.topologyKey", expected="a node label key")
    expect_label_key(topology_key, f"{field}.topologyKey")  # validatePodAffinityTerm: ValidateLabelName
    selector = label_selector(term.get("labelSelector"), f"{field}.labelSelector")
    match_keys = _keys(term.get("matchLabelKeys"), f"{field}.matchLabelKeys", selector)
    mismatch_keys = _keys(term.get("mismatchLabelKeys"), f"{field}.mismatchLabelKeys", selector)
    both = sorted(set(match_keys) & set(mismatch_keys))
    if both:
        raise InputError(f"{both[0]!r} is in both matchLabelKeys and mismatchLabelKeys",
                         field=f"{field}.matchLabelKeys", expected="each key in one of the two lists")
    selector = merge_label_keys(selector, match_keys, "In", labels)
    selector = merge_label_keys(selector, mismatch_keys, "NotIn", labels)
    return PodAffinityTerm(
        selector=selector,
        namespaces=tuple(expect_str(n, f"{field}.namespaces[{k}]")
                         for k, n in enumerate(expect_list(term.get("namespaces"), f"{field}.namespaces"))),
        namespace_selector=label_selector(term.get("namespaceSelector"), f"{field}.namespaceSelector"),
        topology_key=topology_key,
        match_label_keys=match_keys,
        mismatch_label_keys=mismatch_keys,
        weight=weight,
    )


def merge_label_keys(selector: tuple[Requirement, ...] | None, keys: Sequence[str], operator: str,
                     labels: Mapping[str, str]) -> tuple[Requirement, ...] | None:
    """``applyLabelKeysToLabelSelector``: ``key <operator> [the pod's value]`` appended for each
    key the pod has a label for; a null selector stays null. A requirement already present
    (the API server merged it before) is not added twice."""
    if selector is None:
        return None
    merged = list(selector)
    for key in keys:
        if key in labels and (added := Requirement(key, operator, (labels[key],))) not in merged:
            merged.append(added)
    return tuple(merged)


def _keys(raw: object, field: str, selector: tuple[Requirement, ...] | None) -> tuple[str, ...]:
    """matchLabelKeys or mismatchLabelKeys: label keys (``validateLabelKeys``), only beside a selector."""
    keys = tuple(expect_str(k, f"{field}[{i}]") for i, k in enumerate(expect_list(raw, field)))
    if keys and selector is None:
        raise InputError("set without a labelSelector", field=field, expected="a labelSelector beside it")
    for i, key in enumerate(keys):
        expect_label_key(key, f"{field}[{i}]")
    return keys


def _weight(raw: object, field: str) -> int:
    if isinstance(raw, bool) or not isinstance(raw, int) or not 1 <= raw <= 100:
        raise InputError(f"weight {raw!r} is out of range", field=field, expected="an integer from 1 to 100")
    return raw


def _spread(raw: Mapping[str, Any], field: str, labels: Mapping[str, str]) -> SpreadConstraint:
    max_skew = raw.get("maxSkew")
    if isinstance(max_skew, bool) or not isinstance(max_skew, int) or max_skew < 1:
        raise InputError(f"maxSkew {max_skew!r} is not a positive integer", field=f"{field}.maxSkew",
                         expected="an integer of at least 1")
    topology_key = expect_str(raw.get("topologyKey"), f"{field}.topologyKey")
    if not topology_key:
        raise InputError("empty topologyKey", field=f"{field}.topologyKey", expected="a node label key")
    action = raw.get("whenUnsatisfiable")
    if action not in (DO_NOT_SCHEDULE, SCHEDULE_ANYWAY):
        raise InputError(f"unknown whenUnsatisfiable {action!r}", field=f"{field}.whenUnsatisfiable",
                         expected=f"{DO_NOT_SCHEDULE} or {SCHEDULE_ANYWAY}")
    min_domains = raw.get("minDomains")
    if min_domains is not None:
        if isinstance(min_domains, bool) or not isinstance(min_domains, int) or min_domains < 1:
            raise InputError(f"minDomains {min_domains!r} is not a positive integer", field=f"{field}.minDomains",
                             expected="an integer of at least 1")
        if action != DO_NOT_SCHEDULE:
            raise InputError(f"minDomains with whenUnsatisfiable {action}", field=f"{field}.minDomains",
                             expected=f"minDomains only with whenUnsatisfiable {DO_NOT_SCHEDULE}")
    selector = label_selector(raw.get("labelSelector"), f"{field}.labelSelector")
    match_keys = _keys(raw.get("matchLabelKeys"), f"{field}.matchLabelKeys", selector)
    return SpreadConstraint(
        max_skew=max_skew,
        topology_key=topology_key,
        hard=action == DO_NOT_SCHEDULE,
        selector=merge_label_keys(selector, match_keys, "In", labels),
        match_label_keys=match_keys,
        min_domains=1 if min_domains is None else min_domains,
        node_affinity_policy=_policy(raw.get("nodeAffinityPolicy"), f"{field}.nodeAffinityPolicy", HONOR),
        node_taints_policy=_policy(raw.get("nodeTaintsPolicy"), f"{field}.nodeTaintsPolicy", IGNORE),
    )


def _policy(raw: object, field: str, default: str) -> str:
    if raw is None:
        return default
    if raw not in POLICIES:
        raise InputError(f"unknown policy {raw!r}", field=field, expected=f"{HONOR} or {IGNORE}")
    return str(raw)
