"""Small clusters and traces for the simulation tests."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from kubeplace.models.config import Configuration, Profile, SolverSettings
from kubeplace.serve.settings import ServeSettings
from kubeplace.simulate.cluster import Cluster
from kubeplace.simulate.engine import Result, simulate
from kubeplace.simulate.generate import DEFAULT_SHAPES, generate
from kubeplace.simulate.schedulers import Setup
from kubeplace.simulate.trace import Trace, parse_trace

SETUP = Setup(Configuration(), Profile(), SolverSettings(time_limit=5, workers=1), ServeSettings(bind_workers=1))


def replay(cluster: Cluster, trace: Trace, scheduler: str, setup: Setup, until: float | None = None) -> Result:
    """The simulation without the API's latency: a pod starts at the instant its binding is
    decided, so that the tests' times are the trace's and the batches' (the latency has its own
    test)."""
    return simulate(cluster, trace, scheduler, setup, until, latency=0.0)


def node(name: str, cpu: str = "4", memory: str = "16Gi", pool: str = "cpu", gpus: int = 0) -> dict[str, Any]:
    allocatable = {"cpu": cpu, "memory": memory, "pods": "110"}
    if gpus:
        allocatable["nvidia.com/gpu"] = str(gpus)
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": {"kubeplace.io/pool": pool}},
            "status": {"allocatable": allocatable, "capacity": dict(allocatable)}}


def cluster(*nodes: dict[str, Any]) -> Cluster:
    return Cluster(tuple(nodes), (), "test")


def template(cpu: str, memory: str = "1Gi") -> dict[str, Any]:
    return {"spec": {"containers": [{"name": "main", "resources": {"requests": {"cpu": cpu, "memory": memory}}}]}}


def trace_doc(*items: dict[str, Any], templates: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"apiVersion": "kubeplace.io/v1alpha1", "kind": "Trace",
            "templates": templates or {"one": template("1"), "two": template("2"), "three": template("3")},
            "items": list(items)}


def trace(*items: dict[str, Any]) -> Trace:
    return parse_trace(trace_doc(*items), "test")


def write(path: Path, document: Any) -> Path:
    path.write_text(yaml.safe_dump(document))
    return path


def small_sweep(folder: Path) -> Path:
    """Four cases (kubeplace and fgd, seeds 0 and 1) of a 30-job CPU trace with gangs on two nodes."""
    write(folder / "cluster.yaml", {"apiVersion": "v1", "kind": "List",
                                    "items": [node("n0", cpu="8"), node("n1", cpu="8")]})
    cpu_only = [s for s in DEFAULT_SHAPES if not s.gpus]
    write(folder / "trace.yaml", generate(30, 0.2, 40, cpu_only, gang_fraction=0.2, gang_sizes=(2,), seed=2))
    return write(folder / "sweep.yaml", {"apiVersion": "kubeplace.io/v1alpha1", "kind": "Sweep",
                                         "clusters": ["cluster.yaml"], "traces": ["trace.yaml"],
                                         "schedulers": ["kubeplace", "fgd"], "seeds": [0, 1]})

