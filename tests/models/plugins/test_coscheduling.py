"""models/plugins/coscheduling/: the verifier's check over the plan (a gang within one domain of
its topology key, running members first; unreadable PodGroups; a leader and its followers' room
together), run where the profile enables the rule."""

from __future__ import annotations

from kubeplace.models.config import Configuration, Profile
from kubeplace.models.plugins.coscheduling import RULE
from kubeplace.plan.checks import verify_settings
from kubeplace.plan.verify import verify
from tests.builders import snapshot_of
from tests.models.test_model_gang_topology import TWO_ZONES, ZONE, group, member, zoned


def test_verifier_rejects_a_split_gang() -> None:
    snap = snapshot_of(*TWO_ZONES, zoned("x1", None, "8"), group("job", 3), *[member(f"w{i}") for i in range(3)])
    assert verify(snap, [("default", "w0", "b1"), ("default", "w1", "b1"), ("default", "w2", "b1")]) == []
    split = verify(snap, [("default", "w0", "b1"), ("default", "w1", "a1"), ("default", "w2", "x1")])
    assert [(v.name, v.rule) for v in split] == [("w1", "Coscheduling"), ("w2", "Coscheduling")]
    assert f"no label {ZONE}" in split[1].detail


def test_verifier_counts_running_members() -> None:
    snap = snapshot_of(*TWO_ZONES, group("job", 2), member("r0").on("a1"), member("w1"))
    assert [v.rule for v in verify(snap, [("default", "w1", "b1")])] == ["Coscheduling"]
    assert verify(snap, [("default", "w1", "a1")]) == []


def test_the_check_runs_only_where_the_profile_enables_the_rule() -> None:
    snap = snapshot_of(*TWO_ZONES, group("job", 2), member("w0"), member("w1"))
    split = [("default", "w0", "a1"), ("default", "w1", "b1")]
    assert [v.rule for v in verify(snap, split, verify_settings(Configuration(), Profile()))] == ["Coscheduling"]
    without = verify_settings(Configuration(), Profile(disabled=("Coscheduling",)))
    assert verify(snap, split, without) == []  # the model places such pods one by one, as the default profile
    assert RULE.verify is not None and RULE.verify.plan is not None and not RULE.verified_always
