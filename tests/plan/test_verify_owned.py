"""A plan writes only what its pods own (plan/verify_owned.py, part of every verify_plan): another
pod's resource claim or volume claim, a claim given twice, a stale uid, or choices the profile's
verifier cannot check are violations, whatever else the plan gets right."""

from __future__ import annotations

import dataclasses

from kubeplace.kube.dra import ClaimAllocation
from kubeplace.kube.objects import Snapshot
from kubeplace.kube.storage_objects import ClaimChoice
from kubeplace.models.config import Configuration
from kubeplace.plan.checks import verify_plan
from kubeplace.plan.plan import Placement
from kubeplace.plan.verify_owned import OWNERSHIP
from tests.builders import node, pod, snapshot_of
from tests.device_builders import claiming, device_class, gpu_slice, resource_claim
from tests.models.plugins.test_dynamic_resources import on
from tests.volume_builders import claim, mounting, storage_class, volume


def cluster() -> Snapshot:
    """Pods p0 (claim c0, volume claim d0) and p1 (claim c1, volume claim d1), pending."""
    return snapshot_of(node("n1").cpu("8").label("kubernetes.io/hostname", "n1"), device_class(), gpu_slice("n1", 4),
                       storage_class("local"), volume("pv-0", node="n1"), volume("pv-1", node="n1"),
                       *(resource_claim(f"c{i}") for i in range(2)), *(claim(f"d{i}") for i in range(2)),
                       *(mounting(claiming(pod(f"p{i}").cpu("1"), claim=f"c{i}"), f"d{i}") for i in range(2)))


def honest(name: str = "p0", device: str = "gpu-0", pv: str = "pv-0") -> Placement:
    i = name[-1]
    return Placement("default", name, "n1", f"uid-default-{name}", claims=(ClaimAllocation(f"c{i}", on("n1", device)),),
                     volumes=(ClaimChoice(f"d{i}", pv),))


def owned(placement: Placement, disabled: tuple[str, ...] = ()) -> list[str]:
    config = Configuration()
    profile = dataclasses.replace(config.profiles[0], disabled=disabled)
    return [v.detail for v in verify_plan(cluster(), [placement], config, profile) if v.rule == OWNERSHIP]


def test_the_pods_own_claims_and_volumes_pass() -> None:
    config = Configuration()
    assert verify_plan(cluster(), [honest("p0"), honest("p1", "gpu-1", "pv-1")], config, config.profiles[0]) == []


def test_another_pods_resource_claim_is_refused() -> None:
    theirs = dataclasses.replace(honest(), claims=(*honest().claims, ClaimAllocation("c1", on("n1", "gpu-1"))))
    assert owned(theirs) == ["claims[1].claim: c1 is not a resource claim of the pod (spec.resourceClaims); "
                             "bind writes only the pod's own"]


def test_another_pods_volume_claim_is_refused() -> None:
    theirs = dataclasses.replace(honest(), volumes=(ClaimChoice("d0", "pv-0"), ClaimChoice("d1", "pv-1")))
    assert owned(theirs) == ["volumes[1].claim: d1 is not a claim of the pod's volumes in namespace default; "
                             "bind writes only the pod's own"]


def test_a_claim_given_twice_is_refused() -> None:
    twice = dataclasses.replace(honest(), claims=honest().claims * 2, volumes=honest().volumes * 2)
    assert owned(twice) == ["claims: claim c0 is allocated 2 times", "volumes: claim d0 is given a volume 2 times"]


def test_a_stale_uid_is_refused() -> None:
    assert owned(dataclasses.replace(honest(), uid="uid-before")) == [
        "uid: the plan was made for uid uid-before, the pod is now uid uid-default-p0 (recreated since); "
        "make a new plan"]


def test_choices_the_profile_does_not_verify_are_refused() -> None:
    assert owned(honest(), disabled=("DynamicResources", "VolumeBinding")) == [
        "claims: the profile does not enable DynamicResources, so a plan for it allocates no resource claim",
        "volumes: the profile does not enable VolumeBinding, so a plan for it chooses no volume"]
