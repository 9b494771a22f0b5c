"""``kubeplace bench serve-cycles``: every gang bound whole, one cycle each, its CPU split between the
cycle and the watch events; and the side-by-side run prints both checkouts."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from kubeplace_bench.commands_serve_cycles import serve_cycles_command
from kubeplace_bench.serve_cycles import measure

REPO = Path(__file__).resolve().parents[2]


def test_each_gang_is_bound_whole_in_its_cycle_and_its_cpu_is_split() -> None:
    result = measure(nodes=12, bound=6, cycles=3, gang=4)
    assert result["pods_bound"] == 12
    assert result["cpu_ms_per_gang"] >= result["cycle_cpu_ms_per_gang"] + result["events_cpu_ms_per_gang"] > 0


def test_the_baseline_runs_beside_it() -> None:
    out = CliRunner().invoke(serve_cycles_command, ["--nodes", "8", "--bound", "4", "--cycles", "2", "--gang", "3",
                                                    "--rounds", "1", "--baseline", str(REPO), "-o", "json"])
    assert out.exit_code == 0, out.output
    doc = json.loads(out.output)
    assert doc["kubeplace"]["pods_bound"] == doc["baseline"]["pods_bound"] == 6
    assert doc["kubeplace"]["checkout"] == doc["baseline"]["checkout"] == str(REPO)
