"""``kubeplace bench simulate-fidelity`` small: a ~60-pod trace with gangs replayed by the
simulator and on the real control plane, with the kube-scheduler and with kubeplace serve; the
floor (the same pods bound, allocation within one point) holds for kubeplace; for the
kube-scheduler the same pods are bound and the mean allocation is within one point, and the
end (the mean over the last 10 s) may differ (docs/simulate.md, Fidelity: the emulation breaks
ties between equal nodes as the real scheduler's heap does over the nodes' order, but live its
filter workers report the nodes in another order from run to run, and on this short trace one
8-CPU, 2-GPU pod bound on another side of a tie can run 17 s longer on one side)."""

from __future__ import annotations

import pytest

from kubeplace.simulate.names import KUBE_SCHEDULER, KUBEPLACE
from kubeplace_bench.fidelity import FLOOR_POINTS, RESOURCES, SCHEDULERS, TraceSpec, run

from . import controlplane as cp

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(300)]


def test_the_simulator_matches_the_real_control_plane(control_plane: cp.ControlPlane) -> None:
    spec = TraceSpec(jobs=48)
    doc = run(control_plane, spec, SCHEDULERS, print)
    assert doc["trace"]["pods"] >= 55 and doc["trace"]["gangs"] >= 3, doc["trace"]
    for scheduler in SCHEDULERS:
        assert doc["schedulers"][scheduler]["pods_bound"]["simulated"] > 0, doc["schedulers"][scheduler]
    assert doc["schedulers"][KUBEPLACE]["floor_holds"], doc["schedulers"][KUBEPLACE]
    figures = doc["schedulers"][KUBE_SCHEDULER]
    assert not figures["bound_only_simulated"] and not figures["bound_only_live"], figures
    assert all(abs(figures["mean_points"][r]["difference"]) <= FLOOR_POINTS for r in RESOURCES), figures
    if not figures["floor_holds"]:
        pytest.xfail(f"the kube-scheduler's end differs: {figures['end_points']} (a pod bound "
                     f"{figures['bound_later_live_seconds']['max']} s later live; docs/simulate.md, Fidelity)")
