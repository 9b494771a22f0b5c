"""Options shared by commands, in kubectl's spelling, and turning them into inputs."""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import click

from kubeplace.kube.errors import KubeplaceError
from kubeplace.kube.objects import Snapshot
from kubeplace.models.config import Configuration, load_configuration
from kubeplace.solver.solve import SolverOptions

F = TypeVar("F", bound=Callable[..., Any])
OUTPUTS = ("table", "wide", "json", "yaml")
EXIT_INPUT = 2


class KubeplaceGroup(click.Group):
    """A command group whose KubeplaceErrors (bad input, bad config, cluster trouble) become
    one line on stderr and exit code 2, never a traceback."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except KubeplaceError as e:
            click.echo(f"error: {e}", err=True)
            sys.exit(EXIT_INPUT)


def int_list(_ctx: click.Context, _param: click.Parameter, value: str) -> list[int]:
    """Click callback: "1,2,3" -> [1, 2, 3], with a usage error for anything else."""
    try:
        items = [int(s) for s in value.split(",") if s.strip()]
    except ValueError:
        raise click.BadParameter("expected integers separated by commas, e.g. 1,2,3") from None
    if not items:
        raise click.BadParameter("expected at least one integer")
    return items


@dataclass(frozen=True)
class Source:
    """Where the snapshot comes from: files, or the cluster when no path is given."""

    paths: tuple[Path, ...]
    kubeconfig: str | None
    context: str | None
    namespace: str | None
    all_namespaces: bool
    selector: str | None

    def namespaces(self) -> set[str] | None:
        return None if self.all_namespaces or not self.namespace else {self.namespace}

    def load(self, scheduler_name: str) -> Snapshot:
        if self.paths:
            from kubeplace.kube.files import load_snapshot

            from_files = load_snapshot(list(self.paths), scheduler_name=scheduler_name,
                                       namespaces=self.namespaces(), selector=self.selector)
            note_skipped(from_files)
            return from_files
        from kubeplace.kube.client import connect
        from kubeplace.kube.live import load_live_snapshot

        cluster = connect(self.kubeconfig, self.context)
        snapshot: Snapshot = load_live_snapshot(cluster, scheduler_name=scheduler_name, namespaces=self.namespaces(),
                                  selector=self.selector)
        return snapshot


def note_skipped(snapshot: Snapshot) -> None:
    """One line on stderr counting the objects of kinds placement does not read, if any."""
    from kubeplace.kube.parse import skipped_summary

    if line := skipped_summary(snapshot.skipped_kinds):
        click.echo(f"note: {line}", err=True)


def cluster_options(f: F) -> F:
    """--kubeconfig, --context, -n, -A, -l, as kubectl has them."""
    decorators = [
        click.option("--kubeconfig", envvar=None, default=None, metavar="FILE",
                     help="Kubeconfig file (default: $KUBECONFIG, then ~/.kube/config, then in-cluster)."),
        click.option("--context", default=None, help="Kubeconfig context to use."),
        click.option("-n", "--namespace", default=None, help="Only pending pods of this namespace."),
        click.option("-A", "--all-namespaces", is_flag=True, help="Pending pods of every namespace (default)."),
        click.option("-l", "--selector", default=None, help="Only pending pods matching this label selector."),
    ]
    return functools.reduce(lambda acc, d: d(acc), reversed(decorators), f)


def solver_options(f: F) -> F:
    decorators = [
        click.option("--config", "config_path", type=click.Path(path_type=Path, dir_okay=False), default=None,
                     help="PlacementConfiguration file (profiles, plugins, solver settings)."),
        click.option("--scheduler-name", default=None,
                     help="Place pods with this spec.schedulerName (default: the first profile's, kubeplace)."),
        click.option("--backend", type=click.Choice(["cpsat", "milp", "highs", "cbc"]), default=None,
                     help="Exact backend that improves on the greedy answer (default cpsat)."),
        click.option("--time-limit", type=click.FloatRange(min=0.05), default=None,
                     help="Seconds the solver may spend (default 10)."),
        click.option("--workers", type=click.IntRange(min=1), default=None, help="Solver threads (default 2)."),
        click.option("--gap", type=click.FloatRange(0, 1, max_open=True), default=None,
                     help="Stop when within this relative gap of the bound."),
        click.option("--seed", type=int, default=None, help="Random seed (deterministic with --workers 1)."),
    ]
    return functools.reduce(lambda acc, d: d(acc), reversed(decorators), f)


def load_config(config_path: Path | None) -> Configuration:
    return load_configuration(config_path)


def solver_settings(config: Configuration, backend: str | None, time_limit: float | None,
                    workers: int | None, gap: float | None, seed: int | None) -> SolverOptions:
    s = config.solver
    return SolverOptions(
        backend=backend or s.backend,
        time_limit=time_limit if time_limit is not None else s.timeLimitSeconds,
        workers=workers if workers is not None else s.workers,
        relative_gap=gap if gap is not None else s.relativeGap,
        seed=seed if seed is not None else s.seed,
    )
