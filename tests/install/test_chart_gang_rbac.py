"""The chart's roles read every resource the gang rules and capacity planning list from a cluster."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from kubeplace.kube.capacity import CAPACITY_APIS
from kubeplace.kube.gang_sources import READS, STATUS_APIS
from tests.install.helm import find, locate_helm, render

pytestmark = pytest.mark.helm


@pytest.fixture(scope="module")
def default() -> list[dict[str, Any]]:
    helm_bin: Path = locate_helm()
    return render(helm_bin, "kubeplace", "kubeplace-system")


def test_serve_reads_every_gang_source(default: list[dict[str, Any]]) -> None:
    rules = find(default, "ClusterRole", "kubeplace")["rules"]
    readable = {(group, resource) for rule in rules if {"get", "list", "watch"} <= set(rule["verbs"])
                for group in rule["apiGroups"] for resource in rule["resources"]}
    assert {(group, plural) for group, _, plural in READS} <= readable


def test_serve_may_write_the_status_of_every_gang_source_it_reports_to(default: list[dict[str, Any]]) -> None:
    """The PodGroup kinds whose status ``serve`` patches (``kube.gang_sources``: a source with a
    ``status_version``) are the ones the ClusterRole lets it patch, the status subresource only."""
    rules = find(default, "ClusterRole", "kubeplace")["rules"]
    patchable = {(group, resource) for rule in rules if "patch" in rule["verbs"]
                 for group in rule["apiGroups"] for resource in rule["resources"]}
    statuses = {(group, f"{plural}/status") for group, _, plural in STATUS_APIS}
    assert statuses <= patchable
    assert {(group, resource) for group, resource in patchable if resource == "podgroups/status"} == statuses


def test_serve_reads_what_adding_nodes_reads(default: list[dict[str, Any]]) -> None:
    """NodePools, NodeClaims and DaemonSets, which the live reader lists (kube.capacity.CAPACITY_APIS)."""
    rules = find(default, "ClusterRole", "kubeplace")["rules"]
    readable = {(group, resource) for rule in rules if {"get", "list", "watch"} <= set(rule["verbs"])
                for group in rule["apiGroups"] for resource in rule["resources"]}
    assert {(group, plural) for group, _, plural in CAPACITY_APIS} <= readable
