"""Reading a PlacementConfiguration: decode, default, validate, convert.

As the kube-scheduler's configuration API does, the file is decoded strictly into its external,
versioned types (:mod:`models.config_v1alpha1`: unknown fields and wrong types are errors), whose
defaults fill what it leaves out; every field is then validated and converted to the internal
types of :mod:`models.config`, which is all that product code reads. Each mistake is one
:class:`ConfigError` naming the file and the field. The solver settings given on the command
line go through the same validation (:func:`override_solver`), named by their flags.
"""

from __future__ import annotations

import dataclasses
import importlib
import math
import sys
import types
import typing
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from kubeplace.kube.dra import is_extended_resource
from kubeplace.kube.errors import INT32_MAX
from kubeplace.kube.files import read_document
from kubeplace.kube.gpu_conventions import GpuConventions
from kubeplace.kube.objects import Snapshot
from kubeplace.kube.selectors import is_qualified_name
from kubeplace.models import config_v1alpha1 as v1
from kubeplace.models.config import (
    BACKEND_NAMES,
    PLACEMENT_WEIGHTS,
    ConfigError,
    Configuration,
    Profile,
    SolverSettings,
)
from kubeplace.models.framework import Objective, PluginError, PluginFactory, Registry, RunContext, build_plugins
from kubeplace.models.plugins import in_tree_registry

MAX_WORKERS = 256
"""More solver threads than this is a mistake, not a machine (CP-SAT and HiGHS take any number)."""
MAX_SEED = INT32_MAX
"""CP-SAT's and HiGHS's random seeds are 32-bit signed integers."""
SOLVER_FIELDS = {"backend": "solver.backend", "time_limit": "solver.timeLimitSeconds", "workers": "solver.workers",
                 "relative_gap": "solver.relativeGap", "seed": "solver.seed"}
"""Internal solver setting -> its field in the file."""


def load_configuration(path: Path | None) -> Configuration:
    if path is None:
        return Configuration()
    return parse_configuration(read_document(path), str(path), base_dir=path.parent)


def parse_configuration(doc: object, source: str = "", base_dir: Path | None = None) -> Configuration:
    """Decoded, defaulted, validated and converted; ConfigError at the first mistake."""
    reader = _Reader(source)
    external: v1.PlacementConfiguration = reader.typed(v1.PlacementConfiguration, doc, "")
    if external.apiVersion != v1.API_VERSION or external.kind != v1.KIND:
        raise ConfigError(source, "apiVersion/kind", f"expected {v1.API_VERSION} {v1.KIND}, got "
                          f"{external.apiVersion or '(none)'} {external.kind or '(none)'}")
    registry = in_tree_registry()
    users = []
    for i, entry in enumerate(external.userPlugins):
        factory = _user_plugin(entry, f"userPlugins[{i}]", source, base_dir)
        if factory.name in registry:
            raise ConfigError(source, f"userPlugins[{i}].name", f"'{factory.name}' is already a plugin")
        registry[factory.name] = factory
        users.append((i, factory))
    profiles = tuple(_profile(p, f"profiles[{i}]", registry, reader)
                     for i, p in enumerate(external.profiles or (v1.Profile(),)))
    names = [p.scheduler_name for p in profiles]
    if len(set(names)) != len(names):
        raise ConfigError(source, "profiles", f"scheduler names must be unique, got {names}")
    for i, factory in users:
        _check_contract(factory, profiles, f"userPlugins[{i}]", source)
    solver = validated_solver(_solver(external.solver), SOLVER_FIELDS, source)
    return Configuration(profiles, solver, _gpu(external.gpu, source), registry, source)


def _gpu(external: v1.GPU, source: str) -> GpuConventions:
    """The file's ``gpu`` section as the internal conventions every consumer reads. Each name must
    be an extended resource (what a device plugin advertises: kubelet-counted, whole units), and
    have one role: a name read both as devices and as a percent would count a pod's GPUs twice."""
    named = [("gpu.deviceResource", external.deviceResource),
             *((f"gpu.percentPerDevice[{i}]", r) for i, r in enumerate(external.percentPerDevice)),
             *((f"gpu.percentOfGpus[{i}]", r) for i, r in enumerate(external.percentOfGpus))]
    first: dict[str, str] = {}
    for path, name in named:
        if not (is_extended_resource(name) and is_qualified_name(f"requests.{name}")):
            raise ConfigError(source, path, "expected an extended resource name (a domain-prefixed name outside "
                              f"kubernetes.io, e.g. example.com/gpu), got {name!r}")
        if name in first:
            raise ConfigError(source, path, f"{name!r} is already {first[name]} (each resource has one GPU role)")
        first[name] = path
    return GpuConventions(device_resource=external.deviceResource, percent_per_device=external.percentPerDevice,
                          percent_of_gpus=external.percentOfGpus)


# --- solver settings: one validation for the file and for the command line ----------------


def _solver(external: v1.Solver) -> SolverSettings:
    return SolverSettings(backend=external.backend, time_limit=external.timeLimitSeconds, workers=external.workers,
                          relative_gap=external.relativeGap, seed=external.seed)


