"""Label selectors: kubectl's ``-l`` syntax, and matching requirements against labels.

Syntax (k8s.io/apimachinery/pkg/labels/selector.go), requirements separated by commas and
ANDed::

    key=value   key==value   key!=value   key in (a,b)   key notin (a)   key   !key
    key>3   key<3

:func:`required_node_affinity` parses a pod's required node affinity into the same types.

A selector becomes a tuple of :class:`kube.objects.Requirement` with the node-affinity operator
names (In, NotIn, Exists, DoesNotExist, Gt, Lt), so the same matching serves ``-l``, node
affinity terms and node selectors.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

from kubeplace.kube.errors import InputError, dns1123_problems, expect_list, expect_mapping, expect_str
from kubeplace.kube.objects import PreferredNodeTerm, Requirement, SelectorTerm

IN = "In"
NOT_IN = "NotIn"
EXISTS = "Exists"
DOES_NOT_EXIST = "DoesNotExist"
GT = "Gt"
LT = "Lt"
OPERATORS = (IN, NOT_IN, EXISTS, DOES_NOT_EXIST, GT, LT)
LABEL_OPERATORS = (IN, NOT_IN, EXISTS, DOES_NOT_EXIST)

EXPECTED_SELECTOR = "a label selector such as 'app=web,tier in (a,b),!canary'"

_TOKEN = re.compile(r"\s*(==|!=|=|!|\(|\)|,|>|<|[^\s=!(),<>]+)")
_KEY = re.compile(r"([A-Za-z0-9]([-A-Za-z0-9.]*[A-Za-z0-9])?/)?[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?")
_VALUE = re.compile(r"([A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?)?")
_DNS_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
_SYMBOL_OPERATORS = {"=": IN, "==": IN, "!=": NOT_IN, ">": GT, "<": LT}
_WORD_OPERATORS = {"in": IN, "notin": NOT_IN}


_NAME_PART = re.compile(r"([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]")
_NAME_RULE = ("must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an "
              "alphanumeric character (e.g. 'MyName', or 'my.name', or '123-abc', regex used for validation is "
              f"'{_NAME_PART.pattern}')")

def label_key_problems(key: str) -> list[str]:
    """Why ``key`` is not a label key (a qualified name), in the API server's words (apimachinery
    ``IsLabelKey``, which ``ValidateLabelName`` reports); empty when it is one."""
    parts = key.split("/")
    if len(parts) > 2:
        return [f"a valid label key {_NAME_RULE} with an optional DNS subdomain prefix and '/' "
                "(e.g. 'example.com/MyName')"]
    problems = []
    if len(parts) == 2:
        prefix = parts[0]
        problems += (["prefix part must be non-empty"] if not prefix
                     else [f"prefix part {p}" for p in dns1123_problems(prefix)])
    name = parts[-1]
    if not name:
        problems.append("name part must be non-empty")
    elif len(name) > 63:
        problems.append("name part must be no more than 63 bytes")
    if not _NAME_PART.fullmatch(name):
        problems.append(f"name part {_NAME_RULE}")
    return problems


def is_qualified_name(key: str) -> bool:
    """A Kubernetes qualified name (a label key): an optional DNS subdomain prefix and ``/``, then
    a name of at most 63 characters (:func:`label_key_problems`)."""
    return not label_key_problems(key)


def expect_label_key(key: str, field: str) -> str:
    """``key`` when it is a label key, as ``ValidateLabelName`` checks the label keys of a
    selector, a topologyKey or a matchLabelKeys entry; else InputError with the API server's words."""
    problems = label_key_problems(key)
    if problems:
        raise InputError(f"Invalid value: {json.dumps(key, ensure_ascii=False)}: {'; '.join(problems)}", field=field)
    return key


def is_dns_label(name: str) -> bool:
    """An RFC 1123 DNS label (ValidateDNS1123Label): lower-case alphanumerics and '-', starting and
    ending alphanumeric, at most 63 characters."""
    return len(name) <= 63 and bool(_DNS_LABEL.fullmatch(name))


