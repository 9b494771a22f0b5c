"""`kubeplace bench load-aware`: on skewed measured load, the load-aware plan keeps new pods off
hot nodes and its hottest node is no hotter than the requests-only plan's."""

from __future__ import annotations

import json

from click.testing import CliRunner

from kubeplace.cli.main import main


def test_load_aware_beats_requests_only_on_skewed_load() -> None:
    result = CliRunner().invoke(main, ["bench", "load-aware", "--nodes", "24", "--pods", "60", "--hot-share", "0.3",
                                       "--time-limit", "3", "--workers", "1", "-o", "json"])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    aware, plain = doc["plans"]["load-aware"], doc["plans"]["requests-only"]
    assert aware["verified"] and plain["verified"]
    assert aware["pods_placed"] == plain["pods_placed"] == 60
    assert aware["pods_onto_hot_nodes"] == 0 < plain["pods_onto_hot_nodes"]
    assert aware["max_cpu_load"] <= plain["max_cpu_load"]
    assert aware["nodes_above_threshold"] <= plain["nodes_above_threshold"]
    table = CliRunner().invoke(main, ["bench", "load-aware", "--nodes", "8", "--pods", "10", "--time-limit", "1"])
    assert table.exit_code == 0 and "pods_onto_hot_nodes" in table.stdout
