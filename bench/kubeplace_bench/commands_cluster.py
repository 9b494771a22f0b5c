"""``kubeplace bench cluster``: the real kube-scheduler against kubeplace on a local control plane.

Registered on the ``bench`` group (cli/bench.py) as ``bench.add_command(cluster_command)``.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import NoReturn

import click

from kubeplace.cli.options import EXIT_INPUT, FiniteFloatRange


@click.command("cluster")
@click.option("--scenario", "scenarios", multiple=True, metavar="NAME",
              help="Run this scenario (repeatable): fragmented-gpu, mixed-shapes, tenants, openb, ha-web, "
                   "jobset-racks, lws-racks, mixed-rules, preempt-node-choice, preempt-gpu-gang, "
                   "preempt-gpu-gang-fits, preempt-many. "
                   "Default: all.")
@click.option("--seed", type=int, default=0, show_default=True, help="Scenario seed (and kubeplace's solver seed).")
@click.option("--time-limit", type=FiniteFloatRange(min=0.05), default=10.0, show_default=True,
              help="kubeplace's solver budget per scenario, seconds.")
@click.option("--settle", type=FiniteFloatRange(min=0.5), default=5.0, show_default=True,
              help="The kube-scheduler copy ends after this many seconds without a new binding.")
@click.option("--openb-dir", type=click.Path(path_type=Path, file_okay=False), default=None,
              help="Directory of the openb CSVs (default: $KUBEPLACE_OPENB_DIR, else shared/data/openb above "
                   "the checkout).")
@click.option("--openb-nodes", type=click.IntRange(min=1), default=250, show_default=True,
              help="Nodes sampled from openb for the openb scenario.")
@click.option("--build", is_flag=True,
              help="Build the control plane binaries if they are not cached (10-25 minutes, needs Go).")
@click.option("-o", "--output", type=click.Choice(["table", "json"]), default="table", show_default=True)
def cluster_command(scenarios: tuple[str, ...], seed: int, time_limit: float, settle: float, openb_dir: Path | None,
                    openb_nodes: int, build: bool, output: str) -> None:
    """Place the same pending pods with the real kube-scheduler and with kubeplace.

    Starts etcd, kube-apiserver, kube-controller-manager and kwok on 127.0.0.1 (binaries from
    `.ci/build-controlplane`'s cache), creates each scenario's fake nodes, lets the kube-scheduler
    (default profile) place one copy of the pods and kubeplace another on the emptied cluster, and
    reports for both: pods placed and pending, GPUs placed, balance, GPU fragmentation, wall time.
    The scenarios ha-web, jobset-racks, lws-racks and mixed-rules carry topology spread and
    (exclusive) pod affinity, which kubeplace models; column "left" counts the pods it leaves to the
    default scheduler (rules it does not model), and each scenario states what both schedulers are
    expected to place.
    Preemption scenarios start from running pods of lower priority and run `kubeplace serve`
    (preemption on) against the kube-scheduler's DefaultPreemption: victims and their priorities,
    preemptors bound, wasted evictions.
    """
    from kubernetes.client.exceptions import ApiException

    from kubeplace.kube.errors import KubeplaceError
    from kubeplace_bench import controlplane as cp
    from kubeplace_bench import controlplane_binaries as binaries
    from kubeplace_bench.cluster import BenchError, Settings, run_scenarios, table
    from kubeplace_bench.cluster_preempt import PREEMPTION_SCENARIOS
    from kubeplace_bench.cluster_rules import RULE_SCENARIOS
    from kubeplace_bench.cluster_scenarios import SCENARIOS, default_openb_dir, openb

    known = {**SCENARIOS, **RULE_SCENARIOS, **PREEMPTION_SCENARIOS}

    unknown = [s for s in scenarios if s not in known]
    if unknown:
        raise click.BadParameter(f"unknown scenario {', '.join(unknown)}; known: {', '.join(known)}",
                                 param_hint="--scenario")
    chosen = list(dict.fromkeys(scenarios)) or list(known)
    data_dir = openb_dir or default_openb_dir()
    built = []
    for name in chosen:
        try:
            built.append(openb(seed, data_dir, openb_nodes) if name == "openb" else known[name](seed))
        except FileNotFoundError as e:
            _fail(f"scenario {name}: {e} (give the openb CSV directory with --openb-dir)")
        except Exception as e:  # InputError from the CSV reader and the like
            _fail(f"scenario {name}: {e}")
    try:
        bin_dir = binaries.locate_binaries() if build else binaries.cached_binaries()
    except binaries.ControlPlaneError as e:
        _fail(str(e))

    def say(message: str) -> None:
        click.echo(message, err=True)

    settings = Settings(seed=seed, time_limit=time_limit, settle=settle)
    try:
        with cp.running_control_plane(bin_dir) as plane:
            say(f"control plane up at {plane.server}")
            doc = run_scenarios(plane, built, settings, say)
    except binaries.ControlPlaneError as e:
        _fail(f"the control plane failed: {e}")
    except (BenchError, KubeplaceError, TimeoutError) as e:
        _fail(f"the benchmark failed: {e}")
    except ApiException as e:
        _fail(f"the benchmark failed: API server answered HTTP {e.status} {e.reason}: {(e.body or '')[:300]}")
    click.echo(json.dumps(doc, indent=2) if output == "json" else table(doc), nl=output == "json")


def _fail(message: str) -> NoReturn:
    click.echo(f"error: {message}", err=True)
    sys.exit(EXIT_INPUT)
