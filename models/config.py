"""PlacementConfiguration: profiles, plugins, typed args and solver settings.

Loaded and validated in full before anything runs, so that a typo fails fast with
the file and field it sits in::

    apiVersion: kubeplace.io/v1alpha1
    kind: PlacementConfiguration
    profiles:
      - schedulerName: kubeplace
        objective: balance            # or binpack
        plugins:
          enabled: [NodeLabelMatch]   # added to the defaults
          disabled: [Tenant]          # removed; "*" removes every default filter
        pluginConfig:
          - name: Balance
            args: {resources: [{name: cpu, weight: 2}, {name: memory, weight: 1}]}
    userPlugins:
      - name: NodeLabelMatch
        import: examples.plugins.node_label_match:FACTORY
    solver: {backend: cpsat, timeLimitSeconds: 10, workers: 2, relativeGap: 0, seed: 0}
"""

from __future__ import annotations

import dataclasses
import importlib
import sys
import types
import typing
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kubeplace.kube.errors import INT32_MAX, KubeplaceError
from kubeplace.kube.files import read_document
from kubeplace.kube.objects import Snapshot
from kubeplace.models.framework import (
    FILTER,
    SCORE,
    ConstraintPlugin,
    FilterPlugin,
    PluginFactory,
    PluginSet,
    Registry,
    RunContext,
    ScorePlugin,
)
from kubeplace.models.gpu import HAMI_CORES, HAMI_MEMORY, KOORD_CORE, KOORD_MEMORY, GpuConventions
from kubeplace.models.plugins import DEFAULT_FILTERS, PROFILE_SCORES, in_tree_registry

API_VERSION = "kubeplace.io/v1alpha1"
KIND = "PlacementConfiguration"
OBJECTIVES = ("balance", "binpack", "defrag")
PLACEMENT_WEIGHTS = ("pods", "gpu")


class ConfigError(KubeplaceError):
    def __init__(self, source: str, path: str, problem: str) -> None:
        super().__init__(": ".join(p for p in (source, path, problem) if p))


@dataclass(frozen=True)
class SolverSettings:
    backend: str = "cpsat"
    timeLimitSeconds: float = 10.0
    workers: int = 2
    relativeGap: float = 0.0
    seed: int = 0

    def validate(self) -> list[str]:
        errors = []
        if self.timeLimitSeconds <= 0:
            errors.append(f"timeLimitSeconds: expected a number > 0, got {self.timeLimitSeconds}")
        if self.workers < 1:
            errors.append(f"workers: expected an integer >= 1, got {self.workers}")
        if not 0 <= self.relativeGap < 1:
            errors.append(f"relativeGap: expected a number in [0, 1), got {self.relativeGap}")
        if not 0 <= self.seed <= INT32_MAX:
            errors.append(f"seed: expected an integer from 0 to {INT32_MAX}, got {self.seed}")
        return errors


@dataclass(frozen=True)
class GpuSettings:
    """Which resource names carry GPU requests (see models/gpu.py for the conventions)."""

    deviceResource: str = "nvidia.com/gpu"
    percentPerDevice: tuple[str, ...] = (HAMI_CORES, HAMI_MEMORY)
    percentOfGpus: tuple[str, ...] = (KOORD_CORE, KOORD_MEMORY)

    def conventions(self) -> GpuConventions:
        return GpuConventions(self.deviceResource, self.percentPerDevice, self.percentOfGpus)


@dataclass(frozen=True)
class Profile:
    schedulerName: str = "kubeplace"
    objective: str = "balance"
    placementWeight: str = "pods"
    enabled: tuple[str, ...] = ()
    disabled: tuple[str, ...] = ()
    plugin_args: Mapping[str, Any] = field(default_factory=dict)
    """Typed args per plugin name (instances of the factory's args_type)."""

    def plugin_names(self, registry: Registry) -> list[str]:
        defaults = [*([] if "*" in self.disabled else DEFAULT_FILTERS), *PROFILE_SCORES[self.objective]]
        names = [n for n in defaults if n not in self.disabled]
        names += [n for n in self.enabled if n not in names]
        return [n for n in names if n in registry]


@dataclass(frozen=True)
class Configuration:
    profiles: tuple[Profile, ...] = (Profile(),)
    solver: SolverSettings = field(default_factory=SolverSettings)
    gpu: GpuSettings = field(default_factory=GpuSettings)
    registry: Registry = field(default_factory=in_tree_registry)
    source: str = ""

    def profile(self, scheduler_name: str | None) -> Profile:
        if scheduler_name is None:
            return self.profiles[0]
        for p in self.profiles:
            if p.schedulerName == scheduler_name:
                return p
        known = ", ".join(p.schedulerName for p in self.profiles)
        raise ConfigError(self.source, "profiles", f"no profile for scheduler name '{scheduler_name}' "
                          f"(profiles: {known})")


