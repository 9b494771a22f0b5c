"""A real local Ray (two CPUs) for the sweep tests that run on Ray, started once per session."""

from __future__ import annotations

from collections.abc import Iterator
from types import ModuleType

import pytest


@pytest.fixture(scope="session")
def local_ray() -> Iterator[ModuleType]:
    ray = pytest.importorskip("ray", reason="Ray is not installed (pip install 'kubeplace[ray]')")
    ray.init(num_cpus=2, include_dashboard=False)
    yield ray
    ray.shutdown()
