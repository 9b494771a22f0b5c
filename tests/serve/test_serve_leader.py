"""Lease leader election: acquire, renew, take over an expired lease, lose, release."""

from __future__ import annotations

import pytest

from kubeplace.kube.errors import Unreachable
from kubeplace.serve.leader import LeaderElector
from tests.serve.fakes import Clock, FakeCluster


def elector(cluster: FakeCluster, clock: Clock, identity: str, changes: list[bool] | None = None) -> LeaderElector:
    return LeaderElector(cluster, "kubeplace-system", "kubeplace", identity, lease_duration=15, renew_deadline=10,
                         retry_period=2, clock=clock, on_change=None if changes is None else changes.append)


def test_the_first_replica_creates_the_lease_and_leads() -> None:
    cluster, clock, changes = FakeCluster(), Clock(), []
    a = elector(cluster, clock, "a", changes)
    assert a.try_acquire_or_renew() and a.is_leader()
    spec = cluster.leases["kubeplace"]["spec"]
    assert spec["holderIdentity"] == "a" and spec["leaseDurationSeconds"] == 15
    assert spec["renewTime"].endswith("Z") and "." in spec["renewTime"]  # MicroTime
    assert changes == [True]


def test_a_second_replica_waits_while_the_leader_renews() -> None:
    cluster, clock = FakeCluster(), Clock()
    a, b = elector(cluster, clock, "a"), elector(cluster, clock, "b")
    a.try_acquire_or_renew()
    for _ in range(20):  # 40 s of renewals
        clock.advance(2)
        assert a.try_acquire_or_renew()
        assert not b.try_acquire_or_renew()
    assert b.holder == "a" and not b.is_leader()


def test_an_expired_lease_is_taken_over_and_the_old_leader_stops_before() -> None:
    cluster, clock = FakeCluster(), Clock()
    a, b = elector(cluster, clock, "a"), elector(cluster, clock, "b")
    a.try_acquire_or_renew()
    b.try_acquire_or_renew()  # b observes a's record now
    clock.advance(10)  # a is dead (no renewals): it stops counting itself leader at the renew deadline
    assert not a.is_leader()
    assert not b.try_acquire_or_renew()
    clock.advance(5)  # 15 s without a change: expired
    assert b.try_acquire_or_renew() and b.is_leader()
    assert cluster.leases["kubeplace"]["spec"]["leaseTransitions"] == 1
    assert not a.try_acquire_or_renew()  # a comes back: b holds a valid lease
    assert not a.is_leader()


def test_a_leader_that_cannot_renew_stops_leading_at_the_renew_deadline() -> None:
    cluster, clock, changes = FakeCluster(), Clock(), []
    a = elector(cluster, clock, "a", changes)
    a.try_acquire_or_renew()
    cluster.lease_errors = [Unreachable("API server unreachable")] * 10
    clock.advance(4)
    assert a.try_acquire_or_renew()  # still within the renew deadline
    clock.advance(6)
    assert not a.try_acquire_or_renew() and not a.is_leader()
    assert changes == [True, False]


def test_losing_a_write_race_is_not_leading() -> None:
    cluster, clock = FakeCluster(), Clock()
    a, b = elector(cluster, clock, "a"), elector(cluster, clock, "b")
    a.try_acquire_or_renew()
    assert not b.try_acquire_or_renew()  # b observes a's record
    lease = cluster.read_lease("kubeplace-system", "kubeplace")
    clock.advance(20)
    assert b.try_acquire_or_renew()  # ...and takes the expired lease
    # ...so a's write with the version it read before is refused (409): it does not lead.
    assert not a._write(lease, 1)
    assert not a.is_leader() and cluster.leases["kubeplace"]["spec"]["holderIdentity"] == "b"


def test_release_lets_another_replica_lead_at_once() -> None:
    cluster, clock = FakeCluster(), Clock()
    a, b = elector(cluster, clock, "a"), elector(cluster, clock, "b")
    a.try_acquire_or_renew()
    assert not b.try_acquire_or_renew()
    a.release()
    assert not a.is_leader() and cluster.leases["kubeplace"]["spec"]["holderIdentity"] == ""
    assert b.try_acquire_or_renew()


def test_timings_must_be_ordered() -> None:
    with pytest.raises(ValueError, match="retry_period < renew_deadline < lease_duration"):
        LeaderElector(FakeCluster(), "ns", "l", "a", lease_duration=5, renew_deadline=10)
