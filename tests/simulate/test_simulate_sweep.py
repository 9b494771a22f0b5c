"""Sweeps: the product of the axes, in order, the same results in local processes as in one."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from kubeplace.simulate.sweep import clockless, read_sweep, run_cases
from tests.simulate.sim_builders import small_sweep

CHECKOUT = Path(__file__).resolve().parents[2]


def test_a_sweep_is_the_product_of_its_axes_in_order(tmp_path: Path) -> None:
    specs = read_sweep(small_sweep(tmp_path))
    assert [(s.scheduler, s.seed, s.label) for s in specs] == [
        ("kubeplace", 0, "seed 0"), ("kubeplace", 1, "seed 1"), ("fgd", 0, "seed 0"), ("fgd", 1, "seed 1")]
    assert specs[0].cluster == (tmp_path / "cluster.yaml",)


def test_processes_give_the_results_of_one_process(tmp_path: Path) -> None:
    specs = read_sweep(small_sweep(tmp_path))
    serial = run_cases(specs, workers=1)
    parallel = run_cases(specs, workers=2)
    assert all(c is not None for c in serial + parallel)
    assert clockless(serial) == clockless(parallel)
    assert [c.result.summary.scheduler for c in serial if c is not None] == ["kubeplace", "kubeplace", "fgd", "fgd"]
    assert all(c.result.summary.refused == 0 and c.result.summary.never_started == 0 for c in serial
               if c is not None)


BLOCK_RAY = """
import sys
class NoRay:
    def find_spec(self, name, path=None, target=None):
        if name == "ray" or name.startswith("ray."):
            raise ImportError("no ray here")
sys.meta_path.insert(0, NoRay())
from kubeplace.cli.main import main
main()
"""


def test_without_ray_installed_only_the_ray_option_needs_it(tmp_path: Path) -> None:
    sweep = small_sweep(tmp_path)

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-c", BLOCK_RAY, "simulate", "sweep", str(sweep), *args], cwd=CHECKOUT,
                              capture_output=True, text=True, timeout=300)

    refused = run("--ray", "auto")
    assert (refused.returncode, refused.stdout) == (2, "")
    assert refused.stderr == "error: --ray: Ray is not installed: pip install 'kubeplace[ray]'\n"
    local = run("--workers", "2")
    assert local.returncode == 0, local.stderr
    assert "[4/4]" in local.stderr and "kubeplace" in local.stdout
