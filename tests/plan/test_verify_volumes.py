"""The independent verifier's volume rules: each one refuses a plan that breaks it."""

from __future__ import annotations

from typing import Any

import pytest

from kubeplace.kube.objects import ClaimChoice
from kubeplace.plan.verify import VerifySettings, verify
from tests.builders import pod
from tests.models.plugins.volume_plans import ZONE, cluster, rules
from tests.volume_builders import claim, mounting, volume


def test_bound_volume_must_admit_the_node() -> None:
    snapshot = cluster(volume("pv", zone="a", storage_class="gp3", claim_ref=("default", "d"), labels={ZONE: "a"}),
                       claim("d", volume="pv", storage_class="gp3"), mounting(pod("p").cpu("1"), "d"))
    assert rules(snapshot, [("p", "n1")]) == []
    assert rules(snapshot, [("p", "n2")]) == [
        "VolumeBinding: volume pv of claim d: its node affinity excludes the node",
        "VolumeZone: volume pv is in topology.kubernetes.io/zone=a, the node in b"]


@pytest.mark.parametrize(("objects", "problem"), [
    ((), "claim d does not exist"),
    ((claim("d", storage_class="fast"),), "claim d is not bound and its class binds it immediately"),
    ((claim("d", volume="gone"),), "claim d is bound to volume gone, which does not exist"),
    ((claim("d", deleting=True),), "claim d is being deleted"),
    ((claim("d", storage_class="gp3", selected_node="n1"),), "claim d is being provisioned for node n1"),
])  # fmt: skip
def test_claims_that_cannot_be_used(objects: tuple[Any, ...], problem: str) -> None:
    snapshot = cluster(*objects, mounting(pod("p").cpu("1"), "d"))
    assert rules(snapshot, [("p", "n2")]) == [f"VolumeBinding: {problem}"]


def test_unbound_claims_need_a_distinct_free_volume_or_provisioning() -> None:
    snapshot = cluster(volume("pv-1", node="n1"), claim("a"), claim("b"), claim("c", storage_class="gp3"),
                       mounting(pod("p").cpu("1"), "a"), mounting(pod("q").cpu("1"), "b"),
                       mounting(pod("r").cpu("1"), "c"))
    assert rules(snapshot, [("p", "n1"), ("r", "n2")]) == []
    assert rules(snapshot, [("p", "n1"), ("q", "n1")]) == [
        "VolumeBinding: no free volume left for unbound claim b on the node and it cannot be provisioned there"]
    assert rules(snapshot, [("r", "n1")]) == [
        "VolumeBinding: no free volume left for unbound claim c on the node and it cannot be provisioned there"]


def test_the_volumes_a_plan_chose_are_checked() -> None:
    snapshot = cluster(volume("pv-1", node="n1"), volume("pv-2", node="n2", size="100Mi"), claim("a"), claim("b"),
                       claim("c", storage_class="gp3"), mounting(pod("p").cpu("1"), "a"),
                       mounting(pod("q").cpu("1"), "b"), mounting(pod("r").cpu("1"), "c"))
    good = {"p": (ClaimChoice("a", "pv-1"),), "r": (ClaimChoice("c", ""),)}
    assert rules(snapshot, [("p", "n1"), ("r", "n2")], good) == []
    assert rules(snapshot, [("p", "n1"), ("q", "n1")], {"p": (ClaimChoice("a", "pv-1"),),
                                                        "q": (ClaimChoice("b", "pv-1"),)}) == [
        "VolumeBinding: volume pv-1 is chosen for claim default/a too"]
    assert rules(snapshot, [("p", "n2")], {"p": (ClaimChoice("a", "pv-1"),)}) == [
        "VolumeBinding: volume pv-1 chosen for claim a: its node affinity excludes the node"]
    assert rules(snapshot, [("p", "n2")], {"p": (ClaimChoice("a", "pv-2"),)}) == [
        "VolumeBinding: volume pv-2 does not fit claim a (size, volume mode or being deleted)"]
    assert rules(snapshot, [("p", "n1")], {"p": (ClaimChoice("a", ""),)}) == [
        "VolumeBinding: claim a cannot be provisioned on the node"]
    assert rules(snapshot, [("r", "n1")], {"r": (ClaimChoice("c", ""),)}) == [
        "VolumeBinding: claim c cannot be provisioned on the node"]
    assert rules(snapshot, [("p", "n1")], {}) == ["VolumeBinding: no volume chosen for unbound claim a"]


def test_only_the_profiles_volume_rules_are_checked() -> None:
    snapshot = cluster(mounting(pod("p").cpu("1"), "d"))
    triples = [("default", "p", "n1")]
    assert verify(snapshot, triples, VerifySettings(volume_rules=frozenset({"VolumeZone"}))) == []
