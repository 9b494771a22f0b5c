"""What a line of ``simulate.policies.POLICIES`` holds."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from kubeplace.simulate.policies.node_view import Chooser, DeviceView, TieOrder
from kubeplace.simulate.policies.typical import TaskDistribution


@dataclass(frozen=True)
class SimPolicy:
    """One line of ``simulate.policies.POLICIES``: a name (the ``--scheduler`` choice) and its
    chooser, made per cluster state from the view, the typical pods and the tie order."""

    name: str
    chooser: Callable[[DeviceView, TaskDistribution, TieOrder], Chooser]
