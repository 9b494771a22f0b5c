"""``kubeplace serve``'s settings (the command line's and the chart's), and the solver settings
of one cycle derived from them."""

from __future__ import annotations

from dataclasses import dataclass, replace

from kubeplace.kube.metrics import DEFAULT_MAX_AGE
from kubeplace.models.config import SolverSettings
from kubeplace.solver.shares import CYCLE_BASE_SECONDS, CYCLE_SECONDS_PER_POD


@dataclass(frozen=True)
class ServeSettings:
    scheduler_name: str = "kubeplace"
    batch_window: float = 1.0
    """The most seconds a batch stays open after its first unit arrived (and an incomplete gang
    waits for its members before it is planned anyway)."""
    batch_window_per_unit: float | None = 0.001
    """The batch window grows with the backlog: a batch stays open this many seconds for each
    complete unit waiting in it beyond the first, at most ``batch_window`` (``serve.queue``); a
    lone unit in an idle queue, a gang once its last member exists, is planned at once. None:
    the fixed window (a batch closes ``batch_window`` after its first unit or ``batch_quiet``
    after its last). ``kubeplace simulate`` replays it as serve runs it (the same queue)."""
    batch_window_min: float = 0.05
    """With ``batch_window_per_unit``, the least a batch stays open after its oldest complete
    unit: the time a client takes to create the next pods of a burst (tens of milliseconds each
    on a loaded API server), so that they join one plan live as pods arriving at one instant do
    in ``kubeplace simulate``. A gang whose members took that long to create waits no more."""
    batch_size: int = 1000
    """A batch closes early at this many units (pods or whole gangs)."""
    batch_quiet: float = 0.2
    """A batch also closes when no unit arrived for this many seconds (arrivals paused: what
    is there is all there is for now)."""
    namespaces: frozenset[str] | None = None
    """Place only pending pods of these namespaces (None: all); every pod counts as usage."""
    assume_seconds: float = 30.0
    """How long a binding decided but not yet seen by the watch counts as usage."""
    initial_backoff: float = 1.0
    max_backoff: float = 10.0
    max_in_unschedulable: float = 300.0
    """Seconds at most a unit that could not be placed waits for an event that may help it
    before it is tried again anyway (the kube-scheduler's podMaxInUnschedulablePodsDuration)."""
    targets_namespace: str = "kubeplace-system"
    """Where ``kubeplace rebalance`` records the target nodes of the pods it moved."""
    targets_refresh: float = 10.0
    """Seconds the rebalance targets are cached between reads."""
    usage_refresh: float = 15.0
    """Seconds the measured usage (metrics API) is cached between reads (metrics-server scrapes
    every 15 s by default)."""
    metrics_max_age: float = DEFAULT_MAX_AGE
    """Measured usage older than this is ignored (0: no limit)."""
    bind_workers: int = 32
    """Bindings in flight at once (after the first one of a cycle, see ``kube.binder.bind_concurrently``)."""
    budget_base: float = CYCLE_BASE_SECONDS
    budget_per_pod: float = CYCLE_SECONDS_PER_POD
    """A cycle's solver budget: ``budget_base + budget_per_pod`` x its pending pods, at most the
    configured time limit (``solver.shares``). The solve stops earlier as soon as nothing more can
    be placed."""
    preempt: bool = True
    """Evict running pods of lower priority where that places pending pods (``serve.preempt``);
    preemption's own solve has the configured time limit."""
    eviction_api: bool = False
    """Remove victims through the Eviction API (honours PodDisruptionBudgets) instead of deleting them."""


def cycle_options(solver: SolverSettings, settings: ServeSettings, pods: int) -> SolverSettings:
    """The solver settings of a cycle of ``pods`` pending pods (see ``ServeSettings.budget_base``)."""
    seconds = min(solver.time_limit, settings.budget_base + settings.budget_per_pod * pods)
    return replace(solver, time_limit=seconds, stop_when_placed=True, pack_devices=True)


DEFAULT_SETTINGS = ServeSettings()
"""serve's settings when none are given."""
