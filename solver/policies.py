"""The greedy policies and the registry that maps their names to implementations.

A policy is its placer (``solver.placers``, or a module of its own) and one line of
:data:`POLICIES`: ``solver.greedy`` (and the greedy candidates of every solve), ``simulate``'s
schedulers, the ``simulate`` command's and the bench's ``--scheduler`` choices all take it from
here (docs/development.md, Adding a simulate policy).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from kubeplace.models.problem import Problem
from kubeplace.solver.placers import Placer, Within, best_fit, best_fit_placer, fgd_placer, spread, spread_placer


@dataclass(frozen=True)
class Policy:
    name: str
    placer: Callable[[Problem, bool | None], Placer]
    """(problem, exact) -> how a class's pods pick their nodes; ``exact`` is FGD's (None: by size)."""
    simulated: bool = False
    """Compared by ``kubeplace simulate`` (one pod at a time, in queue order)."""
    within: Within | None = None
    """The placer on a subset of nodes, when it has one (``greedy(steer=True)`` keeps pods off
    resources they do not use through it)."""


BEST_FIT = "best-fit"
SPREAD = "spread"
FGD = "fgd"

POLICIES: dict[str, Policy] = {p.name: p for p in (
    Policy(BEST_FIT, best_fit_placer, simulated=True, within=best_fit),
    Policy(SPREAD, spread_placer, within=spread),
    Policy(FGD, fgd_placer, simulated=True),
)}
"""Every greedy policy, one line each, in the order a solve tries them."""
SIMULATED = tuple(name for name, policy in POLICIES.items() if policy.simulated)
"""The policies ``simulate`` compares beside kubeplace and the kube-scheduler."""
