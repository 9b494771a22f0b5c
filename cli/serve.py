"""``kubeplace serve``: run as the cluster's scheduler for ``spec.schedulerName: kubeplace`` pods.

Logs are JSON lines on stderr, one per decision (pod, node, gang, outcome, why). SIGTERM and
SIGINT stop it between two bindings, give the lease up, and exit 0.
"""

from __future__ import annotations

import json
import logging
import signal
import sys
import time
from pathlib import Path
from types import FrameType
from typing import Any

import click

from kubeplace.cli.options import FiniteFloatRange, exit_with
from kubeplace.kube.errors import EXIT_INPUT


class JsonFormatter(logging.Formatter):
    """One JSON object per line: time, level, logger, message and the record's ``fields``."""

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "ts": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created)) + f".{int(record.msecs):03d}Z",
            "level": record.levelname.lower(), "logger": record.name, "msg": record.getMessage(),
        }
        entry.update(getattr(record, "fields", {}) or {})
        if record.exc_info:
            entry["error"] = self.formatException(record.exc_info)
        return json.dumps(entry, default=str)


def configure_logging(level: str) -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter())
    root = logging.getLogger("kubeplace")
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    root.propagate = False


@click.command("serve")
@click.option("--kubeconfig", default=None, metavar="FILE",
              help="Kubeconfig file (default: $KUBECONFIG, then ~/.kube/config, then in-cluster).")
@click.option("--context", default=None, help="Kubeconfig context to use.")
@click.option("--scheduler-name", default=None,
              help="Place pods with this spec.schedulerName (default: the first profile's, kubeplace).")
@click.option("--config", "config_path", type=click.Path(path_type=Path, dir_okay=False), default=None,
              help="PlacementConfiguration file (profiles, plugins, solver settings).")
@click.option("-n", "--namespace", "namespaces", multiple=True,
              help="Place only pending pods of this namespace (repeatable; default all).")
@click.option("--batch-window", type=FiniteFloatRange(min=0), default=1.0, show_default=True,
              help="The most seconds a batch stays open after its first pending pod (and an incomplete "
                   "gang waits for its members).")
@click.option("--batch-window-per-unit", type=FiniteFloatRange(min=0, max=60), default=0.001, show_default=True,
              metavar="SECONDS", help="The batch window grows by this much per unit waiting beyond the first, up to "
                                      "--batch-window, from --batch-window-min.")
@click.option("--batch-window-min", type=FiniteFloatRange(min=0, max=60), default=0.05, show_default=True,
              metavar="SECONDS", help="The least a batch stays open after its first complete pod or gang (pods a "
                                      "client creates together join one plan); a gang whose members took that long "
                                      "to create is planned at once.")
@click.option("--batch-size", type=click.IntRange(min=1), default=1000, show_default=True,
              help="A batch closes early at this many units (pods or whole gangs).")
@click.option("--metrics-port", type=click.IntRange(min=0, max=65535), default=10251, show_default=True,
              help="Serve Prometheus /metrics on this port (0: off).")
@click.option("--metrics-address", default="0.0.0.0", show_default=True, help="Address /metrics listens on.")
@click.option("--lease-name", default="kubeplace", show_default=True,
              help="Leader-election Lease name ('' disables election: run one replica only).")
@click.option("--lease-namespace", default="kubeplace-system", show_default=True, help="The Lease's namespace.")
@click.option("--identity", default=None, help="This replica's name in the Lease (default: hostname_random).")
@click.option("--max-backoff", type=FiniteFloatRange(min=0.1), default=10.0, show_default=True,
              help="Longest backoff of a pod or gang that could not be placed (doubling from 1 s).")
@click.option("--max-in-unschedulable", type=FiniteFloatRange(min=1, max=86400), default=300.0, show_default=True,
              metavar="SECONDS", help="Longest wait of an unplaceable pod or gang for an event that may help it "
                                      "(a pod deleted, a node added or changed) before it is planned again anyway "
                                      "(the kube-scheduler's podMaxInUnschedulablePodsDuration).")
