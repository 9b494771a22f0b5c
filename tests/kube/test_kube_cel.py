"""CEL device selectors within the API server's limits (length, nesting, estimated cost: checked
before the CEL library sees them) and their runtime errors in cel-go's words, with nothing of the
library on stderr; hypothesis fuzz: no expression, however random or deep, ends in anything but
a result or a CelError (a crash would end the test run)."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kubeplace.kube.cel_limits import MAX_LENGTH, TOO_COMPLEX, TOO_DEEP, TOO_LONG, check
from kubeplace.kube.device_cel import CelError, CelLimit, compiled, matches
from kubeplace.kube.dra import Device, DeviceId
from tests.device_builders import DRIVER

GPU = Device(DeviceId(DRIVER, "p", "g"), attributes={f"{DRIVER}/model": "A100", f"{DRIVER}/index": 3,
                                                      f"{DRIVER}/driverVersion": (1, 2, 3)},
             capacity={f"{DRIVER}/memory": 40 * 2**30 * 1000})
ATTRS = f'device.attributes["{DRIVER}"]'


def numbers(n: int) -> str:
    return "[" + ",".join(str(i) for i in range(n)) + "]"


def refusal(expression: str) -> str:
    with pytest.raises(CelError) as raised:
        compiled(expression)
    return str(raised.value)


def test_the_length_is_checked_first_in_the_api_servers_words() -> None:
    """40 KB of additions made the CEL library overflow its stack (SIGSEGV)."""
    long = "+".join(["1"] * 20000) + " > 0"
    started = time.monotonic()
    with pytest.raises(CelLimit, match=f"^{TOO_LONG}$"):
        compiled(long)
    assert time.monotonic() - started < 0.1
    assert TOO_LONG == "Too long: may not be more than 10240 bytes"
    at_limit = f'device.driver == "{"x" * (MAX_LENGTH - 20)}"'
    assert len(at_limit) == MAX_LENGTH - 1
    assert not matches(at_limit, GPU)
    assert refusal(at_limit + " " * 2) == TOO_LONG  # bytes, not characters: the API server counts bytes
    assert refusal(f'device.driver == "{"é" * (MAX_LENGTH // 2)}"') == TOO_LONG


@pytest.mark.parametrize("expression", [
    "+".join(["1"] * 300) + " > 0",  # a chain deeper than cel-go's parser allows
    "(" * 70 + "true" + ")" * 70,
    "[" * 70 + "]" * 70 + " == []",
    "size(" * 70 + "[]" + ")" * 70 + " == 0",
])
def test_nesting_beyond_the_parsers_limit_is_a_compile_error(expression: str) -> None:
    with pytest.raises(CelError) as raised:
        compiled(expression)
    assert str(raised.value) == TOO_DEEP
    assert not isinstance(raised.value, CelLimit)


@pytest.mark.parametrize("expression", [
    f"{numbers(100)}.all(a, {numbers(100)}.all(b, {numbers(100)}.all(c, a + b + c >= 0)))",  # ran for seconds
    f"{numbers(20)}.all(a, {numbers(20)}.all(b, {numbers(20)}.all(c, {numbers(20)}.all(d, {numbers(20)}"
    ".all(e, true)))))",  # ran for minutes
    f"{ATTRS}.all(a, {ATTRS}.all(b, {ATTRS}.all(c, a == b && b == c)))",  # 32 attributes each, at most
    "[[0]]" + ".map(x, x + x)" * 24 + "[0].all(y, y == 0)",  # a list doubling 24 times
    f'{{"a": {numbers(500)}}}.all(k, v, v.all(x, {numbers(500)}.all(y, x == y)))',  # the value variable
    "device.attributes.all(d, device.attributes.all(e, d == e))" + ' || "x"' * 1000,  # a domain per literal
])
def test_an_expression_over_the_cost_limit_is_refused_before_it_runs(expression: str) -> None:
    started = time.monotonic()
    assert refusal(expression) == TOO_COMPLEX == "Forbidden: too complex, exceeds cost limit"
    assert time.monotonic() - started < 1


@pytest.mark.parametrize("expression", [
    f'{ATTRS}.model == "A100" && {ATTRS}.index >= 0',
    f'device.capacity["{DRIVER}"].memory.compareTo(quantity("40Gi")) == 0',
    f'{ATTRS}.driverVersion.isGreaterThan(semver("1.2.0"))',
    f'{ATTRS}.exists(k, {ATTRS}.exists(j, k == j))',
    f'"model" in {ATTRS} && {ATTRS}.model.startsWith("A")',
    f"{numbers(100)}.exists(a, {numbers(100)}.exists(b, a == 99 && b == 99))",
])
def test_an_expression_within_the_limits_runs(expression: str) -> None:
    assert matches(expression, GPU) is True


@pytest.mark.parametrize(("expression", "words"), [
    (f"{ATTRS}.index / 0 == 1", "division by zero"),
    (f"{ATTRS}.index % 0 == 1", "modulus by zero"),
    (f"{ATTRS}.index + 9223372036854775807 > 0", "integer overflow"),
    (f"uint({ATTRS}.index) - 4u > 0u", "unsigned integer overflow"),
    (f"{ATTRS}.memory == 1", "no such key: memory"),
    ('device.attributes["other.io"].model == "x"', "no such key: model"),
    (f"[1][{ATTRS}.index] == 1", "index '3' out of range"),
    (f"{ATTRS}.model + 1 == 1", "no such overload"),
    ('quantity("lots") == quantity("1")', "quantity('lots'): invalid quantity 'lots'"),
    ('semver("one") == semver("1.0.0")', "semver('one'): not a semantic version"),
])
def test_a_runtime_error_is_in_cel_gos_words_and_nothing_reaches_stderr(
        expression: str, words: str, capfd: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(CelError) as raised:
        matches(expression, GPU)
    assert str(raised.value) == f"CEL runtime error: {words}"
    assert capfd.readouterr().err == ""


def test_a_failing_function_leaves_stderr_empty_where_logging_is_not_configured() -> None:
    """The library logs a failing function as a warning of the ``cel`` logger, which Python
    writes to stderr when nothing configured logging (as in ``kubeplace plan``)."""
    script = ("from kubeplace.kube.device_cel import CelError, matches\n"
              "from kubeplace.kube.dra import Device, DeviceId\n"
              "try:\n"
              "    matches('quantity(\"lots\") == quantity(\"1\")', Device(DeviceId('d', 'p', 'g')))\n"
              "except CelError as error:\n"
              "    print(error)\n")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=True)
    assert done.stdout == "CEL runtime error: quantity('lots'): invalid quantity 'lots'\n"
    assert done.stderr == ""


# ---------------------------------------------------------------------- fuzz

_LEAF = st.sampled_from([
    "1", "0", "-1", "1u", "2.5", "true", "false", "null", '"A100"', "''", 'b"x"', 'r"\\d"', "9223372036854775807",
    "device.driver", "device.allowMultipleAllocations", f"{ATTRS}.model", f"{ATTRS}.index", f"{ATTRS}.driverVersion",
    f'device.capacity["{DRIVER}"].memory', f'{ATTRS}["model"]', "[]", "{}", "[1, 2, 3]", '{"a": 1}', 'quantity("1Gi")',
    'semver("1.2.3")', "x",
])


def _grow(inner: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
    pair = st.tuples(inner, inner)
    return st.one_of(
        st.builds(lambda ab, op: f"{ab[0]} {op} {ab[1]}", pair, st.sampled_from(
            ["+", "-", "*", "/", "%", "==", "!=", "<", ">=", "&&", "||", "in"])),
        st.builds(lambda a: f"!{a}", inner), st.builds(lambda a: f"-({a})", inner),
        st.builds(lambda a: f"({a})", inner),
        st.builds(lambda abc: f"{abc[0]} ? {abc[1]} : {abc[2]}", st.tuples(inner, inner, inner)),
        st.builds(lambda ab: f"[{ab[0]}, {ab[1]}]", pair), st.builds(lambda ab: f"{{{ab[0]}: {ab[1]}}}", pair),
        st.builds(lambda ab: f"{ab[0]}[{ab[1]}]", pair),
        st.builds(lambda ab, m: f"{ab[0]}.{m}(x, {ab[1]})", pair,
                  st.sampled_from(["all", "exists", "exists_one", "map", "filter"])),
        st.builds(lambda ab, m: f"{ab[0]}.{m}(k, x, {ab[1]})", pair, st.sampled_from(["all", "exists"])),
        st.builds(lambda abc: f"{abc[0]}.map(x, {abc[1]}, {abc[2]})", st.tuples(inner, inner, inner)),
        st.builds(lambda a, f: f"{f}({a})", inner, st.sampled_from(
            ["size", "int", "uint", "double", "string", "bool", "has", "quantity", "semver", "dyn", "nope"])),
        st.builds(lambda ab, f: f"{ab[0]}.{f}({ab[1]})", pair, st.sampled_from(
            ["compareTo", "isGreaterThan", "add", "matches", "startsWith", "contains", "major", "asInteger"])),
    )


EXPRESSIONS = st.recursive(_LEAF, _grow, max_leaves=12)


def _evaluated(expression: str) -> None:
    """A result or a CelError, nothing else."""
    try:
        matches(expression, GPU)
    except CelError as error:
        assert str(error) and "Traceback" not in str(error)


@settings(max_examples=300, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(EXPRESSIONS)
def test_fuzz_grammatical_expressions_are_read_by_the_estimator_and_never_raise_else(expression: str) -> None:
    try:
        compiled(expression)
    except CelError:
        pass  # a compile error or a limit, in words
    else:
        assert check(expression), expression  # whatever the library compiles, the estimator read
    _evaluated(expression)


@settings(max_examples=300, deadline=None, derandomize=True)
@given(st.text(alphabet=st.sampled_from(list("()[]{}.,:?!-+*/%<>=&|\"'\\ 01xu_adevic")), max_size=60)
       | st.text(max_size=40))
def test_fuzz_garbage_is_a_cel_error_or_a_result(text: str) -> None:
    _evaluated(text)


@settings(max_examples=60, deadline=None, derandomize=True)
@given(st.sampled_from(["(", "[", "!", "-", "size(", "[1].all(x, ", "dyn("]), st.sampled_from(["+ 1", "&& true", ""]),
       st.integers(1, 3000))
def test_fuzz_deep_nesting_and_long_chains_never_crash(opening: str, chain: str, depth: int) -> None:
    closing = {"(": ")", "[": "]", "size(": ")", "[1].all(x, ": ")", "dyn(": ")"}.get(opening, "")
    _evaluated(opening * depth + "1" + closing * depth + (f" {chain}" * depth)[:MAX_LENGTH])
