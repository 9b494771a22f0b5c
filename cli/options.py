"""Options shared by commands, in kubectl's spelling, and turning them into inputs."""

from __future__ import annotations

import functools
import math
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, NoReturn, TypeVar

import click

from kubeplace.kube.errors import EXIT_INPUT, InputError, KubeplaceError
from kubeplace.kube.metrics import DEFAULT_MAX_AGE
from kubeplace.kube.objects import Snapshot
from kubeplace.kube.text import printable
from kubeplace.models.config import Configuration, SolverSettings
from kubeplace.models.config_load import MAX_WORKERS, load_configuration, override_solver
from kubeplace.solver.backends import BACKENDS

F = TypeVar("F", bound=Callable[..., Any])
OUTPUTS = ("table", "wide", "json", "yaml")

__all__ = ["EXIT_INPUT"]  # re-exported for the benchmark commands


def exit_with(error: KubeplaceError) -> NoReturn:
    """The CLI's answer to every KubeplaceError: its detail lines, then one ``error:`` line on
    stderr (escaped: names from the input may hold terminal escapes), then its exit code."""
    for line in error.details:
        click.echo(printable(line), err=True)
    click.echo(f"error: {printable(str(error))}", err=True)
    sys.exit(error.exit_code)


class OneLineUsageError(click.UsageError):
    """A usage error (bad flag, bad value) shown as one line, not click's usage block; exit 2."""

    def __init__(self, original: click.UsageError) -> None:
        super().__init__(" ".join(original.format_message().split()).rstrip("."), original.ctx)

    def show(self, file: IO[Any] | None = None) -> None:
        command = self.ctx.command_path if self.ctx is not None else "kubeplace"
        click.echo(f"error: {printable(self.message)} (see '{command} --help')", err=True)


def _one_line(error: click.UsageError) -> click.UsageError:
    if isinstance(error, (OneLineUsageError, click.exceptions.NoArgsIsHelpError)):
        return error  # already one line; or the help text asked for by giving no arguments
    return OneLineUsageError(error)


class KubeplaceGroup(click.Group):
    """A command group whose KubeplaceErrors (bad input, bad config, cluster trouble) become
    one line on stderr and their exit code (2; 3 for a plan the verifier refused), and whose
    usage errors are one line too; never a traceback."""

    def make_context(self, info_name: str | None, args: list[str], parent: click.Context | None = None,
                     **extra: Any) -> click.Context:
        try:
            return super().make_context(info_name, args, parent, **extra)
        except click.UsageError as e:
            raise _one_line(e) from None

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except KubeplaceError as e:
            exit_with(e)
        except click.UsageError as e:
            raise _one_line(e) from None


class FiniteFloatRange(click.FloatRange):
    """A FloatRange that also refuses nan and inf (which compare false with every bound)."""

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        number = super().convert(value, param, ctx)
        if not math.isfinite(number):
            self.fail(f"{value!r} is not a finite number", param, ctx)
        return number


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
    metrics_max_age: float = DEFAULT_MAX_AGE
    """Seconds after which measured usage is ignored (``--metrics-max-age``; 0: no limit)."""

    def namespaces(self) -> set[str] | None:
        return None if self.all_namespaces or not self.namespace else {self.namespace}

    def load(self, scheduler_name: str, disruption_budgets: bool = False, provision: bool = False) -> Snapshot:
        """The snapshot (with the cluster's PodDisruptionBudgets when asked: files hold theirs);
        refused when it has no nodes (nothing could be placed, and an empty file or a wrong path
        must not look like a cluster with nothing to do), unless ``provision`` and it has
        NodePools (new nodes can be added)."""
        if self.paths:
            from kubeplace.kube.files import load_snapshot

            snapshot = load_snapshot(list(self.paths), scheduler_name=scheduler_name,
                                     namespaces=self.namespaces(), selector=self.selector)
        else:
            from kubeplace.kube.kubeconfig import connect
            from kubeplace.kube.live import load_live_snapshot

            cluster = connect(self.kubeconfig, self.context)
            snapshot = load_live_snapshot(cluster, scheduler_name=scheduler_name, namespaces=self.namespaces(),
                                          selector=self.selector, disruption_budgets=disruption_budgets)
        if not snapshot.nodes and not (provision and snapshot.node_pools):
            from kubeplace.kube.raw_objects import skipped_summary

            skipped = skipped_summary(snapshot.skipped_kinds)
            raise InputError("no nodes in the snapshot, so nothing can be placed" + (f"; {skipped}" if skipped else ""),
                             file=", ".join(map(str, self.paths)) or "the cluster",
                             expected="Node objects, as `kubectl get nodes,pods -A -o yaml` prints them"
                             if self.paths else "")
        if self.paths:
            note_skipped(snapshot)
        return self.measured(snapshot)

    def measured(self, snapshot: Snapshot) -> Snapshot:
        """``snapshot`` without its stale metrics, after one ``warning:`` line per note (metrics
        API missing, stale metrics ignored) on stderr."""
        import time

        from kubeplace.kube.metrics import fresh_metrics

        snapshot = fresh_metrics(snapshot, self.metrics_max_age, time.time())
        for line in snapshot.notes:
            click.echo(f"warning: {printable(line)}", err=True)
        return snapshot


