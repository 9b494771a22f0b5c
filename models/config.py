"""The configuration as the code reads it: internal, typed, snake_case, validated.

A PlacementConfiguration file has the external, versioned shape of
:mod:`models.config_v1alpha1` (camelCase, as written); :mod:`models.config_load` decodes it,
fills the defaults, validates every field and converts it to these types, as the
kube-scheduler's configuration API does (external -> defaulting -> validation -> internal).
Product code reads only these types.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from kubeplace.kube.errors import KubeplaceError
from kubeplace.kube.gpu_conventions import GpuConventions
from kubeplace.kube.objects import Snapshot
from kubeplace.models.framework import Objective, PluginFactory, PluginSet, Registry, RunContext, build_plugins
from kubeplace.models.plugin_guard import NO_FAULTS, Faults, guard, guarded_factory, with_failures
from kubeplace.models.plugins import DEFAULT_PLUGINS, OBJECTIVE_SCORES, in_tree_registry

PLACEMENT_WEIGHTS = ("pods", "gpu")


class ConfigError(KubeplaceError):
    def __init__(self, source: str, path: str, problem: str) -> None:
        super().__init__(": ".join(p for p in (source, path, problem) if p))


BACKEND_NAMES: tuple[str, ...] = ("cpsat", "milp", "highs", "cbc")
"""The exact backends a configuration may name; kubeplace.solver.backends implements each (its
registry has exactly these names, which tests/solver/test_backends.py checks)."""


@dataclass(frozen=True)
class SolverSettings:
    """How long and how the solver searches (``solver`` in the file; CLI flags override it)."""

    backend: str = "cpsat"
    time_limit: float = 10.0
    """Seconds for the whole solve (greedy, bound and exact backend)."""
    workers: int = 2
    """Threads; 1 makes every run repeat exactly (time counted in slices, not on the clock)."""
    relative_gap: float = 0.0
    seed: int = 0
    full_model_pairs: int = 2_000
    """Above this many eligible (class, node) pairs the whole model is not built at once (not
    in the file: tests and benchmarks set it to exercise the large-problem path)."""
    stop_when_placed: bool = False
    """Stop as soon as nothing more can be placed (every pod placed, or the placed weight at the
    bound) instead of spending the rest of the budget on the objective (not in the file:
    ``serve`` sets it, where a pod waiting for a better balance waits for nothing it asked for)."""
    pack_devices: bool = False
    """For batches with GPU pods: the FGD greedy measures each node's whole fragmentation (CPU and
    memory included) whatever the batch's size, and its placement is kept over the objective's
    choice when it places as much (not in the file: ``serve`` sets it: it plans a backlog batch
    after batch, and a batch spread for balance strands the devices later batches' GPU pods need)."""


@dataclass(frozen=True)
class Profile:
    scheduler_name: str = "kubeplace"
    objective: Objective = Objective.BALANCE
    placement_weight: str = "pods"
    """What a placed pod is worth beyond its priority: ``pods`` (1) or ``gpu`` (its GPUs)."""
    enabled: tuple[str, ...] = ()
    disabled: tuple[str, ...] = ()
    plugin_args: Mapping[str, Any] = field(default_factory=dict)
    """Typed args per plugin name (instances of the factory's args_type)."""

    def plugin_names(self, registry: Registry) -> list[str]:
        defaults = [*([] if "*" in self.disabled else DEFAULT_PLUGINS), *OBJECTIVE_SCORES[self.objective]]
        names = [n for n in defaults if n not in self.disabled]
        names += [n for n in self.enabled if n not in names]
        return [n for n in names if n in registry]


@dataclass(frozen=True)
class Configuration:
    profiles: tuple[Profile, ...] = (Profile(),)
    solver: SolverSettings = field(default_factory=SolverSettings)
    gpu: GpuConventions = field(default_factory=GpuConventions)
    registry: Registry = field(default_factory=in_tree_registry)
    source: str = ""

    def profile(self, scheduler_name: str | None) -> Profile:
        if scheduler_name is None:
            return self.profiles[0]
        for p in self.profiles:
            if p.scheduler_name == scheduler_name:
                return p
        known = ", ".join(p.scheduler_name for p in self.profiles)
        raise ConfigError(self.source, "profiles", f"no profile for scheduler name '{scheduler_name}' "
                          f"(profiles: {known})")


def instantiate(config: Configuration, profile: Profile, snapshot: Snapshot) -> PluginSet:
    """Builds the plugins of ``profile`` for one run (fresh instances), each checked against
    the extension point its factory declares (:class:`models.framework.PluginError`); the user
    plugins (those not in tree) behind the guard of :mod:`models.plugin_guard`."""
    in_tree = in_tree_registry()
    faults: dict[str, Faults] = {}
    chosen = []
    for name in profile.plugin_names(config.registry):
        factory = config.registry[name]
        args = profile.plugin_args.get(name)
        if args is None and factory.args_type is not None:
            args = factory.args_type()
        chosen.append((factory if in_tree.get(name) is factory else guarded_factory(factory, faults), args))
    guarded = {factory.name for factory, _ in chosen if in_tree.get(factory.name) is not config.registry[factory.name]}

    def wrap(factory: PluginFactory, part: Any) -> Any:
        return guard(factory, part, faults.get(factory.name, NO_FAULTS)) if factory.name in guarded else part

    return with_failures(build_plugins(chosen, RunContext(snapshot), wrap))
