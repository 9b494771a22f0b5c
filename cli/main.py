"""The ``kubeplace`` command: thin click commands over library calls.

Every KubeplaceError (bad input, bad config, cluster trouble) becomes one line on
stderr and exit code 2; nothing is written to the cluster in that case.
"""

from __future__ import annotations

import functools
import importlib.metadata
import importlib.util
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

import click

from kubeplace.cli.options import (
    OUTPUTS,
    KubeplaceGroup,
    Source,
    cluster_options,
    load_config,
    node_timeout_option,
    refuse_input_as_report,
    report_option,
    solver_options,
    solver_settings,
)
from kubeplace.cli.render import dump, print_plan, progress, recorder, stdout_console, summary_text
from kubeplace.kube.catalogue import InstanceType
from kubeplace.kube.errors import EXIT_INCOMPLETE, EXIT_INPUT, InputError, PlanVerificationFailed
from kubeplace.kube.text import printable

#: The entry-point group through which another distribution adds ``kubeplace`` commands.
COMMANDS_GROUP = "kubeplace.commands"
#: Commands the documentation names that another distribution adds, and which one: typed
#: without it installed, they say so in one line instead of "No such command".
ADDED_BY: Mapping[str, str] = {"bench": "kubeplace-bench", "openb": "kubeplace-bench"}


@functools.cache
def added_commands() -> dict[str, importlib.metadata.EntryPoint]:
    """The commands installed distributions add (entry points in :data:`COMMANDS_GROUP`), by name;
    only those whose module can be found here (a distribution's metadata can be visible without
    its code, e.g. an environment's site-packages added to another one's path)."""
    return {entry.name: entry for entry in importlib.metadata.entry_points(group=COMMANDS_GROUP)
            if _findable(entry.module)}


def _findable(module: str) -> bool:
    try:
        return importlib.util.find_spec(module.partition(".")[0]) is not None
    except (ImportError, ValueError):
        return False


def _not_installed(name: str, distribution: str) -> click.Command:
    def explain() -> None:
        click.echo(f"error: kubeplace {name} comes with {distribution}, which is not installed; from a kubeplace "
                   "checkout: pip install -e ./bench", err=True)
        sys.exit(EXIT_INPUT)

    return click.Command(name, callback=explain, add_help_option=False, hidden=True,
                         context_settings={"ignore_unknown_options": True, "allow_extra_args": True})


