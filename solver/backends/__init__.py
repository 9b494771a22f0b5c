"""Every call to a solver library, and the registry of the backends a ``LinearModel`` goes to.

This package is the only one that imports OR-tools, PuLP or highspy (tests/test_structure.py
checks it). What it offers:

* ``BACKENDS``: a ``LinearModel`` solved whole (``cpsat``, ``milp``/``highs``/``cbc``), for the
  placement model and the bounds;
* ``highs_lp.HighsLp``: an incremental HiGHS LP/MIP (add columns, re-solve warm, read row duals,
  then the MIP over the columns), for the column-generation masters and the pricing knapsacks;
* ``cpsat_model.IntModel``: an integer model written term by term with implications and hints,
  solved by CP-SAT with explicit parameters, keeping every solution found on the way, for the
  pattern pricing and the exact provisioning model.

Factories are cheap: a backend imports its solver library only when it solves, so importing this
package loads neither OR-tools nor PuLP nor highspy. ``highs_lp`` and ``cpsat_model`` load theirs
on import, as the searches that use them did: their callers pay the load before any time limit.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from types import MappingProxyType

from kubeplace.solver.backends.base import Backend
from kubeplace.solver.backends.cpsat import CpSatBackend
from kubeplace.solver.backends.milp import MilpBackend

BACKENDS: Mapping[str, Callable[[], Backend]] = MappingProxyType({
    "cpsat": CpSatBackend,
    "milp": lambda: MilpBackend("milp"),
    "highs": lambda: MilpBackend("highs"),
    "cbc": lambda: MilpBackend("cbc"),
})
"""Every known backend, available on this machine or not."""


def get_backend(name: str) -> Backend:
    """A fresh backend called ``name``; ValueError listing the valid names otherwise."""
    try:
        factory = BACKENDS[name]
    except KeyError:
        raise ValueError(f"unknown backend {name!r}; valid names: {', '.join(BACKENDS)}") from None
    return factory()


def available_backends() -> list[str]:
    """Names of the backends whose solver can run here, in registry order."""
    return [name for name, factory in BACKENDS.items() if factory().available()]


__all__ = ["BACKENDS", "Backend", "available_backends", "get_backend"]
