"""``kubeplace bench throughput`` on the real control plane, small: 50 nodes x 200 basic pods,
kubeplace serve (a subprocess with deploy/rbac.yaml's rights) and the kube-scheduler in turn."""

from __future__ import annotations

import pytest

from kubeplace_bench.throughput import Settings, run
from kubeplace_bench.throughput_schedulers import SCHEDULERS
from kubeplace_bench.throughput_workloads import build

from . import controlplane as cp

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(120)]


def test_both_schedulers_bind_the_basic_backlog_and_are_measured(control_plane: cp.ControlPlane) -> None:
    workload = build("basic", nodes=50, pods=200)
    doc = run(control_plane, [workload], SCHEDULERS, Settings(settle=10, timeout=60))
    for scheduler in SCHEDULERS:
        figures = doc["basic"][scheduler]
        assert figures["pods_bound"] == 200 and figures["pending"] == 0 and figures["rebound"] == 0, figures
        latency = figures["latency_seconds"]
        assert 0 <= latency["p50"] <= latency["p90"] <= latency["p99"] <= latency["max"]
        assert figures["seconds_to_last_bound"] >= latency["max"] - 0.01
        assert figures["pods_per_second"] > 0 and figures["cpu_seconds"] > 0 and figures["peak_mib"] > 10
    assert doc["basic"]["kubeplace"]["serve"]["pods_bound_total"] == 200