def instantiate(config: Configuration, profile: Profile, snapshot: Snapshot) -> PluginSet:
    """Builds the plugins of ``profile`` for one run (fresh instances, fresh registry)."""
    ctx = RunContext(snapshot)
    filters: list[FilterPlugin] = []
    scores: list[ScorePlugin] = []
    constraints: list[ConstraintPlugin] = []
    for name in profile.plugin_names(config.registry):
        factory = config.registry[name]
        args = profile.plugin_args.get(name)
        if args is None and factory.args_type is not None:
            args = factory.args_type()
        plugin = factory.build(args, ctx)
        if isinstance(plugin, FilterPlugin):
            filters.append(plugin)
        if isinstance(plugin, ScorePlugin):
            scores.append(plugin)
        if isinstance(plugin, ConstraintPlugin):
            constraints.append(plugin)
    terms = tuple(t for s in scores for t in s.terms())
    return PluginSet(tuple(filters), tuple(scores), tuple(constraints), terms)


# --- loading --------------------------------------------------------------------------


def load_configuration(path: Path | None) -> Configuration:
    if path is None:
        return Configuration()
    return parse_configuration(read_document(path), str(path), base_dir=path.parent)


def parse_configuration(doc: object, source: str = "", base_dir: Path | None = None) -> Configuration:
    reader = _Reader(source, base_dir)
    data = reader.mapping(doc, "")
    if data.get("apiVersion") != API_VERSION or data.get("kind") != KIND:
        raise ConfigError(source, "apiVersion/kind", f"expected {API_VERSION} {KIND}, got "
                          f"{data.get('apiVersion')} {data.get('kind')}")
    reader.no_unknown(data, {"apiVersion", "kind", "profiles", "userPlugins", "solver", "gpu"}, "")
    registry = in_tree_registry()
    for i, entry in enumerate(reader.sequence(data.get("userPlugins", []), "userPlugins")):
        factory = reader.user_plugin(entry, f"userPlugins[{i}]")
        if factory.name in registry:
            raise ConfigError(source, f"userPlugins[{i}].name", f"'{factory.name}' is already a plugin")
        registry[factory.name] = factory
    raw_profiles = reader.sequence(data.get("profiles", [{}]), "profiles") or [{}]
    profiles = tuple(reader.profile(p, f"profiles[{i}]", registry) for i, p in enumerate(raw_profiles))
    names = [p.schedulerName for p in profiles]
    if len(set(names)) != len(names):
        raise ConfigError(source, "profiles", f"scheduler names must be unique, got {names}")
    solver = reader.typed(SolverSettings, data.get("solver", {}), "solver")
    gpu = reader.typed(GpuSettings, data.get("gpu", {}), "gpu")
    return Configuration(profiles, solver, gpu, registry, source)


def _import_beside(module_name: str, base_dir: Path | None) -> types.ModuleType:
    """Imports a user plugin module, looking first in the configuration file's directory."""
    if base_dir is None:
        return importlib.import_module(module_name)
    sys.path.insert(0, str(base_dir.resolve()))
    try:
        return importlib.import_module(module_name)
    finally:
        sys.path.remove(str(base_dir.resolve()))


