"""``kubeplace bench simulate-fidelity`` small: a ~60-pod trace with gangs replayed by the
simulator and on the real control plane, with the kube-scheduler and with kubeplace serve; the
floor (the same pods bound, allocation within one point) holds for both."""

from __future__ import annotations

import pytest

from kubeplace_bench.fidelity import SCHEDULERS, TraceSpec, run

from . import controlplane as cp

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(300)]


def test_the_simulator_matches_the_real_control_plane(control_plane: cp.ControlPlane) -> None:
    spec = TraceSpec(jobs=48)
    doc = run(control_plane, spec, SCHEDULERS, print)
    assert doc["trace"]["pods"] >= 55 and doc["trace"]["gangs"] >= 3, doc["trace"]
    for scheduler in SCHEDULERS:
        figures = doc["schedulers"][scheduler]
        assert figures["pods_bound"]["simulated"] > 0, figures
        assert figures["floor_holds"], (scheduler, figures)