def note_skipped(snapshot: Snapshot) -> None:
    """One line on stderr counting the objects of kinds placement does not read, if any."""
    from kubeplace.kube.raw_objects import skipped_summary

    if line := skipped_summary(snapshot.skipped_kinds):
        click.echo(f"note: {printable(line)}", err=True)


def cluster_options(f: F) -> F:
    """--kubeconfig, --context, -n, -A, -l, as kubectl has them."""
    decorators = [
        click.option("--kubeconfig", envvar=None, default=None, metavar="FILE",
                     help="Kubeconfig file (default: $KUBECONFIG, then ~/.kube/config, then in-cluster)."),
        click.option("--context", default=None, help="Kubeconfig context to use."),
        click.option("-n", "--namespace", default=None, help="Only pending pods of this namespace."),
        click.option("-A", "--all-namespaces", is_flag=True, help="Pending pods of every namespace (default)."),
        click.option("-l", "--selector", default=None, help="Only pending pods matching this label selector."),
        click.option("--metrics-max-age", type=FiniteFloatRange(min=0), default=DEFAULT_MAX_AGE, metavar="SECONDS",
                     show_default=True,
                     help="Ignore measured usage (metrics.k8s.io) older than this; 0: no limit (saved snapshots)."),
    ]
    return functools.reduce(lambda acc, d: d(acc), reversed(decorators), f)


def solver_options(f: F) -> F:
    decorators = [
        click.option("--config", "config_path", type=click.Path(path_type=Path, dir_okay=False), default=None,
                     help="PlacementConfiguration file (profiles, plugins, solver settings)."),
        click.option("--scheduler-name", default=None,
                     help="Place pods with this spec.schedulerName (default: the first profile's, kubeplace)."),
        click.option("--backend", default=None, metavar="NAME",
                     help=f"Exact backend that improves on the greedy answer: {', '.join(BACKENDS)} (default cpsat)."),
        click.option("--time-limit", type=float, default=None, help="Seconds the solver may spend (default 10)."),
        click.option("--workers", type=int, default=None, help=f"Solver threads, 1 to {MAX_WORKERS} (default 2)."),
        click.option("--gap", type=float, default=None, help="Stop when within this relative gap of the bound."),
        click.option("--seed", type=int, default=None,
                     help="Random seed, 0 to 2^31-1 (deterministic with --workers 1)."),
    ]
    return functools.reduce(lambda acc, d: d(acc), reversed(decorators), f)


def node_timeout_option(when: str) -> Callable[[F], F]:
    """--node-timeout SECONDS: how long new nodes (NodeClaims) may take to be ready, 1 s to an hour,
    for ``plan --provision --apply`` and ``rebalance --consolidate --replace --apply`` alike."""
    return click.option("--node-timeout", type=FiniteFloatRange(min=1, max=3600), default=300.0, show_default=True,
                        metavar="SECONDS", help=f"{when}: how long to wait for the new nodes to be ready "
                                                "(initialized) before going on.")


def report_option(f: F) -> F:
    """--report FILE: the visual report (kubeplace.report), one self-contained HTML file."""
    return click.option("--report", "report_path", type=click.Path(path_type=Path, dir_okay=False), default=None,
                        metavar="FILE.html",
                        help="Also write a self-contained HTML report: utilisation per node pool before and "
                             "after, GPU devices, unplaced pods or moves, the solver's progress.")(f)


def refuse_input_as_report(report: Path | None, sources: Sequence[Path], *others: str | Path | None) -> None:
    """Refuses (exit 2, one line, before anything is read or written) a ``--report FILE`` that is
    one of the command's inputs: a SOURCE file, a snapshot file a SOURCE directory holds or would
    hold (``.yaml``, ``.yml``, ``.json`` anywhere under it), or ``others`` (--config,
    --kubeconfig). Paths are compared resolved (symlinks, ``..``) and as files (hard links)."""
    if report is None:
        return
    from kubeplace.kube.files import SNAPSHOT_SUFFIXES

    target = report.resolve()
    for given in [*sources, *(Path(o) for o in others if o)]:
        path = given.resolve()
        inside = (given in sources and path.is_dir() and target.is_relative_to(path)
                  and target.suffix.lower() in SNAPSHOT_SUFFIXES)
        if target == path or inside or _same_file(target, path):
            what = f"a snapshot file of SOURCE {given}" if inside else f"the input {given}"
            raise InputError(f"{report} is {what}: writing the report would overwrite it", field="--report",
                             expected="another file for the report")


def _same_file(a: Path, b: Path) -> bool:
    try:
        return a.samefile(b)
    except OSError:  # one of them does not exist: not the same file
        return False


def load_config(config_path: Path | None) -> Configuration:
    return load_configuration(config_path)


SOLVER_FLAGS = {"backend": "--backend", "time_limit": "--time-limit", "workers": "--workers",
                "relative_gap": "--gap", "seed": "--seed"}
"""How an error names each solver setting given on the command line."""


def solver_settings(config: Configuration, backend: str | None, time_limit: float | None,
                    workers: int | None, gap: float | None, seed: int | None) -> SolverSettings:
    """The configuration's solver settings with the flags given over them, validated as the
    configuration file is (ConfigError naming the flag otherwise)."""
    return override_solver(config.solver, SOLVER_FLAGS, backend=backend, time_limit=time_limit, workers=workers,
                           relative_gap=gap, seed=seed)
