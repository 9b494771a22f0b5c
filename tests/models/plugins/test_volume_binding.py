"""models/plugins/volume_binding/: a pod's claims as the kube-scheduler's VolumeBinding decides
them, in the model (bound claims, claims the pod waits for, static volumes given once,
provisioning) and in the verifier's check over the plan (the volumes a plan chose, or that such
volumes exist). Every plan here is checked by the independent verifier twice: with the volumes the
plan chose for the unbound claims, and without them."""

from __future__ import annotations

from typing import Any

import pytest

from kubeplace.kube.storage_objects import ClaimChoice
from kubeplace.models.config import Configuration
from kubeplace.plan.verify import VerifySettings, rule_checks, verify
from tests.builders import pod, snapshot_of
from tests.models.plugins.volume_plans import EBS, ZONE, chosen, cluster, plan, rules, where, why, zoned
from tests.volume_builders import (
    claim,
    csi_driver,
    csi_node,
    mounting,
    storage_capacity,
    storage_class,
    volume,
)

# ------------------------------------------------------------------ bound claims


def test_a_bound_claim_goes_where_its_volume_is() -> None:
    made = plan(snapshot_of(zoned("n1", "a"), zoned("n2", "b", cpu="8"), zoned("n3", "b", cpu="8"),
                            storage_class("gp3", provisioner=EBS),
                            volume("pv-1", zone="a", storage_class="gp3", claim_ref=("default", "data")),
                            claim("data", volume="pv-1", storage_class="gp3"),
                            mounting(pod("db").cpu("1"), "data"), mounting(pod("big").cpu("6"), "data")))
    assert where(made) == {"db": "n1"}
    assert why(made)["big"] == ("0/3 nodes are available: 1 Insufficient cpu, "
                                "2 node(s) didn't match PersistentVolume's node affinity.")


def test_a_bound_claim_whose_volume_is_gone() -> None:
    snapshot = snapshot_of(zoned("n1", "a"), claim("data", volume="pv-gone"), mounting(pod("db").cpu("1"), "data"))
    assert why(plan(snapshot)) == {"db": '0/1 nodes are available: persistentvolume "pv-gone" not found.'}
    assert why(plan(snapshot, disabled=("VolumeZone",))) == {
        "db": "0/1 nodes are available: 1 node(s) unavailable due to one or more pvc(s) bound to non-existent pv(s)."}


# ------------------------------------------------------------------ the pod waits (PreFilter)


def test_claims_the_pod_must_wait_for() -> None:
    snapshot = snapshot_of(
        zoned("n1", "a"), storage_class("fast", provisioner=EBS, wait=False), storage_class("local"),
        mounting(pod("no-claim").cpu("1"), "missing"),
        mounting(pod("eph").cpu("1"), ephemeral=["scratch"]),
        claim("eph2-scratch", owner_uid="uid-someone-else"), mounting(pod("eph2").cpu("1"), ephemeral=["scratch"]),
        claim("imm", storage_class="fast"), mounting(pod("immediate").cpu("1"), "imm"),
        claim("nocls", storage_class=None), mounting(pod("classless").cpu("1"), "nocls"),
        claim("pre", storage_class="local"), mounting(pod("prebound").cpu("1"), "pre"),
        claim("lost", volume="pv-x", phase="Lost"), mounting(pod("lost").cpu("1"), "lost"),
        claim("del", deleting=True), mounting(pod("deleting").cpu("1"), "del"),
    )
    snapshot.storage.claims["default/pre"].__dict__["volume_name"] = "pv-x"  # pre-bound by the user, not yet bound
    assert why(plan(snapshot)) == {
        "no-claim": '0/1 nodes are available: persistentvolumeclaim "missing" not found.',
        "eph": '0/1 nodes are available: waiting for ephemeral volume controller to create the persistentvolumeclaim '
               '"eph-scratch".',
        "eph2": "0/1 nodes are available: PVC default/eph2-scratch was not created for pod default/eph2 (pod is not "
                "owner).",
        "immediate": "0/1 nodes are available: pod has unbound immediate PersistentVolumeClaims.",
        "classless": "0/1 nodes are available: pod has unbound immediate PersistentVolumeClaims.",
        "prebound": "0/1 nodes are available: pod has unbound immediate PersistentVolumeClaims.",
        "lost": '0/1 nodes are available: persistentvolumeclaim "lost" bound to non-existent persistentvolume "pv-x".',
        "deleting": '0/1 nodes are available: persistentvolumeclaim "del" is being deleted.',
    }