def parse_selector(text: str) -> tuple[Requirement, ...]:
    """Parse a kubectl label selector; an empty selector matches everything.

    Raises :class:`InputError` naming the selector and what is wrong with it.
    """
    tokens = _tokenize(text)
    requirements: list[Requirement] = []
    position = 0
    while position < len(tokens):
        requirement, position = _requirement(tokens, position, text)
        requirements.append(requirement)
        if position < len(tokens):
            if tokens[position] != ",":
                raise _error(text, f"unexpected {tokens[position]!r} after a requirement")
            position += 1
            if position == len(tokens):
                raise _error(text, "trailing comma")
    return tuple(requirements)


def matches(requirements: Sequence[Requirement], labels: Mapping[str, str]) -> bool:
    """True when every requirement holds for ``labels`` (an empty list matches everything)."""
    return all(requirement_matches(requirement, labels) for requirement in requirements)


def requirement_matches(requirement: Requirement, labels: Mapping[str, str]) -> bool:
    """One requirement with node-affinity semantics: NotIn is true when the label is missing;
    Gt/Lt are false when the label is missing or not an integer."""
    value = labels.get(requirement.key)
    operator = requirement.operator
    if operator == IN:
        return value is not None and value in requirement.values
    if operator == NOT_IN:
        return value is None or value not in requirement.values
    if operator == EXISTS:
        return value is not None
    if operator == DOES_NOT_EXIST:
        return value is None
    if operator in (GT, LT):
        return _compare_integer(value, requirement)
    raise ValueError(f"unknown operator {operator!r}")


def term_matches(term: SelectorTerm, labels: Mapping[str, str], node_name: str) -> bool:
    """A node selector term: expressions and fields ANDed; an empty term matches nothing
    (component-helpers nodeaffinity). ``matchFields`` only knows ``metadata.name``."""
    if not term.match_expressions and not term.match_fields:
        return False
    fields = {"metadata.name": node_name}
    return matches(term.match_expressions, labels) and matches(term.match_fields, fields)


def terms_match(terms: Sequence[SelectorTerm] | None, labels: Mapping[str, str], node_name: str) -> bool:
    """Required node affinity: terms ORed; None (no affinity) matches every node."""
    if terms is None:
        return True
    return any(term_matches(term, labels, node_name) for term in terms)


def _compare_integer(value: str | None, requirement: Requirement) -> bool:
    if value is None or len(requirement.values) != 1:
        return False
    try:
        actual, bound = int(value), int(requirement.values[0])
    except ValueError:
        return False
    return actual > bound if requirement.operator == GT else actual < bound


def _tokenize(text: str) -> list[str]:
    tokens: list[str] = []
    position = 0
    stripped_end = len(text.rstrip())
    while position < stripped_end:
        found = _TOKEN.match(text, position)
        if found is None:  # pragma: no cover - the pattern accepts any non-space character
            raise _error(text, f"unexpected character {text[position]!r}")
        tokens.append(found.group(1))
        position = found.end()
    return tokens


def _requirement(tokens: list[str], position: int, text: str) -> tuple[Requirement, int]:
    if tokens[position] == "!":
        key = _key(tokens, position + 1, text)
        return Requirement(key, DOES_NOT_EXIST), position + 2
    key = _key(tokens, position, text)
    position += 1
    if position == len(tokens) or tokens[position] == ",":
        return Requirement(key, EXISTS), position
    operator_token = tokens[position]
    if operator_token in _SYMBOL_OPERATORS:
        value, position = _single_value(tokens, position + 1, text)
        operator = _SYMBOL_OPERATORS[operator_token]
        if operator in (GT, LT) and not _is_integer(value):
            raise _error(text, f"{key}{operator_token}{value}: {value!r} is not an integer")
        return Requirement(key, operator, (value,)), position
    if operator_token in _WORD_OPERATORS:
        values, position = _value_set(tokens, position + 1, text)
        return Requirement(key, _WORD_OPERATORS[operator_token], values), position
    raise _error(text, f"unexpected {operator_token!r} after key {key!r}")