class _Reader:
    """Turns plain YAML data into typed settings, naming the field of every mistake."""

    def __init__(self, source: str, base_dir: Path | None = None) -> None:
        self.source = source
        self.base_dir = base_dir

    def fail(self, path: str, problem: str) -> ConfigError:
        return ConfigError(self.source, path, problem)

    def mapping(self, value: object, path: str) -> dict[str, Any]:
        if not isinstance(value, dict):
            raise self.fail(path, f"expected a mapping, got {type(value).__name__}")
        return value

    def sequence(self, value: object, path: str) -> list[Any]:
        if not isinstance(value, list):
            raise self.fail(path, f"expected a list, got {type(value).__name__}")
        return value

    def no_unknown(self, data: Mapping[str, Any], known: set[str], path: str) -> None:
        for key in data:
            if key not in known:
                where = f"{path}.{key}" if path else str(key)
                raise self.fail(where, f"unknown field (expected one of {', '.join(sorted(known))})")

    def user_plugin(self, entry: object, path: str) -> PluginFactory:
        data = self.mapping(entry, path)
        self.no_unknown(data, {"name", "import"}, path)
        target = data.get("import")
        if not isinstance(target, str) or ":" not in target:
            raise self.fail(f"{path}.import", "expected 'package.module:ATTRIBUTE'")
        module_name, attr = target.split(":", 1)
        try:
            module = _import_beside(module_name, self.base_dir)
            factory = getattr(module, attr)
            if callable(factory) and not isinstance(factory, PluginFactory):
                factory = factory()
        except Exception as e:  # a plugin module may fail in any way when imported: one line, its words
            raise self.fail(f"{path}.import", f"cannot import {target}: {type(e).__name__}: {e}") from None
        if not isinstance(factory, PluginFactory):
            raise self.fail(f"{path}.import", f"{target} is not a kubeplace PluginFactory")
        if data.get("name", factory.name) != factory.name:
            raise self.fail(f"{path}.name", f"'{data.get('name')}' but the factory is named '{factory.name}'")
        return factory

    def names(self, value: object, path: str, registry: Registry) -> tuple[str, ...]:
        names = []
        for i, item in enumerate(self.sequence(value, path)):
            name = item.get("name") if isinstance(item, dict) else item
            if not isinstance(name, str) or (name != "*" and name not in registry):
                raise self.fail(f"{path}[{i}]", f"unknown plugin '{name}' (known: {', '.join(sorted(registry))})")
            names.append(str(name))
        return tuple(names)

    def profile(self, value: object, path: str, registry: Registry) -> Profile:
        data = self.mapping(value, path)
        self.no_unknown(data, {"schedulerName", "objective", "placementWeight", "plugins", "pluginConfig"}, path)
        weight = data.get("placementWeight", "pods")
        if weight not in PLACEMENT_WEIGHTS:
            raise self.fail(f"{path}.placementWeight",
                            f"expected one of {', '.join(PLACEMENT_WEIGHTS)}, got '{weight}'")
        objective = data.get("objective", "balance")
        if objective not in OBJECTIVES:
            raise self.fail(f"{path}.objective", f"expected one of {', '.join(OBJECTIVES)}, got '{objective}'")
        plugins = self.mapping(data.get("plugins", {}), f"{path}.plugins")
        self.no_unknown(plugins, {"enabled", "disabled"}, f"{path}.plugins")
        enabled = self.names(plugins.get("enabled", []), f"{path}.plugins.enabled", registry)
        disabled = self.names(plugins.get("disabled", []), f"{path}.plugins.disabled", registry)
        args: dict[str, Any] = {}
        for i, item in enumerate(self.sequence(data.get("pluginConfig", []), f"{path}.pluginConfig")):
            where = f"{path}.pluginConfig[{i}]"
            entry = self.mapping(item, where)
            self.no_unknown(entry, {"name", "args"}, where)
            name = entry.get("name")
            if not isinstance(name, str) or name not in registry:
                raise self.fail(f"{where}.name", f"unknown plugin '{name}' (known: {', '.join(sorted(registry))})")
            args_type = registry[name].args_type
            if args_type is None:
                raise self.fail(f"{where}.args", f"plugin '{name}' takes no args")
            args[name] = self.typed(args_type, entry.get("args", {}), f"{where}.args")
        name = data.get("schedulerName", "kubeplace")
        if not isinstance(name, str) or not name:
            raise self.fail(f"{path}.schedulerName", "expected a non-empty string")
        return Profile(name, objective, weight, enabled, disabled, args)

    def typed(self, cls: type[Any], value: object, path: str) -> Any:
        """A dataclass instance from a mapping: unknown fields and wrong types are errors."""
        data = self.mapping(value, path)
        hints = typing.get_type_hints(cls)
        fields = {f.name for f in dataclasses.fields(cls)}
        self.no_unknown(data, fields, path)
        for f in dataclasses.fields(cls):
            if f.default is f.default_factory is dataclasses.MISSING and f.name not in data:
                raise self.fail(f"{path}.{f.name}", "missing field")
        kwargs = {k: self.value(hints[k], v, f"{path}.{k}") for k, v in data.items()}
        instance = cls(**kwargs)
        validate = getattr(instance, "validate", None)
        for problem in validate() if validate else []:
            raise self.fail(path, problem)
        return instance

    def value(self, hint: Any, value: object, path: str) -> Any:
        origin = typing.get_origin(hint)
        if dataclasses.is_dataclass(hint):
            return self.typed(hint, value, path)  # type: ignore[arg-type]
        if origin in (tuple, Sequence, list) or hint in (tuple, list):
            (item_type, *_) = typing.get_args(hint) or (Any,)
            return tuple(self.value(item_type, v, f"{path}[{i}]")
                         for i, v in enumerate(self.sequence(value, path)))
        if origin in (typing.Union, types.UnionType):
            return value
        expected: dict[Any, tuple[type, ...]] = {bool: (bool,), int: (int,), float: (int, float), str: (str,)}
        allowed = expected.get(hint)
        if allowed and (not isinstance(value, allowed) or (hint is not bool and isinstance(value, bool))
                        or (hint is float and isinstance(value, int) and abs(value) > 2**1023)):
            raise self.fail(path, f"expected {hint.__name__}, got {value!r}")
        return float(value) if hint is float else value  # type: ignore[arg-type]


__all__ = ["FILTER", "SCORE", "ConfigError", "Configuration", "Profile", "SolverSettings",
           "instantiate", "load_configuration", "parse_configuration"]