def test_an_ephemeral_volume_whose_claim_the_pod_owns() -> None:
    made = plan(snapshot_of(zoned("n1", "a"), storage_class("gp3", provisioner=EBS),
                            claim("eph-scratch", storage_class="gp3", owner_uid="uid-default-eph"),
                            mounting(pod("eph").cpu("1"), ephemeral=["scratch"])))
    assert where(made) == {"eph": "n1"} and chosen(made) == {"eph": (ClaimChoice("eph-scratch", ""),)}


# ------------------------------------------------------------------ WaitForFirstConsumer: static volumes


def test_local_volumes_are_never_given_twice() -> None:
    made = plan(snapshot_of(
        zoned("n1", "a"), zoned("n2", "a"), zoned("n3", "a"), storage_class("local"),
        volume("pv-1a", size="10Gi", node="n1"), volume("pv-1b", size="10Gi", node="n1"),
        volume("pv-2a", size="10Gi", node="n2"),
        *(claim(f"data-web-{i}", size="5Gi") for i in range(4)),
        *(mounting(pod(f"web-{i}").cpu("1"), f"data-web-{i}") for i in range(4))))
    assert sorted(where(made).values()) == ["n1", "n1", "n2"]
    assert list(why(made).values()) == [
        "0/3 nodes are available: 3 node(s) didn't find available persistent volumes to bind."]
    volumes = [c.volume for choices in chosen(made).values() for c in choices]
    assert sorted(volumes) == ["pv-1a", "pv-1b", "pv-2a"]


def test_claims_of_two_shapes_competing_for_one_volume() -> None:
    """A 10Gi volume serves a 5Gi claim or a 10Gi one, not both: the rule over both shapes
    (the one per shape alone lets each take it)."""
    made = plan(snapshot_of(zoned("n1", "a"), storage_class("local"), volume("pv-1", size="10Gi", node="n1"),
                            claim("small", size="5Gi"), claim("large", size="10Gi"),
                            mounting(pod("s").cpu("1"), "small"), mounting(pod("l").cpu("1"), "large")))
    assert len(where(made)) == 1


def test_a_pod_with_two_local_claims_takes_two_volumes() -> None:
    made = plan(snapshot_of(zoned("n1", "a"), zoned("n2", "a"), storage_class("local"),
                            *(volume(f"pv-1{x}", node="n1") for x in "abc"), volume("pv-2a", node="n2"),
                            *(claim(f"{v}-{i}") for v in ("data", "log") for i in range(2)),
                            *(mounting(pod(f"kafka-{i}").cpu("1"), f"data-{i}", f"log-{i}") for i in range(2))))
    assert list(where(made).values()) == ["n1"]  # n1 has 3 volumes (one pod), n2 only 1
    (choices,) = chosen(made).values()
    assert len({c.volume for c in choices}) == 2


def test_zonal_static_volumes_are_reserved_in_queue_order() -> None:
    made = plan(snapshot_of(
        zoned("n1", "a"), zoned("n2", "a"), zoned("n3", "b"), storage_class("manual"),
        volume("pv-a1", zone="a", storage_class="manual"), volume("pv-a2", zone="a", storage_class="manual"),
        *(claim(f"data-{i}", storage_class="manual") for i in range(3)),
        *(mounting(pod(f"app-{i}").cpu("1").priority(10 - i), f"data-{i}") for i in range(3))))
    assert set(where(made)) == {"app-0", "app-1"} and set(where(made).values()) <= {"n1", "n2"}
    assert {c.volume for cs in chosen(made).values() for c in cs} == {"pv-a1", "pv-a2"}
    assert why(made)["app-2"] == "0/3 nodes are available: 3 node(s) didn't find available persistent volumes to bind."


