"""bench fgd-protocol as a table: --resume keeps the records it finds and runs only the others,
--jobs gives the same records, and the summary per trace (means, published, kubeplace - FGD, the
share of the FGD-to-bound gap closed)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from kubeplace_bench.commands import bench
from kubeplace_bench.fgd_protocol import PUBLISHED_POLICY
from kubeplace_bench.fgd_table import load, summary, summary_table

needs_go = pytest.mark.skipif(shutil.which("go") is None, reason="Go is not installed (math/rand's table)")


def rec(trace: str, seed: int, scheduler: str, value: float | None) -> dict[str, Any]:
    return {"trace": trace, "seed": seed, "scheduler": scheduler, "alloc_at_130": value}


def test_the_summary_pairs_seeds_and_gives_the_share_of_the_gap_closed() -> None:
    records = [rec("a", 1, "fgd", 90.0), rec("a", 1, "kubeplace", 91.0), rec("a", 1, "bound", 94.0),
               rec("a", 2, "fgd", 92.0), rec("a", 2, "kubeplace", 92.5), rec("a", 2, "bound", 96.0),
               rec("a", 3, "fgd", 80.0),  # no kubeplace nor bound for seed 3: its mean only
               rec("b", 1, "fgd", 95.0), rec("b", 1, "best-fit", 93.0), rec("b", 1, "kubeplace", None)]
    reference = {("a", "06-FGD", 1): 90.0, ("a", "06-FGD", 2): 92.0, ("a", "06-FGD", 3): 81.0,
                 ("b", "06-FGD", 1): 95.0, ("b", "05-BestFit", 1): 93.5}
    a, b, mean = summary(records, reference, PUBLISHED_POLICY)
    assert a["mean"] == {"fgd": 87.33, "kubeplace": 91.75, "bound": 95.0}
    assert a["runs"] == {"fgd": 3, "kubeplace": 2, "bound": 2}
    assert a["published_fgd"] == 87.67 and a["published_best-fit"] is None
    assert a["kubeplace_minus_fgd"] == 0.75  # seeds 1 and 2: (1.0 + 0.5) / 2
    assert a["gap_closed"] == round(1.5 / 8.0, 3)  # (1 + 0.5) of (4 + 4)
    assert b["mean"] == {"fgd": 95.0, "best-fit": 93.0} and b["published_best-fit"] == 93.5  # a nan run is left out
    assert b["kubeplace_minus_fgd"] is None and b["gap_closed"] is None
    assert mean["trace"] == "mean" and mean["mean"]["fgd"] == round((87.33 + 95.0) / 2, 2)
    assert mean["gap_closed"] == round((91.75 - 87.33) / (95.0 - 87.33), 3)  # over the lists with all three
    text = summary_table([a, b, mean]).splitlines()
    assert text[0].split() == ["trace", "runs", "fgd", "best-fit", "kubeplace", "bound", "pub", "fgd", "pub", "bf",
                               "kp-fgd", "gap", "closed"]
    assert text[1].split() == ["a", "2/3", "87.33", "-", "91.75", "95.00", "87.67", "-", "+0.75", "18.8%"]


def test_a_resume_file_that_is_not_the_command_s_is_a_usage_error(tmp_path: Path) -> None:
    bad = tmp_path / "r.json"
    bad.write_text('{"records": [{"trace": "a"}]}')
    with pytest.raises(ValueError, match="records: expected a list"):
        load(bad)
    assert load(tmp_path / "absent.json") == []
    nodes = tmp_path / "nodes.csv"
    nodes.write_text("sn,cpu_milli,memory_mib,gpu,model\nn0,32000,65536,2,T4\n")
    result = CliRunner().invoke(bench, ["fgd-protocol", "--nodes", str(nodes), "--pods", str(nodes),
                                        "--resume", str(bad)])
    assert result.exit_code == 2 and "--resume" in result.output and "Traceback" not in result.output


def test_a_resume_file_that_cannot_be_written_is_refused_before_any_run(tmp_path: Path) -> None:
    nodes = tmp_path / "nodes.csv"
    nodes.write_text("sn,cpu_milli,memory_mib,gpu,model\nn0,32000,65536,2,T4\n")
    result = CliRunner().invoke(bench, ["fgd-protocol", "--nodes", str(nodes), "--pods", str(nodes),
                                        "--resume", str(tmp_path / "absent" / "table.json")])
    assert result.exit_code == 2 and "--resume" in result.output and "No such file" in result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)


@needs_go
def test_resume_keeps_the_records_it_finds_and_runs_only_the_others(tmp_path: Path) -> None:
    nodes = tmp_path / "nodes.csv"
    nodes.write_text("sn,cpu_milli,memory_mib,gpu,model\n" + "".join(f"n{k},32000,65536,2,T4\n" for k in range(5)))
    pods = tmp_path / "pods.csv"
    pods.write_text("name,cpu_milli,memory_mib,num_gpu,gpu_milli\n" + "".join(
        f"p{k},{1000 + 500 * (k % 3)},1024,1,{(100, 200, 300)[k % 3]}\n" for k in range(12)))
    published = tmp_path / "published.csv"
    published.write_text("workload,sc_policy,tune,seed,total_gpus,alloc_pct_at_130\npods,06-FGD,1.3,42,10,91.5\n")
    resume = tmp_path / "table.json"
    args = ["fgd-protocol", "--nodes", str(nodes), "--pods", str(pods), "--scheduler", "fgd", "--scheduler",
            "best-fit", "--published", str(published), "--resume", str(resume), "-o", "json"]
    first = CliRunner().invoke(bench, [*args, "--seeds", "42"])
    assert first.exit_code == 0, first.output
    saved = json.loads(resume.read_text())
    assert saved == json.loads(first.stdout)
    assert [(r["seed"], r["scheduler"]) for r in saved["records"]] == [(42, "fgd"), (42, "best-fit")]
    saved["records"][0]["alloc_at_130"] = 12.34  # were it run again, it would not be this
    resume.write_text(json.dumps(saved))
    second = CliRunner().invoke(bench, [*args, "--seeds", "42-43", "--bound", "--no-offline", "--jobs", "2"])
    assert second.exit_code == 0, second.output
    assert "2 records kept, 4 of 6 runs to do" in second.stderr and "[4/4 " in second.stderr
    out = json.loads(second.stdout)
    assert out == json.loads(resume.read_text())
    assert [(r["seed"], r["scheduler"]) for r in out["records"]] == [
        (42, "fgd"), (42, "best-fit"), (42, "bound"), (43, "fgd"), (43, "best-fit"), (43, "bound")]
    assert out["records"][0]["alloc_at_130"] == 12.34
    alone = CliRunner().invoke(bench, [*args[:-4], "--seeds", "43", "--bound", "--no-offline", "-o", "json"])
    assert alone.exit_code == 0, alone.output  # seed 43 alone, without --resume or --jobs: the same figures
    figures = {(r["seed"], r["scheduler"]): r["alloc_at_130"] for r in json.loads(alone.stdout)["records"]}
    assert all(figures[(43, s)] == next(r["alloc_at_130"] for r in out["records"] if (r["seed"], r["scheduler"])
                                        == (43, s)) for s in ("fgd", "best-fit", "bound"))
    for seed in (42, 43):  # the bound alone (no offline placement) is still above what FGD and best-fit reach
        got = {r["scheduler"]: r["alloc_at_130"] for r in out["records"] if r["seed"] == seed}
        assert got["bound"] >= max(got["best-fit"], figures[(43, "fgd")] if seed == 43 else 0.0)
    assert all(r["converged"] for r in out["records"] if r["scheduler"] == "bound")
    (row,) = out["summary"]
    assert row["trace"] == "pods" and row["runs"] == {"fgd": 2, "best-fit": 2, "bound": 2}
    assert row["mean"]["fgd"] == round((12.34 + figures[(43, "fgd")]) / 2, 2)
