"""Registry of solver backends: a plain map from name to factory.

Factories are cheap: a backend imports its solver library only inside ``solve``/``available``,
so importing this package loads neither OR-tools nor PuLP.
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