def _key(tokens: list[str], position: int, text: str) -> str:
    if position >= len(tokens):
        raise _error(text, "missing label key")
    key = tokens[position]
    if not is_qualified_name(key):
        raise _error(text, f"invalid label key {key!r}")
    return key


def _single_value(tokens: list[str], position: int, text: str) -> tuple[str, int]:
    """The value after = == != > <; an empty value (``tier=``) is allowed, as in kubectl."""
    if position == len(tokens) or tokens[position] == ",":
        return "", position
    return _checked_value(tokens[position], text), position + 1


def _value_set(tokens: list[str], position: int, text: str) -> tuple[tuple[str, ...], int]:
    if position >= len(tokens) or tokens[position] != "(":
        raise _error(text, "expected '(' after in/notin")
    values: list[str] = []
    position += 1
    expect_value = True
    while position < len(tokens) and tokens[position] != ")":
        token = tokens[position]
        if token == ",":
            if expect_value:
                values.append("")
            expect_value = True
        elif expect_value:
            values.append(_checked_value(token, text))
            expect_value = False
        else:
            raise _error(text, f"expected ',' or ')' before {token!r}")
        position += 1
    if position >= len(tokens):
        raise _error(text, "missing ')'")
    if not values:
        raise _error(text, "in/notin needs at least one value")
    return tuple(values), position + 1


def _checked_value(value: str, text: str) -> str:
    if not _VALUE.fullmatch(value) or len(value) > 63:
        raise _error(text, f"invalid label value {value!r}")
    return value


def _is_integer(value: str) -> bool:
    try:
        int(value)
    except ValueError:
        return False
    return True


def _error(text: str, problem: str) -> InputError:
    return InputError(f"invalid selector {text!r}: {problem}", expected=EXPECTED_SELECTOR)


REQUIRED_NODE_AFFINITY_FIELD = "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution"


def required_node_affinity(spec: Mapping[str, Any]) -> tuple[SelectorTerm, ...] | None:
    """The required node affinity terms of a pod spec, validated as the API server does;
    None when there are none. An empty term is kept: it matches no node."""
    affinity = expect_mapping(spec.get("affinity"), "spec.affinity")
    node_affinity = expect_mapping(affinity.get("nodeAffinity"), "spec.affinity.nodeAffinity")
    required = node_affinity.get("requiredDuringSchedulingIgnoredDuringExecution")
    if required is None:
        return None
    selector = expect_mapping(required, REQUIRED_NODE_AFFINITY_FIELD)
    terms_field = f"{REQUIRED_NODE_AFFINITY_FIELD}.nodeSelectorTerms"
    raw_terms = expect_list(selector.get("nodeSelectorTerms"), terms_field)
    if not raw_terms:
        raise InputError("no node selector terms", field=terms_field, expected="at least one term")
    return tuple(_term(raw, f"{terms_field}[{index}]") for index, raw in enumerate(raw_terms))


PREFERRED_NODE_AFFINITY_FIELD = "spec.affinity.nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution"


def preferred_node_affinity(spec: Mapping[str, Any]) -> tuple[PreferredNodeTerm, ...]:
    """The preferred node affinity terms of a pod spec, validated as the API server does
    (weight 1..100, each preference a valid node selector term)."""
    affinity = expect_mapping(spec.get("affinity"), "spec.affinity")
    node_affinity = expect_mapping(affinity.get("nodeAffinity"), "spec.affinity.nodeAffinity")
    found = []
    for index, raw in enumerate(expect_list(node_affinity.get("preferredDuringSchedulingIgnoredDuringExecution"),
                                            PREFERRED_NODE_AFFINITY_FIELD)):
        field = f"{PREFERRED_NODE_AFFINITY_FIELD}[{index}]"
        preferred = expect_mapping(raw, field)
        weight = preferred.get("weight")
        if isinstance(weight, bool) or not isinstance(weight, int) or not 1 <= weight <= 100:
            raise InputError(f"weight {weight!r} is out of range", field=f"{field}.weight",
                             expected="an integer from 1 to 100")
        found.append(PreferredNodeTerm(weight, _term(preferred.get("preference"), f"{field}.preference")))
    return tuple(found)


