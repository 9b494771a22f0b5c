"""``bench synthetic --rules mix``: the issue-12 workload, planned and verified beside the
kube-scheduler emulation."""

from __future__ import annotations

import json
from collections import Counter

from click.testing import CliRunner

from kubeplace.cli.main import main
from kubeplace_bench.scale import synthetic_snapshot
from kubeplace_bench.synthetic import SyntheticSpec


def test_the_mix_has_its_shares_of_rules() -> None:
    spec = SyntheticSpec(nodes=80, pods=400, seed=3, rules="mix")
    assert spec.rule_pods == (80, 120, 16)
    snap = synthetic_snapshot(spec)
    kinds = Counter(
        "anti" if p.anti_affinity and not p.affinity else "group" if p.affinity else "spread" if p.spread else "plain"
        for p in snap.pending)
    assert kinds == {"plain": 184, "spread": 120, "anti": 80, "group": 16}
    assert all(len(p.spread) == 2 and sum(c.hard for c in p.spread) == 1 for p in snap.pending if p.spread)
    assert {n.labels["topology.kubernetes.io/rack"] for n in snap.nodes} == {"rack-000", "rack-001"}
    assert SyntheticSpec(nodes=80, pods=400, seed=3).rule_pods == (0, 0, 0)


def test_bench_synthetic_rules_mix_plans_verified_and_beside_the_emulation() -> None:
    result = CliRunner().invoke(main, ["bench", "synthetic", "--nodes", "60", "--pods", "240", "--rules", "mix",
                                       "--time-limit", "3", "-o", "json"])
    assert result.exit_code == 0, result.output
    (run,) = json.loads(result.stdout)["runs"]
    assert run["rules"] == "mix" and run["default_scheduler_violations"] == 0
    assert run["pods_placed"] >= run["default_scheduler_placed"] > 0