def test_static_volume_matching_rules() -> None:
    """Class, size, access modes, volume mode, selector: only pv-good fits the claim."""
    made = plan(snapshot_of(
        zoned("n1", "a"), zoned("n2", "a"), zoned("n3", "a"), zoned("n4", "a"), zoned("n5", "a"), zoned("n6", "a"),
        storage_class("local"), storage_class("other"),
        volume("pv-small", size="1Gi", node="n1"), volume("pv-class", size="5Gi", node="n2", storage_class="other"),
        volume("pv-modes", size="5Gi", node="n3", modes=("ReadOnlyMany",)), volume("pv-block", size="5Gi", node="n4",
                                                                                   block=True),
        volume("pv-label", size="5Gi", node="n5", labels={"tier": "slow"}),
        volume("pv-good", size="5Gi", node="n6", labels={"tier": "fast"}),
        claim("data", size="2Gi", selector={"matchLabels": {"tier": "fast"}}),
        mounting(pod("app").cpu("1"), "data"), mounting(pod("more").cpu("1"), "data")))
    assert where(made)["app"] == "n6" and chosen(made)["app"] == (ClaimChoice("data", "pv-good"),)
    assert where(made)["more"] == "n6" and chosen(made)["more"] == (ClaimChoice("data", "pv-good"),)


# ------------------------------------------------------------------ a claim shared by pods: bound once


@pytest.mark.parametrize("kind", ["local", "provisioned", "pooled"])
def test_pods_sharing_an_unbound_claim_all_fit_where_its_one_volume_is(kind: str) -> None:
    """The kube-scheduler assumes the first pod's volume (or, provisioned, its selected node)
    and then finds that volume pre-bound to the claim for the next pod: a claim bound once
    serves every pod of it, on the owner's node (not 'no PV available' for the second pod)."""
    storage = {"local": [storage_class("local"), volume("pv-1", node="n1")],
               "provisioned": [storage_class("gp3", provisioner=EBS)],
               "pooled": [storage_class("local"), volume("pv-1", zone="a")]}[kind]
    pods = [mounting(pod(f"web-{i}").cpu("3"), "data") for i in range(3)]
    made = plan(snapshot_of(zoned("n1", "a", cpu="8"), zoned("n2", "a", cpu="8"), *storage,
                            claim("data", storage_class="gp3" if kind == "provisioned" else "local"), *pods))
    nodes = set(where(made).values())
    assert len(where(made)) == 2 and len(nodes) == 1, (where(made), why(made))  # 3 x 3 CPU: two fit a node
    if kind == "local":
        assert nodes == {"n1"}
    volumes = {c for choices in chosen(made).values() for c in choices}
    assert len(volumes) == 1 and volumes <= {ClaimChoice("data", "pv-1"), ClaimChoice("data", "")}, volumes
    [left] = why(made).values()
    assert left.startswith("0/2 nodes are available: "), left


def test_one_claim_shared_and_one_of_its_own_count_their_volumes_once_each() -> None:
    """Two pods sharing 'data' and each with a claim of its own, three local volumes on n1:
    both fit there (the shared claim takes one volume, not two)."""
    made = plan(snapshot_of(zoned("n1", "a", cpu="8"), zoned("n2", "a", cpu="8"), storage_class("local"),
                            *(volume(f"pv-{i}", node="n1") for i in range(3)),
                            claim("data"), claim("own-0"), claim("own-1"),
                            mounting(pod("web-0").cpu("1"), "data", "own-0"),
                            mounting(pod("web-1").cpu("1"), "data", "own-1")))
    assert where(made) == {"web-0": "n1", "web-1": "n1"}, why(made)
    shared = {c.volume for choices in chosen(made).values() for c in choices if c.claim == "data"}
    assert len(shared) == 1
    assert len({c.volume for choices in chosen(made).values() for c in choices}) == 3


