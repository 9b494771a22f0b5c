"""Prices per hour: one parser (``kube.price``) for the catalogue's two forms and the node
annotation, finite and bounded; an offering named twice or with a zone that is no label value is
refused. Each refusal is one line naming the file, the object and the field, exit 2."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner

from kubeplace.cli.main import main
from kubeplace.kube.errors import InputError
from kubeplace.kube.files import load_catalogue
from kubeplace.kube.parse import parse_node
from kubeplace.kube.price import MAX_PRICE, PRICE_UNIT, parse_price
from kubeplace.rebalance.consolidate import PRICE_ANNOTATION, node_price
from tests.kube.test_kube_karpenter import kwok_offering, kwok_type
from tests.rebalance.test_consolidate import fragmented_objects, karpenter_node

BAD_NUMBERS = [  # (the catalogue's number, the words)
    (1e12, "above the largest price per hour kubeplace takes, 10000"),
    (10**30, "above the largest price"),
    (float("nan"), "nan is not a price per hour"),
    (float("inf"), "inf is not a price per hour"),
    (float("-inf"), "-inf is not a price per hour"),
    (-0.1, "negative price -0.1"),
    ("0.5", "'0.5' is not a number"),
    (True, "True is not a number"),
    (None, "missing price"),
]
BAD_TEXTS = ["1e12", "10001", "NaN", "nan", "Infinity", "inf", "-1", "-0.1", "cheap", "", " 0.5", "1_000", "0x10",
             "+1", ".5"]


def kwok_file(tmp_path: Path, *entries: dict[str, Any]) -> Path:
    file = tmp_path / "instance_types.json"
    file.write_text(json.dumps(list(entries)))
    return file


def yaml_file(tmp_path: Path, *offerings: dict[str, Any]) -> Path:
    file = tmp_path / "catalogue.yaml"
    file.write_text(yaml.safe_dump({"instanceTypes": [{
        "name": "m6i.large", "architecture": "amd64", "operatingSystems": ["linux"],
        "capacity": {"cpu": "2", "memory": "8Gi"}, "offerings": list(offerings)}]}))
    return file


def refusal(load: Any) -> str:
    with pytest.raises(InputError) as caught:
        load()
    message = str(caught.value)
    assert "\n" not in message
    return message


@pytest.mark.parametrize(("price", "words"), BAD_NUMBERS)
def test_a_bad_catalogue_price_is_refused_in_both_forms(tmp_path: Path, price: Any, words: str) -> None:
    kwok = kwok_file(tmp_path, kwok_type("a", "1", "1Gi", kwok_offering("z", "spot", price)))
    message = refusal(lambda: load_catalogue([kwok]))
    assert message.startswith(f"{kwok}: instance type a: offerings[0].Price: ") and words in message, message
    offering = {"zone": "z", "capacityType": "spot", "pricePerHour": price}
    form = yaml_file(tmp_path, offering)
    message = refusal(lambda: load_catalogue([form]))
    assert message.startswith(f"{form}: instance type m6i.large: offerings[0].pricePerHour: "), message
    assert words.replace("'0.5'", "") in message, message


@pytest.mark.parametrize("text", BAD_TEXTS)
def test_a_bad_price_annotation_is_refused_naming_the_node_and_the_field(text: str) -> None:
    node = parse_node(karpenter_node("n0", annotations={PRICE_ANNOTATION: text}), "cluster.yaml")
    message = refusal(lambda: node_price(node, {PRICE_ANNOTATION: text}, ()))
    assert message.startswith(f"cluster.yaml: Node n0: metadata.annotations[{PRICE_ANNOTATION}]: "), message


def test_the_catalogue_and_the_annotation_read_a_price_alike() -> None:
    """One parser: the same digits give the same integer, rounded to the nearest billionth (half
    to even) wherever written; the largest price taken is 10 000 an hour."""
    for written, billionths in (("0.0190032385536", 19003239), ("0.0000000005", 0), ("0.0000000015", 2),
                                ("0.1", 100_000_000), ("10000", MAX_PRICE), ("1e-3", 1_000_000), ("0", 0),
                                ("-0", 0)):
        assert parse_price(written, "f", text=True) == billionths, written
        assert parse_price(float(written), "f") == billionths, written
    assert parse_price(10_000, "f") == MAX_PRICE == 10_000 * PRICE_UNIT
    for words, read in (("negative price -1", lambda: parse_price("-1", "f", text=True)),
                        ("negative price -1", lambda: parse_price(-1, "f"))):
        assert words in refusal(read)
    node = parse_node(karpenter_node("n0"), "cluster.yaml")
    assert node_price(node, {PRICE_ANNOTATION: "0.0190032385536"}, ())[0] == 19003239


def test_the_same_offering_twice_is_refused_in_both_forms(tmp_path: Path) -> None:
    kwok = kwok_file(tmp_path, kwok_type("a", "1", "1Gi", kwok_offering("z", "spot", 0.2),
                                         kwok_offering("z", "spot", 0.1)))
    message = refusal(lambda: load_catalogue([kwok]))
    assert message.startswith(f"{kwok}: instance type a: offerings[1]: duplicate offering: zone z, capacity type spot")
    form = yaml_file(tmp_path, {"zone": "z", "capacityType": "spot", "pricePerHour": 0.2},
                     {"zone": "z", "capacityType": "on-demand", "pricePerHour": 0.3},
                     {"zone": "z", "capacityType": "spot", "pricePerHour": 0.1})
    message = refusal(lambda: load_catalogue([form]))
    assert message.startswith(f"{form}: instance type m6i.large: offerings[2]: duplicate offering"), message


@pytest.mark.parametrize("zone", ["zone a", "-a", "a" * 64, "a/b", "ä"])
def test_a_zone_that_is_no_label_value_is_refused_in_both_forms(tmp_path: Path, zone: str) -> None:
    kwok = kwok_file(tmp_path, kwok_type("a", "1", "1Gi", kwok_offering(zone, "spot")))
    message = refusal(lambda: load_catalogue([kwok]))
    assert message.startswith(f"{kwok}: instance type a: offerings[0].Requirements[1].values[0]: Invalid value"), \
        message
    form = yaml_file(tmp_path, {"zone": zone, "capacityType": "spot", "pricePerHour": 0.1})
    message = refusal(lambda: load_catalogue([form]))
    assert message.startswith(f"{form}: instance type m6i.large: offerings[0].zone: Invalid value"), message


def test_labels_of_the_yaml_form_are_label_values(tmp_path: Path) -> None:
    file = tmp_path / "catalogue.yaml"
    file.write_text(yaml.safe_dump({"instanceTypes": [{
        "name": "m6i.large", "architecture": "amd64", "operatingSystems": ["linux"],
        "capacity": {"cpu": "2", "memory": "8Gi"}, "labels": {"family": "m 6"},
        "offerings": [{"zone": "z", "capacityType": "spot", "pricePerHour": 0.1}]}]}))
    assert refusal(lambda: load_catalogue([file])).startswith(
        f"{file}: instance type m6i.large: labels.family: Invalid value")


def cli(tmp_path: Path, argv: list[str], objects: list[dict[str, Any]], catalogue: list[dict[str, Any]]) -> Any:
    cluster, types = tmp_path / "cluster.json", tmp_path / "instance_types.json"
    cluster.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": objects}))
    types.write_text(json.dumps(catalogue))
    report = tmp_path / "report.html"
    result = CliRunner().invoke(main, [*argv, str(cluster), "--catalogue", str(types), "-o", "json",
                                       "--time-limit", "5", "--workers", "1", "--report", str(report)])
    assert result.exit_code == 2, result.output
    assert result.stdout == "" and result.stderr.count("\n") == 1 and not report.exists(), result.output
    return result


@pytest.mark.parametrize(("price", "words"), [(1e12, "above the largest price"), (float("nan"), "not a price"),
                                              ("0.5", "is not a number")])
def test_the_cli_refuses_a_bad_catalogue_price_in_one_line(tmp_path: Path, price: Any, words: str) -> None:
    pool = {"apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": "default"},
            "spec": {"template": {"spec": {"requirements": [], "nodeClassRef": {
                "group": "karpenter.kwok.sh", "kind": "KWOKNodeClass", "name": "default"}}}}}
    pending = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "default"},
               "spec": {"containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": "1"}}}]}}
    result = cli(tmp_path, ["plan", "--provision"], [pool, pending],
                 [kwok_type("a", "2", "4Gi", kwok_offering("z", "spot", price))])
    assert "instance type a: offerings[0].Price: " in result.stderr and words in result.stderr, result.stderr


@pytest.mark.parametrize("text", ["1e12", "NaN", "-1"])
def test_the_cli_refuses_a_bad_price_annotation_in_one_line(tmp_path: Path, text: str) -> None:
    objects = fragmented_objects()
    objects[0]["metadata"]["annotations"] = {PRICE_ANNOTATION: text}
    catalogue = [kwok_type(name, cpu, memory, kwok_offering("zone-a", "on-demand", price))
                 for name, cpu, memory, price in (("small", "2", "8Gi", 0.1), ("large", "4", "16Gi", 0.2))]
    result = cli(tmp_path, ["rebalance", "--consolidate"], objects, catalogue)
    assert f"Node n0: metadata.annotations[{PRICE_ANNOTATION}]: " in result.stderr, result.stderr
