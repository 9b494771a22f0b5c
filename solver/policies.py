"""kubeplace's greedy policies (the warm starts of every solve) and the registry that maps their
names to implementations.

A policy is its placer (``solver.placers``, or a module of its own) and one line of
:data:`POLICIES`: ``solver.greedy`` and the greedy candidates of every solve take it from here.
These are kubeplace's own; the baselines ``simulate`` compares (the FGD authors' FGD and best-fit)
are ``simulate.policies``.
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
    within: Within | None = None
    """The placer on a subset of nodes, when it has one (``greedy(steer=True)`` keeps pods off
    resources they do not use through it)."""


BEST_FIT = "best-fit"
SPREAD = "spread"
FRAG_GREEDY = "frag-greedy"
"""kubeplace's FGD-style greedy (``solver.placers.fgd_placer``: shapes weighted by devices, ties to
the fuller node, CPU-only pods kept off free GPUs): a warm start, not the authors' FGD."""

POLICIES: dict[str, Policy] = {p.name: p for p in (
    Policy(BEST_FIT, best_fit_placer, within=best_fit),
    Policy(SPREAD, spread_placer, within=spread),
    Policy(FRAG_GREEDY, fgd_placer),
)}
"""Every greedy policy, one line each, in the order a solve tries them."""