def test_the_verifier_refuses_a_shared_claims_pods_on_two_nodes() -> None:
    snapshot = snapshot_of(zoned("n1", "a"), zoned("n2", "a"), storage_class("gp3", provisioner=EBS),
                           claim("data", storage_class="gp3"), mounting(pod("a").cpu("1"), "data"),
                           mounting(pod("b").cpu("1"), "data"))
    assert rules(snapshot, [("a", "n1"), ("b", "n1")]) == []
    assert rules(snapshot, [("a", "n1"), ("b", "n2")]) == [
        "VolumeBinding: unbound claim data is bound for pod default/a on node n1"]
    given = {"a": (ClaimChoice("data", ""),), "b": (ClaimChoice("data", ""),)}
    assert rules(snapshot, [("a", "n1"), ("b", "n1")], given) == []
    assert rules(snapshot, [("a", "n1"), ("b", "n2")], given) == [
        "VolumeBinding: unbound claim data is bound for pod default/a on node n1"]


def test_a_volume_pre_bound_to_the_claim_is_the_one_it_takes() -> None:
    made = plan(snapshot_of(zoned("n1", "a"), zoned("n2", "a"), storage_class("local"),
                            volume("pv-free", node="n1"), volume("pv-mine", node="n2", claim_ref=("default", "data"),
                                                                 phase="Available"),
                            claim("data"), mounting(pod("app").cpu("1"), "data")))
    assert where(made) == {"app": "n2"} and chosen(made) == {"app": (ClaimChoice("data", "pv-mine"),)}


# ------------------------------------------------------------------ WaitForFirstConsumer: provisioning


def test_provisioning_where_the_class_allows_it() -> None:
    made = plan(snapshot_of(zoned("n1", "a", cpu="8"), zoned("n2", "b"), zoned("n3", "b"),
                            storage_class("gp3", provisioner=EBS, zones=("b",)),
                            *(claim(f"data-{i}", storage_class="gp3") for i in range(3)),
                            *(mounting(pod(f"web-{i}").cpu("1"), f"data-{i}") for i in range(3))))
    assert set(where(made).values()) == {"n2", "n3"}
    assert all(cs == (ClaimChoice(cs[0].claim, ""),) for cs in chosen(made).values())


def test_provisioning_needs_the_csi_driver_on_the_node() -> None:
    made = plan(snapshot_of(zoned("n1", "a"), zoned("n2", "a"), zoned("n3", "a"), storage_class("gp3", provisioner=EBS),
                            csi_node("n1", (EBS, None), topology_keys=(ZONE,)), csi_node("n2", ("other.csi", None)),
                            csi_node("n3", (EBS, None), topology_keys=("topology.ebs.csi.aws.com/zone",)),
                            claim("data", storage_class="gp3"), mounting(pod("web").cpu("1"), "data")))
    assert where(made) == {"web": "n1"}  # n2 lacks the driver, n3 the label of its topology key


def test_provisioning_needs_capacity_where_the_driver_publishes_it() -> None:
    made = plan(snapshot_of(zoned("n1", "a"), zoned("n2", "b"), storage_class("gp3", provisioner=EBS),
                            csi_driver(EBS, storage_capacity=True), storage_capacity("cap-a", "gp3", "a", "5Gi"),
                            storage_capacity("cap-b", "gp3", "b", "50Gi"),
                            claim("small", size="4Gi", storage_class="gp3"),
                            claim("big", size="20Gi", storage_class="gp3"),
                            claim("huge", size="80Gi", storage_class="gp3"),
                            mounting(pod("s").cpu("3"), "small"), mounting(pod("b").cpu("3"), "big"),
                            mounting(pod("h").cpu("1"), "huge")))
    assert where(made) == {"s": "n1", "b": "n2"}
    assert why(made)["h"] == "0/2 nodes are available: 2 node(s) did not have enough free storage."


