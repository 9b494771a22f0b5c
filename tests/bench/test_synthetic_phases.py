"""``bench synthetic --phases``: where a plan's time goes, phase by phase, and the phases'
timers gone once the run ends."""

from __future__ import annotations

import json
import re

from click.testing import CliRunner

import kubeplace.plan.pipeline as pipeline
from kubeplace.cli.main import main
from kubeplace_bench.phases import PHASES


def test_phases_are_timed_and_the_pipeline_left_as_it_was() -> None:
    before = {name: getattr(pipeline, name) for _, module, name in PHASES if module == pipeline.__name__}
    result = CliRunner().invoke(main, ["bench", "synthetic", "--nodes", "20", "--pods", "60", "--time-limit", "1",
                                       "--phases", "--no-default-scheduler", "-o", "json"])
    assert result.exit_code == 0, result.output
    (run,) = json.loads(result.stdout)["runs"]
    seconds = run["phase_seconds"]
    assert {"aggregate", "solve", "greedy", "to_plan", "plan_verify", "verify"} <= set(seconds)
    assert all(s >= 0 for s in seconds.values()) and seconds["greedy"] <= seconds["solve"]
    cpu = run["phase_cpu_seconds"]  # on a shared machine, what the phase itself took
    assert set(cpu) == set(seconds) and all(s >= 0 for s in cpu.values()) and cpu["greedy"] <= cpu["solve"]
    assert run["pods_placed"] == 60 and run["default_scheduler_placed"] == 0
    assert 0 < run["plan_peak_mib"] <= run["peak_mib"]
    assert run["cpu_seconds_plan"] > 0 and run["cpu_seconds_verify"] >= 0
    assert {name: getattr(pipeline, name) for name in before} == before


def test_the_table_has_a_column_per_phase() -> None:
    result = CliRunner().invoke(main, ["bench", "synthetic", "--nodes", "10", "--pods", "20", "--time-limit", "1",
                                       "--phases", "--no-default-scheduler"])
    assert result.exit_code == 0, result.output
    assert "S_AGGREGATE" in result.output and "S_VERIFY" in result.output
    assert re.search(r" \d+\.\d+/\d+\.\d+ ", result.output)  # wall/CPU seconds
