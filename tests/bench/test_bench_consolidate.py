"""``kubeplace bench consolidate-scale``: a small run, its answer verified, never dearer, its bound below it."""

from __future__ import annotations

import json

from click.testing import CliRunner

from kubeplace.cli.main import main


def test_consolidate_scale_small() -> None:
    result = CliRunner().invoke(main, ["bench", "consolidate-scale", "--nodes", "12", "--time-limit", "5",
                                       "-o", "json"])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert doc["verified"] and doc["nodes"] == 12 and doc["pods"] > 0
    assert doc["bound"] <= doc["cost_after"] < doc["cost_before"] and doc["nodes_removed"] > 0
    assert 0 <= doc["gap"] < 1