class MainGroup(KubeplaceGroup):
    """The top-level group: its own commands, and those other distributions add (the benchmarks'
    ``bench``/``openb``), which are looked up and imported only when invoked or listed, so that
    the scheduler's runtime never imports them."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*super().list_commands(ctx), *added_commands()})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        own = super().get_command(ctx, cmd_name)
        if own is not None:
            return own
        entry = added_commands().get(cmd_name)
        if entry is not None:
            command = entry.load()
            if not isinstance(command, click.Command):
                raise click.ClickException(f"the entry point {entry.value} ({COMMANDS_GROUP}) is not a click command")
            return command
        return _not_installed(cmd_name, ADDED_BY[cmd_name]) if cmd_name in ADDED_BY else None


@click.group(cls=MainGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="kubeplace")
def main() -> None:
    """kubeplace places pending Kubernetes pods by solving one optimisation problem
    over the whole batch, instead of choosing nodes one pod at a time."""


@main.command()
@click.argument("source", nargs=-1, type=click.Path(path_type=Path, exists=True))
@cluster_options
@solver_options
@click.option("-o", "--output", type=click.Choice(OUTPUTS), default="table", help="Output format.")
@report_option
@click.option("--preempt", is_flag=True,
              help="Also evict running pods of lower priority where that places pending pods (dry run: lists them).")
@click.option("--provision", is_flag=True,
              help="Also choose the cheapest new nodes the snapshot's Karpenter NodePools may launch for the pods "
                   "the existing nodes cannot take (needs --catalogue).")
@click.option("--catalogue", "catalogue_paths", multiple=True, metavar="FILE",
              type=click.Path(path_type=Path, exists=True, dir_okay=False),
              help="Instance-type catalogue (Karpenter's kwok instance_types.json, or the YAML form) for --provision.")
@click.option("--apply", is_flag=True,
              help="With --provision: create the new nodes as Karpenter NodeClaims, wait until they are ready, "
                   "and bind the pods of the plan (live cluster only).")
@node_timeout_option("With --apply")
def plan(source: Sequence[Path], kubeconfig: str | None, context: str | None, namespace: str | None,
         all_namespaces: bool, selector: str | None, metrics_max_age: float, config_path: Path | None,
         scheduler_name: str | None,
         backend: str | None, time_limit: float | None, workers: int | None, gap: float | None,
         seed: int | None, output: str, report_path: Path | None, preempt: bool, provision: bool,
         catalogue_paths: Sequence[Path], apply: bool, node_timeout: float) -> None:
    """Show where every pending pod would go, and why the others cannot go anywhere.

    SOURCE is YAML/JSON files or directories of Node and Pod objects (for example what
    `kubectl get nodes,pods -A -o yaml` prints); without SOURCE, the current cluster.
    Never writes anything. With --preempt, the plan also lists the pods to evict (the fewest,
    of the lowest priority) and the pods each eviction makes room for. With --provision, the new
    nodes to add (NodePool, instance type, zone, capacity type, price) for the pods the existing
    nodes cannot take: cheapest first after placing the most pods; with --apply, those nodes are
    created through Karpenter and the plan is bound (exit code as `bind`'s).
    """
    from kubeplace.plan.pipeline import make_plan
    from kubeplace.plan.preemption_plan import make_preemption_plan

    refuse_input_as_report(report_path, source, config_path, kubeconfig)
    catalogue = provision_catalogue(provision, catalogue_paths, preempt)
    if apply and (catalogue is None or source):
        raise InputError("--apply creates the new nodes of --provision in the live cluster: it needs --provision "
                         "and no SOURCE", field="--apply")
    config = load_config(config_path)
    profile = config.profile(scheduler_name)
    src = Source(tuple(source), kubeconfig, context, namespace, all_namespaces, selector, metrics_max_age)
    settings = solver_settings(config, backend, time_limit, workers, gap, seed)
    snapshot = src.load(profile.scheduler_name, disruption_budgets=preempt, provision=provision)
    with progress(True, settings.time_limit) as show:
        on_event, events = recorder(show)
        if catalogue is not None:
            from kubeplace.plan.provision import make_provision_plan

            planned = make_provision_plan(snapshot, catalogue, config, profile, settings, on_event)
        else:
            planner = make_preemption_plan if preempt else make_plan
            planned = planner(snapshot, config, profile, settings, on_event)
    if planned.violations:
        raise PlanVerificationFailed(tuple(map(str, planned.violations)))
    if not (apply and output in ("json", "yaml")):  # --apply -o json|yaml prints the plan with what was applied
        print_plan(planned.plan, output, stdout_console())
    if report_path is not None:
        from kubeplace.report.build import plan_report
        from kubeplace.report.html import write_report

        report = plan_report(snapshot, planned.plan, summary_text(planned.plan).splitlines(), events, config.gpu)
        write_report(report_path, report)
        click.echo(f"report: {printable(str(report_path))}", err=True)
    if apply and catalogue is not None:
        from kubeplace.cli.provision_apply import apply_provision

        ok = apply_provision(src, config, profile, snapshot, planned.plan, node_timeout, output)
        sys.exit(0 if ok else EXIT_INCOMPLETE)


def provision_catalogue(provision: bool, paths: Sequence[Path], preempt: bool) -> tuple[InstanceType, ...] | None:
    """The instance types of ``--catalogue`` when ``--provision`` is asked for; None without it.
    Either flag without the other, or with ``--preempt``, is refused in one line."""
    if not provision:
        if paths:
            raise InputError("--catalogue is read only with --provision", field="--catalogue")
        return None
    if not paths:
        raise InputError("--provision needs the instance types new nodes can be launched as", field="--catalogue",
                         expected="a catalogue file (Karpenter's kwok instance_types.json, or the YAML form)")
    if preempt:
        raise InputError("--provision and --preempt cannot be combined: a plan either adds nodes or evicts pods",
                         field="--preempt")
    from kubeplace.kube.files import load_catalogue

    return load_catalogue(list(paths))


@main.command()
@click.argument("source", nargs=-1, type=click.Path(path_type=Path, exists=True))
@cluster_options
@solver_options
@click.option("--plan", "plan_file", type=click.Path(path_type=Path, exists=True, dir_okay=False),
              default=None, help="Bind this plan (written by `kubeplace plan -o yaml|json`) instead of planning.")
@click.option("--dry-run", type=click.Choice(["none", "server"]), default="none",
              help="server: the API server validates every binding without persisting it.")
@click.option("-y", "--yes", is_flag=True, help="Do not ask for confirmation.")
@click.option("-o", "--output", type=click.Choice(OUTPUTS), default="table", help="Output format of the report.")
def bind(source: Sequence[Path], kubeconfig: str | None, context: str | None, namespace: str | None,
         all_namespaces: bool, selector: str | None, metrics_max_age: float, config_path: Path | None,
         scheduler_name: str | None,
         backend: str | None, time_limit: float | None, workers: int | None, gap: float | None,
         seed: int | None, plan_file: Path | None, dry_run: str, yes: bool, output: str) -> None:
    """Bind a plan through pods/binding, each pod's uid as precondition.

    The plan is verified against the cluster as it is now before anything is bound;
    a plan that fails verification is refused. Exit code 0 only when every pod was bound.
    """
    from kubeplace.cli.binding import run_bind

    config = load_config(config_path)
    profile = config.profile(scheduler_name)
    settings = solver_settings(config, backend, time_limit, workers, gap, seed)
    src = Source(tuple(source), kubeconfig, context, namespace, all_namespaces, selector, metrics_max_age)
    ok = run_bind(src, config, profile, settings, plan_file, dry_run == "server", yes, output)
    sys.exit(0 if ok else EXIT_INCOMPLETE)


@main.command("config-check")
@click.argument("config_path", type=click.Path(path_type=Path, dir_okay=False))
def config_check(config_path: Path) -> None:
    """Validate a PlacementConfiguration file and print what it enables."""
    from kubeplace.models.config_load import external_solver
    from kubeplace.models.plugins import in_tree_registry

    config = load_config(config_path)
    out = []
    for p in config.profiles:
        out.append({"schedulerName": p.scheduler_name, "objective": p.objective.value,
                    "plugins": p.plugin_names(config.registry)})
    extra = sorted(set(config.registry) - set(in_tree_registry()))
    solver = vars(external_solver(config.solver))
    click.echo(dump({"profiles": out, "userPlugins": extra, "solver": solver}, "yaml"), nl=False)


def _register() -> None:
    """Commands in their own modules, imported here so that `kubeplace --help` lists them."""
    from kubeplace.cli.completion import completion_command
    from kubeplace.cli.rebalance import rebalance_command
    from kubeplace.cli.serve import serve_command
    from kubeplace.cli.simulate import simulate_command
    from kubeplace.cli.webhook import webhook_certs_command, webhook_command

    main.add_command(serve_command)
    main.add_command(rebalance_command)
    main.add_command(simulate_command)
    main.add_command(webhook_command)
    main.add_command(webhook_certs_command)
    main.add_command(completion_command)


_register()

if __name__ == "__main__":
    main()