@click.option("--metrics-max-age", type=FiniteFloatRange(min=0), default=300.0, show_default=True,
              metavar="SECONDS", help="Ignore measured usage (metrics.k8s.io) older than this; 0: no limit.")
@click.option("--bind-workers", type=click.IntRange(min=1, max=256), default=32, show_default=True,
              help="Bindings sent at once (each cycle starts with one and adds one per answer).")
@click.option("--preempt/--no-preempt", default=True, show_default=True,
              help="Evict running pods of lower priority where that places pending pods (and nominate those).")
@click.option("--eviction-api", is_flag=True,
              help="Remove preemption victims through the Eviction API (honours PodDisruptionBudgets) "
                   "instead of deleting them with their grace period.")
@click.option("--log-level", type=click.Choice(["debug", "info", "warning", "error"]), default="info",
              show_default=True)
def serve_command(kubeconfig: str | None, context: str | None, scheduler_name: str | None,
                  config_path: Path | None, namespaces: tuple[str, ...], batch_window: float,
                  batch_window_per_unit: float, batch_window_min: float, batch_size: int,
                  metrics_port: int, metrics_address: str, lease_name: str, lease_namespace: str,
                  identity: str | None, max_backoff: float, max_in_unschedulable: float, metrics_max_age: float,
                  bind_workers: int, preempt: bool,
                  eviction_api: bool,
                  log_level: str) -> None:
    """Run as a scheduler: watch pending pods, plan each batch as one problem, bind.

    Everything already bound is held fixed, but for the running pods of lower priority that
    preemption evicts (with their grace period) to place pending ones; gangs are bound whole or
    not at all; pods that cannot be placed get a FailedScheduling event with the reasons and are
    retried on an event that may help them (a pod deleted or scaled down, a node added or
    changed, their own update), after their backoff, and at the latest after
    --max-in-unschedulable.
    """
    from kubeplace.cli.options import load_config
    from kubeplace.kube.errors import KubeplaceError
    from kubeplace.kube.kubeconfig import connect
    from kubeplace.serve.app import LeaseSettings, Service
    from kubeplace.serve.memory import limit_arenas
    from kubeplace.serve.settings import ServeSettings

    limit_arenas()  # before the watch and binding threads allocate (serve.memory)
    configure_logging(log_level)
    log = logging.getLogger("kubeplace.serve")
    try:
        config = load_config(config_path)
        profile = config.profile(scheduler_name)
        settings = ServeSettings(scheduler_name=profile.scheduler_name, batch_window=batch_window,
                                 batch_window_per_unit=batch_window_per_unit, batch_window_min=batch_window_min,
                                 batch_size=batch_size,
                                 namespaces=frozenset(namespaces) if namespaces else None,
                                 max_backoff=max_backoff, max_in_unschedulable=max_in_unschedulable,
                                 metrics_max_age=metrics_max_age,
                                 bind_workers=bind_workers, preempt=preempt, eviction_api=eviction_api)
        cluster = connect(kubeconfig, context)
        service = Service(cluster, config, profile, config.solver, settings,
                          LeaseSettings(name=lease_name, namespace=lease_namespace), identity or "")
    except KubeplaceError as error:
        exit_with(error)

    def on_signal(signum: int, _frame: FrameType | None) -> None:
        log.info("stopping", extra={"fields": {"signal": signal.Signals(signum).name}})
        service.stop_event.set()
        service.scheduler.queue.wake()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    if metrics_port:
        try:
            service.metrics.serve(metrics_port, metrics_address)
        except OSError as error:
            click.echo(f"error: cannot serve metrics on {metrics_address}:{metrics_port}: {error}", err=True)
            sys.exit(EXIT_INPUT)
    log.info("starting", extra={"fields": {"identity": service.identity, "cluster": cluster.description,
                                           "schedulerName": settings.scheduler_name, "lease": lease_name}})
    if not service.start_watching():
        log.warning("not every resource listed within 60s; scheduling with what is known")
    try:
        service.run()
    finally:
        service.stop(release=True)
        log.info("stopped", extra={"fields": service.status()})
