"""``kubeplace bench soak``: a short run's table and JSON (the test suite's soak is
tests/simulate/test_simulate_soak.py; the bench runs days)."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from kubeplace.cli.main import main

SHORT = ["bench", "soak", "--days", "0.02", "--every", "300", "--max-backoff", "300", "--period", "600",
         "--job-rate", "0.01"]


def test_soak_short_json_has_every_table_over_time() -> None:
    result = CliRunner().invoke(main, [*SHORT, "-o", "json"])
    assert result.exit_code in (0, 1), result.output  # (1: something not flat, named in "growing")
    doc = json.loads(result.stdout)
    assert len(doc["samples"]) >= 5 and doc["counts"]["cycles"] > 0 and doc["counts"]["bindings"] > 0
    assert {"queue_attempts", "decisions", "memo_entries", "memory_blocks"} <= set(doc["measures"])
    assert (result.exit_code == 1) == bool(doc["growing"])
    assert set(doc["measures"]["queue_waiting"]) == {"start", "middle", "end", "max_thirds", "mean_thirds"}


def test_soak_short_table() -> None:
    result = CliRunner().invoke(main, SHORT)
    assert result.exit_code in (0, 1), result.output
    assert "simulated days" in result.stdout and "queue_attempts" in result.stdout and "growing:" in result.stdout


@pytest.mark.parametrize("args, field", [
    (["--days", "1e9"], "--days"),  # drew jobs for ever before the trace's bound was checked
    (["--days", "30", "--job-rate", "1"], "--days"),
    (["--days", "nan"], "--days"),
    (["--nodes", "1000000"], "--nodes"),
])
def test_a_soak_too_large_is_refused_in_one_line_before_anything_runs(args: list[str], field: str) -> None:
    result = CliRunner().invoke(main, ["bench", "soak", *args])
    assert result.exit_code == 2, result.output
    assert field in result.output and len(result.output.strip().splitlines()) == 1 and not result.stdout.startswith("{")
