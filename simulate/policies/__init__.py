"""The one-pod-at-a-time policies ``kubeplace simulate`` (and the benchmarks) compare beside
kubeplace and the kube-scheduler: the FGD authors' FGD and best-fit, exactly as their simulator
runs them (hkust-adsl/kubernetes-scheduler-simulator; Weng et al., USENIX ATC 2023).

A policy is a module of this package (its chooser: scores the feasible nodes of one pod and picks
its devices, on a ``node_view.DeviceView``) and one line of :data:`POLICIES`; ``simulate``'s
``--scheduler`` choices, its baselines (``simulate.schedulers``, through ``simulate.policies.cycle``)
and the bench's device simulator (``kubeplace_bench.baselines``) all take it from here
(docs/development.md, Adding a simulate policy).
"""

from __future__ import annotations

from kubeplace.simulate.policies import best_fit, fgd, fgd_steered
from kubeplace.simulate.policies.policy import SimPolicy

POLICIES: dict[str, SimPolicy] = {p.name: p for p in (best_fit.POLICY, fgd.POLICY, fgd_steered.POLICY)}
"""Every simulated policy, one line each, in the order ``--scheduler`` lists them."""
