"""Sweeps: the product of the axes, in order, the same results in local processes as in one."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from kubeplace.simulate.engine import Case
from kubeplace.simulate.generate import DEFAULT_SHAPES, generate
from kubeplace.simulate.metrics import Sample, Summary
from kubeplace.simulate.sweep import read_sweep, run_cases
from tests.simulate.sim_builders import node, write


def _sweep(tmp_path: Path) -> Path:
    write(tmp_path / "cluster.yaml", {"apiVersion": "v1", "kind": "List",
                                      "items": [node("n0", cpu="8"), node("n1", cpu="8")]})
    cpu_only = [s for s in DEFAULT_SHAPES if not s.gpus]
    write(tmp_path / "trace.yaml", generate(30, 0.2, 40, cpu_only, gang_fraction=0.2, gang_sizes=(2,), seed=2))
    return write(tmp_path / "sweep.yaml", {"apiVersion": "kubeplace.io/v1alpha1", "kind": "Sweep",
                                           "clusters": ["cluster.yaml"], "traces": ["trace.yaml"],
                                           "schedulers": ["kubeplace", "fgd"], "seeds": [0, 1]})


def test_a_sweep_is_the_product_of_its_axes_in_order(tmp_path: Path) -> None:
    specs = read_sweep(_sweep(tmp_path))
    assert [(s.scheduler, s.seed, s.label) for s in specs] == [
        ("kubeplace", 0, "seed 0"), ("kubeplace", 1, "seed 1"), ("fgd", 0, "seed 0"), ("fgd", 1, "seed 1")]
    assert specs[0].cluster == (tmp_path / "cluster.yaml",)


def test_processes_give_the_results_of_one_process(tmp_path: Path) -> None:
    specs = read_sweep(_sweep(tmp_path))
    serial = run_cases(specs, workers=1)
    parallel = run_cases(specs, workers=2)
    assert all(c is not None for c in serial + parallel)

    def comparable(cases: list[Case | None]) -> list[tuple[str, Summary, tuple[Sample, ...]]]:
        return [(c.label, replace(c.result.summary, wall_seconds=0.0, cpu_seconds=0.0), c.result.samples) for c in cases
                if c is not None]

    assert comparable(serial) == comparable(parallel)
    assert [c.result.summary.scheduler for c in serial if c is not None] == ["kubeplace", "kubeplace", "fgd", "fgd"]
    assert all(c.result.summary.refused == 0 and c.result.summary.never_started == 0 for c in serial
               if c is not None)