def _term(raw: object, field: str) -> SelectorTerm:
    term = expect_mapping(raw, field)
    expressions = expect_list(term.get("matchExpressions"), f"{field}.matchExpressions")
    fields = expect_list(term.get("matchFields"), f"{field}.matchFields")
    return SelectorTerm(
        match_expressions=tuple(
            _expression(item, f"{field}.matchExpressions[{index}]") for index, item in enumerate(expressions)
        ),
        match_fields=tuple(_field(item, f"{field}.matchFields[{index}]") for index, item in enumerate(fields)),
    )


def label_requirement(raw: object, field: str) -> Requirement:
    """One matchExpressions entry of a metav1.LabelSelector (In, NotIn, Exists, DoesNotExist)."""
    return _expression(raw, field, LABEL_OPERATORS)


def label_selector(raw: object, field: str) -> tuple[Requirement, ...] | None:
    """A metav1.LabelSelector (matchLabels and matchExpressions, ANDed), validated as
    ``ValidateLabelSelector`` does; None when null."""
    if raw is None:
        return None
    selector = expect_mapping(raw, field)
    out = [Requirement(expect_label_key(str(k), f"{field}.matchLabels"), IN,
                       (expect_str(v, f"{field}.matchLabels.{k}"),))
           for k, v in expect_mapping(selector.get("matchLabels"), f"{field}.matchLabels").items()]
    for j, item in enumerate(expect_list(selector.get("matchExpressions"), f"{field}.matchExpressions")):
        out.append(label_requirement(item, f"{field}.matchExpressions[{j}]"))
    return tuple(out)


def node_selector_terms(raw: object, field: str) -> tuple[SelectorTerm, ...]:
    """The terms of a core/v1 NodeSelector (a PersistentVolume's ``spec.nodeAffinity.required``),
    validated as for pods."""
    terms_field = f"{field}.nodeSelectorTerms"
    raw_terms = expect_list(expect_mapping(raw, field).get("nodeSelectorTerms"), terms_field)
    return tuple(_term(item, f"{terms_field}[{index}]") for index, item in enumerate(raw_terms))


def _expression(raw: object, field: str, operators: Sequence[str] = OPERATORS) -> Requirement:
    expression = expect_mapping(raw, field)
    key = expect_str(expression.get("key"), f"{field}.key")
    if not key:
        raise InputError("missing key", field=f"{field}.key")
    expect_label_key(key, f"{field}.key")
    operator = expect_str(expression.get("operator"), f"{field}.operator")
    if operator not in operators:
        raise InputError(f"unknown operator {operator!r}", field=f"{field}.operator", expected=", ".join(operators))
    values = tuple(
        expect_str(value, f"{field}.values[{index}]")
        for index, value in enumerate(expect_list(expression.get("values"), f"{field}.values"))
    )
    if operator in (IN, NOT_IN) and not values:
        raise InputError(f"{operator} without values", field=f"{field}.values", expected="at least one value")
    if operator in (EXISTS, DOES_NOT_EXIST) and values:
        raise InputError(f"{operator} with values", field=f"{field}.values", expected="no values")
    if operator in (GT, LT) and (len(values) != 1 or not _is_integer(values[0])):
        raise InputError(
            f"{operator} needs one integer value, got {list(values)}",
            field=f"{field}.values",
            expected="a single integer such as ['4']",
        )
    return Requirement(key, operator, values)


def _field(raw: object, field: str) -> Requirement:
    requirement = _expression(raw, field)
    if requirement.key != "metadata.name":
        raise InputError(f"unsupported field {requirement.key!r}", field=f"{field}.key", expected="metadata.name")
    if requirement.operator not in (IN, NOT_IN) or len(requirement.values) != 1:
        raise InputError(
            f"{requirement.operator} with {len(requirement.values)} values on metadata.name",
            field=f"{field}.operator",
            expected="In or NotIn with exactly one node name",
        )
    return requirement