def test_a_claim_being_provisioned_for_a_node_goes_there() -> None:
    made = plan(snapshot_of(zoned("n1", "a"), zoned("n2", "a"), storage_class("gp3", provisioner=EBS),
                            claim("data", storage_class="gp3", selected_node="n2"),
                            mounting(pod("web").cpu("1"), "data")))
    assert where(made) == {"web": "n2"} and chosen(made) == {"web": (ClaimChoice("data", ""),)}


def test_many_pods_with_their_own_claims_share_a_class() -> None:
    """A StatefulSet's pods each have their own claim of one shape: one class, not one per pod."""
    from kubeplace.models.aggregate import aggregate
    from kubeplace.models.config import instantiate

    snapshot = snapshot_of(*(zoned(f"n{i}", "ab"[i % 2]) for i in range(6)), storage_class("gp3", provisioner=EBS),
                           *(claim(f"data-web-{i}", storage_class="gp3", size="10Gi") for i in range(60)),
                           *(mounting(pod(f"web-{i}").cpu("100m"), f"data-web-{i}") for i in range(60)))
    config = Configuration()
    agg = aggregate(snapshot, instantiate(config, config.profiles[0], snapshot))
    assert agg.problem.n_classes == 1 and int(agg.problem.count[0]) == 60


# ------------------------------------------------------------------ the verifier's check


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
    volume_rules = {"VolumeBinding", "VolumeRestrictions", "NodeVolumeLimits", "VolumeZone"}
    only_zone = tuple(c for c in rule_checks() if c.name not in volume_rules - {"VolumeZone"})
    assert verify(snapshot, triples, VerifySettings(rules=only_zone)) == []


def test_one_pod_naming_a_claim_twice_needs_a_volume_per_entry_as_the_kube_scheduler_matches_them() -> None:
    """GetPodVolumeClaims lists the claim once per volume entry and findMatchingVolumes excludes
    the volume it chose for the first from the second (binder.go, FindMatchingVolume's
    excludedVolumes): with one free volume the pod does not fit, with two it does, and the plan
    names one volume for the claim."""
    entries = [{"name": f"v{i}", "persistentVolumeClaim": {"claimName": "data"}} for i in range(2)]
    one = plan(snapshot_of(zoned("n1", "a"), storage_class("local"), volume("pv-1", node="n1"), claim("data"),
                           pod("web").cpu("1").spec("volumes", entries)))
    assert why(one) == {"web": "0/1 nodes are available: 1 node(s) didn't find available persistent volumes to bind."}
    two = plan(snapshot_of(zoned("n1", "a"), storage_class("local"), volume("pv-1", node="n1"),
                           volume("pv-2", node="n1"), claim("data"), pod("web").cpu("1").spec("volumes", entries)))
    assert where(two) == {"web": "n1"} and len(chosen(two)["web"]) == 1


def test_a_pod_without_claims_has_the_key_spelled_out_whether_or_not_other_pods_have_any() -> None:
    from kubeplace.kube.objects import Snapshot
    from kubeplace.models.config import Profile, instantiate
    from kubeplace.models.plugins.volume_binding import VolumeBinding
    from kubeplace.models.plugins.volume_binding.plugin import NO_CLAIMS_KEY

    def binding_of(snap: Snapshot) -> VolumeBinding:
        return next(f for f in instantiate(Configuration(), Profile(), snap).filters if isinstance(f, VolumeBinding))

    alone = snapshot_of(pod("plain").cpu("1"))
    plain = alone.pending[0]
    assert binding_of(alone).pod_key(plain) == NO_CLAIMS_KEY and binding_of(alone).choose([]) == {}
    both = cluster(claim("data", storage_class="gp3"), mounting(pod("db").cpu("1"), "data"), pod("plain").cpu("1"))
    beside = binding_of(both)
    assert not beside._without_claims  # the slow path: another pod has a claim
    assert beside.pod_key(plain) == NO_CLAIMS_KEY
    assert beside.pod_key(next(p for p in both.pending if p.name == "db")) != NO_CLAIMS_KEY
