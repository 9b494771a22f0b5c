from __future__ import annotations

import pytest

from kubeplace.kube.quantity import (
    MAX_QUANTITY,
    QuantityError,
    check_amount,
    count_value,
    milli_value,
    resource_amount,
    whole_value,
)


@pytest.mark.parametrize(
    ("text", "milli"),
    [
        ("500m", 500),
        ("1.5", 1500),
        ("2", 2000),
        ("1e3", 1_000_000),
        ("0.1m", 1),  # rounded up, as Kubernetes MilliValue does
        ("1n", 1),
        ("100u", 1),
        ("0", 0),
        ("+1", 1000),
        (".5", 500),
        (0.25, 250),  # a YAML float
        (3, 3000),  # a YAML int
    ],
)
def test_milli_value(text: str | float, milli: int) -> None:
    assert milli_value(text) == milli


@pytest.mark.parametrize(
    ("text", "whole"),
    [
        ("2Gi", 2 * 1024**3),
        ("128974848", 128974848),
        ("129e6", 129_000_000),
        ("129M", 129_000_000),
        ("123Mi", 123 * 1024**2),
        ("1.5Gi", 3 * 1024**3 // 2),
        ("1Ki", 1024),
        ("1k", 1000),
        ("7Pi", 7 * 2**50),
        ("0.5", 1),  # half a byte rounds up
    ],
)
def test_whole_value(text: str, whole: int) -> None:
    assert whole_value(text) == whole


@pytest.mark.parametrize(
    ("resource", "text", "amount"),
    [
        ("cpu", "250m", 250),
        ("memory", "1Gi", 1024**3),
        ("ephemeral-storage", "10Gi", 10 * 1024**3),
        ("hugepages-2Mi", "4Mi", 4 * 1024**2),
        ("pods", "110", 110),
        ("nvidia.com/gpu", "8", 8),
        ("example.com/fpga", 2, 2),
        ("nvidia.com/gpu", "1k", 1000),
    ],
)
def test_resource_amount_units(resource: str, text: str | int, amount: int) -> None:
    assert resource_amount(resource, text) == amount


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("12Zi", "invalid quantity '12Zi'"),
        ("-1", "negative quantity '-1'"),
        ("-500m", "negative quantity"),
        ("", "invalid quantity"),
        ("1ki", "invalid quantity"),
        ("NaN", "invalid quantity"),
        ("Infinity", "invalid quantity"),
        ("1_000", "invalid quantity"),
        (" 1", "invalid quantity"),
        ("1e", "invalid quantity"),
        ("1.2.3", "invalid quantity"),
    ],
)
def test_invalid_quantities(text: str, message: str) -> None:
    with pytest.raises(QuantityError, match=message):
        milli_value(text)


def test_non_string_values_are_rejected() -> None:
    for value in (True, None, [1], {"a": 1}):
        with pytest.raises(QuantityError):
            whole_value(value)


def test_fractional_extended_resource_is_an_error() -> None:
    with pytest.raises(QuantityError, match=r"fractional quantity '0\.5' for nvidia\.com/gpu"):
        count_value("0.5", "nvidia.com/gpu")
    with pytest.raises(QuantityError, match="fractional"):
        resource_amount("nvidia.com/gpu", "500m")


def test_error_message_says_what_is_expected() -> None:
    with pytest.raises(QuantityError) as caught:
        milli_value("12Zi")
    assert str(caught.value) == "invalid quantity '12Zi' (expected a Kubernetes quantity such as 500m, 2 or 1.5Gi)"


@pytest.mark.parametrize(
    ("resource", "text"),
    [
        ("cpu", "1e400"),  # the cases: each ended in an OverflowError traceback
        ("cpu", "1Ei"),
        ("memory", "100Ei"),
        ("pods", "1e23"),
        ("cpu", "9007199254740.992"),  # one milli-CPU beyond the range
        ("memory", "8Pi"),  # 2^53 bytes
        ("nvidia.com/gpu", str(MAX_QUANTITY + 1)),
        ("memory", 2**63),  # a YAML integer
        ("cpu", "9" * 200),
    ],
)
def test_quantities_beyond_the_representable_range_are_refused(resource: str, text: str | int) -> None:
    with pytest.raises(QuantityError, match="is out of range") as caught:
        resource_amount(resource, text)
    assert "at most 2^53-1" in caught.value.expected


@pytest.mark.parametrize(
    ("resource", "text", "amount"),
    [("cpu", "9007199254740.991", MAX_QUANTITY), ("memory", str(MAX_QUANTITY), MAX_QUANTITY),
     ("pods", MAX_QUANTITY, MAX_QUANTITY), ("cpu", "1e-400", 1)],
)
def test_the_range_ends_are_representable(resource: str, text: str | int, amount: int) -> None:
    assert resource_amount(resource, text) == amount
    assert float(amount) == amount  # exact in float64 too


def test_summed_amounts_are_checked_too() -> None:
    assert check_amount("cpu", MAX_QUANTITY) == MAX_QUANTITY
    with pytest.raises(QuantityError, match="cpu amount 9007199254740992 is out of range"):
        check_amount("cpu", MAX_QUANTITY + 1)
