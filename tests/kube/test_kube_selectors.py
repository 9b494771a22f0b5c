from __future__ import annotations

import pytest

from kubeplace.kube.errors import InputError
from kubeplace.kube.objects import Requirement, SelectorTerm
from kubeplace.kube.selectors import matches, parse_selector, requirement_matches, terms_match


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("", ()),
        ("app=web", (Requirement("app", "In", ("web",)),)),
        ("app==web", (Requirement("app", "In", ("web",)),)),
        ("app!=web", (Requirement("app", "NotIn", ("web",)),)),
        ("tier in (a, b)", (Requirement("tier", "In", ("a", "b")),)),
        ("tier notin (a)", (Requirement("tier", "NotIn", ("a",)),)),
        ("canary", (Requirement("canary", "Exists"),)),
        ("!canary", (Requirement("canary", "DoesNotExist"),)),
        ("example.com/team=a", (Requirement("example.com/team", "In", ("a",)),)),
        ("gen>3", (Requirement("gen", "Gt", ("3",)),)),
        ("empty=", (Requirement("empty", "In", ("",)),)),
        (
            "app=web, tier in (a,b),!canary",
            (
                Requirement("app", "In", ("web",)),
                Requirement("tier", "In", ("a", "b")),
                Requirement("canary", "DoesNotExist"),
            ),
        ),
    ],
)
def test_parse_selector(text: str, expected: tuple[Requirement, ...]) -> None:
    assert parse_selector(text) == expected


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("app=web,", "trailing comma"),
        ("tier in a", "expected '(' after in/notin"),
        ("tier in (a", "missing ')'"),
        ("tier in ()", "at least one value"),
        ("=web", "invalid label key"),
        ("app web", "unexpected 'web'"),
        ("!", "missing label key"),
        ("a=b=c", "unexpected '='"),
        ("gen>x", "not an integer"),
        ("app=we b", "unexpected 'b'"),
        ("app=-web", "invalid label value"),
    ],
)
def test_bad_selectors(text: str, problem: str) -> None:
    with pytest.raises(InputError) as caught:
        parse_selector(text)
    assert problem in str(caught.value)
    assert str(caught.value).startswith(f"invalid selector {text!r}: ")


@pytest.mark.parametrize(
    ("selector", "labels", "matched"),
    [
        ("", {}, True),
        ("app=web", {"app": "web"}, True),
        ("app=web", {"app": "api"}, False),
        ("app!=web", {}, True),  # NotIn matches a missing label
        ("app in (web,api)", {"app": "api"}, True),
        ("app notin (web)", {"app": "web"}, False),
        ("canary", {"canary": ""}, True),
        ("!canary", {"canary": "x"}, False),
        ("app=web,tier=fe", {"app": "web"}, False),
        ("gen>3", {"gen": "4"}, True),
        ("gen>3", {"gen": "three"}, False),
        ("gen<3", {}, False),
    ],
)
def test_matches(selector: str, labels: dict[str, str], matched: bool) -> None:
    assert matches(parse_selector(selector), labels) is matched


def test_gt_lt_need_an_integer_label() -> None:
    assert requirement_matches(Requirement("n", "Lt", ("10",)), {"n": "9"})
    assert not requirement_matches(Requirement("n", "Lt", ("10",)), {"n": "10"})
    assert not requirement_matches(Requirement("n", "Gt", ("1",)), {"n": "2.5"})


def test_terms_are_ored_and_an_empty_term_matches_nothing() -> None:
    zone_a = SelectorTerm(match_expressions=(Requirement("zone", "In", ("a",)),))
    named = SelectorTerm(match_fields=(Requirement("metadata.name", "In", ("n2",)),))
    assert terms_match(None, {}, "n1")
    assert terms_match((zone_a, named), {"zone": "a"}, "n1")
    assert terms_match((zone_a, named), {}, "n2")
    assert not terms_match((zone_a, named), {"zone": "b"}, "n1")
    assert not terms_match((SelectorTerm(),), {"zone": "a"}, "n1")