def external_solver(s: SolverSettings) -> v1.Solver:
    """The file's shape of internal solver settings (what ``config-check`` prints)."""
    return v1.Solver(s.backend, s.time_limit, s.workers, s.relative_gap, s.seed)


def solver_problems(s: SolverSettings) -> list[tuple[str, str]]:
    """(internal field, what is wrong with it) for every invalid solver setting."""
    out = []
    if s.backend not in BACKEND_NAMES:
        out.append(("backend", f"expected one of {', '.join(BACKEND_NAMES)}, got {s.backend!r}"))
    if not (math.isfinite(s.time_limit) and s.time_limit > 0):
        out.append(("time_limit", f"expected a finite number of seconds > 0, got {s.time_limit}"))
    if not 1 <= s.workers <= MAX_WORKERS:
        out.append(("workers", f"expected an integer from 1 to {MAX_WORKERS}, got {s.workers}"))
    if not (math.isfinite(s.relative_gap) and 0 <= s.relative_gap < 1):
        out.append(("relative_gap", f"expected a number in [0, 1), got {s.relative_gap}"))
    if not 0 <= s.seed <= MAX_SEED:
        out.append(("seed", f"expected an integer from 0 to {MAX_SEED}, got {s.seed}"))
    return out


def validated_solver(s: SolverSettings, names: Mapping[str, str], source: str = "") -> SolverSettings:
    """``s`` if every setting is valid; else ConfigError naming the first bad one as ``names`` says."""
    for name, problem in solver_problems(s):
        raise ConfigError(source, names[name], problem)
    return s


def override_solver(base: SolverSettings, names: Mapping[str, str], **overrides: Any) -> SolverSettings:
    """``base`` with the ``overrides`` that are not None (command-line flags), validated as the
    file is; ``names`` says how to name each field in an error (the flag)."""
    return validated_solver(replace(base, **{k: v for k, v in overrides.items() if v is not None}), names)


# --- profiles and plugins -----------------------------------------------------------------


def _profile(p: v1.Profile, path: str, registry: Registry, reader: _Reader) -> Profile:
    if p.placementWeight not in PLACEMENT_WEIGHTS:
        raise reader.fail(f"{path}.placementWeight",
                          f"expected one of {', '.join(PLACEMENT_WEIGHTS)}, got '{p.placementWeight}'")
    known = [o.value for o in Objective]
    if p.objective not in known:
        raise reader.fail(f"{path}.objective", f"expected one of {', '.join(known)}, got '{p.objective}'")
    for field_name, names in (("enabled", p.plugins.enabled), ("disabled", p.plugins.disabled)):
        for i, name in enumerate(names):
            if name != "*" and name not in registry:
                raise reader.fail(f"{path}.plugins.{field_name}[{i}]", _unknown(name, registry))
    args: dict[str, Any] = {}
    for i, entry in enumerate(p.pluginConfig):
        where = f"{path}.pluginConfig[{i}]"
        if entry.name not in registry:
            raise reader.fail(f"{where}.name", _unknown(entry.name, registry))
        args_type = registry[entry.name].args_type
        if args_type is None:
            raise reader.fail(f"{where}.args", f"plugin '{entry.name}' takes no args")
        args[entry.name] = reader.typed(args_type, entry.args, f"{where}.args")
    if not p.schedulerName:
        raise reader.fail(f"{path}.schedulerName", "expected a non-empty string")
    return Profile(p.schedulerName, Objective(p.objective), p.placementWeight, p.plugins.enabled,
                   p.plugins.disabled, args)


def _unknown(name: str, registry: Registry) -> str:
    return f"unknown plugin '{name}' (known: {', '.join(sorted(registry))})"


def _user_plugin(entry: v1.UserPlugin, path: str, source: str, base_dir: Path | None) -> PluginFactory:
    target = entry.import_
    if ":" not in target:
        raise ConfigError(source, f"{path}.import", "expected 'package.module:ATTRIBUTE'")
    module_name, attr = target.split(":", 1)
    try:
        module = _import_beside(module_name, base_dir)
        factory = getattr(module, attr)
        if callable(factory) and not isinstance(factory, PluginFactory):
            factory = factory()
    except (Exception, SystemExit) as e:  # a plugin module may fail in any way when imported: one line, its words
        raise ConfigError(source, f"{path}.import", f"cannot import {target}: {type(e).__name__}: {e}") from None
    if not isinstance(factory, PluginFactory):
        raise ConfigError(source, f"{path}.import", f"{target} is not a kubeplace PluginFactory")
    for problem in _registration_problems(factory):
        raise ConfigError(source, f"{path}.import", f"{target}: {problem}")
    if entry.name and entry.name != factory.name:
        raise ConfigError(source, f"{path}.name", f"'{entry.name}' but the factory is named '{factory.name}'")
    return factory


def _registration_problems(factory: PluginFactory) -> list[str]:
    """What is wrong with the fields of a user's PluginFactory (the extension points are checked
    when it is built)."""
    problems = []
    if not isinstance(factory.name, str) or not factory.name:
        problems.append(f"the factory's name must be a non-empty string, got {factory.name!r}")
    if not (isinstance(factory.point, str)
            or (isinstance(factory.point, tuple) and all(isinstance(p, str) for p in factory.point))):
        problems.append(f"the factory's point must be an extension point or a tuple of them, got {factory.point!r}")
    if factory.args_type is not None and not (isinstance(factory.args_type, type)
                                              and dataclasses.is_dataclass(factory.args_type)):
        problems.append(f"the factory's args_type must be a dataclass or None, got {factory.args_type!r}")
    if not callable(factory.build):
        problems.append(f"the factory's build must be callable, got {factory.build!r}")
    return problems


def _check_contract(factory: PluginFactory, profiles: Sequence[Profile], path: str, source: str) -> None:
    """Builds the plugin once, as the kube-scheduler builds its plugins when it starts (on an
    empty cluster, with the args of the first profile that configures it), so that a plugin
    that does not implement its declared extension point is refused now, not skipped later."""
    args = next((p.plugin_args[factory.name] for p in profiles if factory.name in p.plugin_args), None)
    if args is None and factory.args_type is not None:
        args = factory.args_type()
    try:
        build_plugins([(factory, args)], RunContext(Snapshot((), (), ())))
    except PluginError as e:
        raise ConfigError(source, path, str(e)) from None
    except Exception as e:  # the user's code: one line, never a traceback
        raise ConfigError(source, path, f"plugin '{factory.name}' failed to build: {type(e).__name__}: {e}") from None


def _import_beside(module_name: str, base_dir: Path | None) -> types.ModuleType:
    """Imports a user plugin module, looking first in the configuration file's directory."""
    if base_dir is None:
        return importlib.import_module(module_name)
    sys.path.insert(0, str(base_dir.resolve()))
    try:
        return importlib.import_module(module_name)
    finally:
        sys.path.remove(str(base_dir.resolve()))


# --- decoding -----------------------------------------------------------------------------


class _Reader:
    """Plain YAML data to typed dataclasses, strictly, naming the field of every mistake."""

    def __init__(self, source: str) -> None:
        self.source = source

    def fail(self, path: str, problem: str) -> ConfigError:
        return ConfigError(self.source, path, problem)

    def mapping(self, value: object, path: str) -> Mapping[str, Any]:
        if not isinstance(value, dict):
            raise self.fail(path, f"expected a mapping, got {type(value).__name__}")
        return value

    def sequence(self, value: object, path: str) -> list[Any]:
        if not isinstance(value, list):
            raise self.fail(path, f"expected a list, got {type(value).__name__}")
        return value

    def typed(self, cls: type[Any], value: object, path: str) -> Any:
        """A dataclass instance from a mapping: unknown fields and wrong types are errors; a
        ``validate()`` method, when the class has one, lists further problems."""
        data = self.mapping(value, path)
        hints = typing.get_type_hints(cls)
        fields = {f.name.rstrip("_"): f.name for f in dataclasses.fields(cls)}
        for key in data:
            if key not in fields:
                where = f"{path}.{key}" if path else str(key)
                raise self.fail(where, f"unknown field (expected one of {', '.join(sorted(fields))})")
        for f in dataclasses.fields(cls):
            if f.default is f.default_factory is dataclasses.MISSING and f.name.rstrip("_") not in data:
                raise self.fail(f"{path}.{f.name.rstrip('_')}" if path else f.name.rstrip("_"), "missing field")
        kwargs = {fields[k]: self.value(hints[fields[k]], v, f"{path}.{k}" if path else k) for k, v in data.items()}
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
            return tuple(self.value(item_type, v, f"{path}[{i}]") for i, v in enumerate(self.sequence(value, path)))
        if origin in (Mapping, dict):
            return self.mapping(value, path)
        if origin in (typing.Union, types.UnionType):
            return value
        if hint is v1.PluginName:
            if isinstance(value, dict) and set(value) == {"name"}:
                value = value["name"]
            if not isinstance(value, str):
                raise self.fail(path, f"unknown plugin '{value}'")
            return value
        expected: dict[Any, tuple[type, ...]] = {bool: (bool,), int: (int,), float: (int, float), str: (str,)}
        allowed = expected.get(hint)
        if allowed and (not isinstance(value, allowed) or (hint is not bool and isinstance(value, bool))):
            raise self.fail(path, f"expected {hint.__name__}, got {value!r}")
        if hint is float:
            if isinstance(value, int) and abs(value) > 2**1023:  # float() would overflow
                raise self.fail(path, f"expected float, got {_digits(value)} (out of range)")
            return float(value)  # type: ignore[arg-type]
        return value



def _digits(number: int) -> str:
    """The first digits of an integer too large for a float (str() refuses past 4300 digits)."""
    try:
        return f"{str(number)[:20]}..."
    except ValueError:
        return "a number of more than 4300 digits"


__all__ = ["ConfigError", "external_solver", "load_configuration", "override_solver", "parse_configuration",
           "solver_problems"]
