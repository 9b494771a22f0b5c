"""The report's content: loads before and after, pools, GPU fragments, reasons, and an HTML file
that needs nothing from anywhere else (the browser tests open it for real)."""

from __future__ import annotations

import json
import re
import warnings
from pathlib import Path

import pytest
from click.testing import CliRunner

from kubeplace.cli.main import main
from kubeplace.kube.files import load_snapshot
from kubeplace.kube.gpu_conventions import DEFAULT_CONVENTIONS, KOORD_CORE
from kubeplace.models.config import Configuration
from kubeplace.plan.pipeline import make_plan
from kubeplace.plan.plan import Unplaced
from kubeplace.rebalance.solve_moves import Move
from kubeplace.report.build import Placed, plan_report, pods_after, reason_counts, reason_phrases, rebalance_report
from kubeplace.report.charts import PER_NODE_LIMIT, progress_chart, reasons_chart, utilisation_chart
from kubeplace.report.html import device_table, render
from kubeplace.report.load import MAX_POOLS, cluster_load, pool_of, pools_of
from kubeplace.solver.run import Event
from tests.builders import node, pod, snapshot_of

DEMO = Path(__file__).resolve().parents[2] / "fixtures" / "demo"
CONV = DEFAULT_CONVENTIONS


def test_the_kube_scheduler_message_counts_once_per_reason_and_pod() -> None:
    message = ("0/12 nodes are available: 1 Insufficient cpu, 1 node(s) were unschedulable, "
               "3 node(s) had untolerated taint, 8 Insufficient memory.")
    assert reason_phrases([message]) == {"Insufficient cpu", "node(s) were unschedulable",
                                         "node(s) had untolerated taint", "Insufficient memory"}
    gang = "gang waiting: 3 of minMember 4 pods exist"
    unplaced = [Unplaced("a", "p", (message,)), Unplaced("a", "q", (message.replace("8 Insuff", "7 Insuff"),)),
                Unplaced("b", "g1", (gang,)), Unplaced("b", "g2", ("gang waiting: 2 of minMember 4 pods exist",))]
    counts = dict(reason_counts(unplaced))
    assert counts["Insufficient memory"] == 2 and counts["gang waiting: N of minMember N pods exist"] == 2


def test_pools_from_labels_else_the_shape() -> None:
    karpenter = node("a").cpu("4").label("karpenter.sh/nodepool", "general").label(
        "node.kubernetes.io/instance-type", "m6i.xlarge").build()
    typed = node("b").cpu("4").label("node.kubernetes.io/instance-type", "m6i.xlarge").build()
    bare = node("c").cpu("8").memory("32Gi").gpu(4).build()
    assert [pool_of(n) for n in (karpenter, typed, bare)] == ["general", "m6i.xlarge", "8 CPU, 32 GiB, 4 GPU"]
    many = [node(f"n{i}").cpu("1").label("karpenter.sh/nodepool", f"p{i % 20}").build() for i in range(40)]
    pools = pools_of(many)
    assert len(set(pools)) == MAX_POOLS and pools.count("other (9 pools)") == 18


def test_loads_before_and_after_moves_and_placements() -> None:
    snap = snapshot_of(node("n1").cpu("4").memory("8Gi"), node("n2").cpu("4").memory("8Gi"),
                       pod("run").cpu("2").owner("ReplicaSet", "rs").on("n1"), pod("new").cpu("1"))
    move = Move("default", "run", "", "n1", "n2", "balance")
    after = pods_after(snap, [move], [Placed(snap.pending[0], "n1")], CONV)
    load = cluster_load(snap.nodes, snap.bound, after, CONV)
    cpu = load.resources.index("cpu")
    assert load.utilisation(cpu, after=False).tolist() == [0.5, 0.0]
    assert load.utilisation(cpu, after=True).tolist() == [0.25, 0.5]
    assert "nvidia.com/gpu" not in load.resources


def test_gpu_fragments_are_counted_and_drawn() -> None:
    """A device half used before, and a half-GPU pod put on the other device: two fragments."""
    snap = snapshot_of(node("g").cpu("8").gpu(2),
                       pod("running").request(KOORD_CORE, 50).on("g")
                       .annotation("scheduling.koordinator.sh/device-allocated",
                                   '{"gpu":[{"minor":0,"resources":{"koordinator.sh/gpu-core":"50"}}]}'),
                       pod("half").request(KOORD_CORE, 50))
    load = cluster_load(snap.nodes, snap.bound, pods_after(snap, (), [Placed(snap.pending[0], "g", (1,))], CONV),
                        CONV)
    assert load.devices_before.tolist() == [[0.5, 0.0]] and load.devices_after.tolist() == [[0.5, 0.5]]
    cells = re.findall(r"<td[^>]*>([^<]*)</td>", device_table(load))
    assert cells == ["8 CPU, 0 GiB, 2 GPU", "2", "1 → 0", "1 → 2", "0 → 0"]  # free, partly used, full


def test_per_node_bars_up_to_the_limit_then_distributions_per_pool() -> None:
    small = [node(f"node-{i:03d}").cpu("4").build() for i in range(PER_NODE_LIMIT)]
    large = [node(f"node-{i:03d}").cpu("4").build() for i in range(PER_NODE_LIMIT + 1)]
    for nodes, per_node in ((small, True), (large, False)):
        load = cluster_load(nodes, [], [], CONV)
        chart = utilisation_chart(load, load.resources.index("cpu"))
        assert ("node-001" in chart) is per_node
        assert ("node-001" in chart or f"{len(nodes)} nodes" in chart)


def test_a_placed_weight_past_a_float_draws_pods_placed() -> None:
    # 200 priorities of 1000 pods weigh about 1001^200 exactly: no float holds it
    huge = 1001 ** 200
    events = [Event("greedy", 3, huge, 0.0, 2 * huge, 0.1), Event("place", 4, huge + 1, 0.0, 2 * huge, 0.2)]
    chart = progress_chart(events)
    assert chart is not None and "pods placed" in chart


def test_the_html_is_self_contained() -> None:
    snap = load_snapshot([DEMO], scheduler_name="kubeplace")
    config = Configuration()
    profile = config.profile(None)
    planned = make_plan(snap, config, profile, config.solver)
    text = render(plan_report(snap, planned.plan, ["summary"], [], config.gpu))  # no events: said so
    assert "<script" not in text and "@import" not in text
    assert not re.search(r"""(src|href)\s*=\s*["'](https?:|//)""", text)
    assert not re.search(r"url\(\s*['\"]?(https?:|//)", text)
    assert text.count("<svg") == 6 and "The solver reported no progress" in text
    assert 'id="unplaced"' in text and 'id="moves"' not in text
    moved = render(rebalance_report(snap, [], [], ["summary"], [], ["a note"], config.gpu))
    assert 'id="moves"' in moved and "No pod moves." in moved and 'id="unplaced"' not in moved


def test_an_unwritable_report_path_is_one_line_and_exit_2(tmp_path: Path) -> None:
    out = CliRunner().invoke(main, ["plan", str(DEMO), "--report", str(tmp_path / "missing" / "r.html")])
    assert out.exit_code == 2
    assert out.output.strip().splitlines()[-1].startswith(f"error: cannot write the report {tmp_path}/missing")
    assert list(tmp_path.iterdir()) == []


def test_a_report_path_that_is_an_input_is_refused_before_anything_is_written(tmp_path: Path) -> None:
    cluster = tmp_path / "cluster.yaml"
    cluster.write_text((DEMO / "cluster.yaml").read_text())
    config = tmp_path / "config.yaml"
    config.write_text("apiVersion: kubeplace.io/v1alpha1\nkind: PlacementConfiguration\n")
    (tmp_path / "link.html").symlink_to(cluster)
    (tmp_path / "hard.html").hardlink_to(cluster)
    before = {p.name: p.read_bytes() for p in tmp_path.iterdir()}
    cases = [(["plan", str(cluster)], cluster, f"the input {cluster}"),
             (["plan", str(cluster)], tmp_path / "sub" / ".." / "cluster.yaml", "the input"),
             (["plan", str(cluster)], tmp_path / "link.html", "the input"),
             (["plan", str(cluster)], tmp_path / "hard.html", "the input"),
             (["plan", str(tmp_path)], tmp_path / "new.json", f"a snapshot file of SOURCE {tmp_path}"),
             (["plan", str(cluster), "--config", str(config)], config, f"the input {config}"),
             (["rebalance", str(cluster)], cluster, f"the input {cluster}")]
    for args, report, why in cases:
        out = CliRunner().invoke(main, [*args, "--report", str(report)])
        assert out.exit_code == 2, (args, report, out.output)
        assert out.stderr.count("\n") == 1 and out.stderr.startswith("error: --report: ")
        assert why in out.stderr and "writing the report would overwrite it" in out.stderr
        assert out.stdout == ""  # refused before planning: no plan printed either
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir()} == before
    fine = CliRunner().invoke(main, ["plan", str(cluster), "--report", str(tmp_path / "report.html")])
    assert fine.exit_code == 0 and (tmp_path / "report.html").read_text().startswith("<!doctype html>")


def test_report_text_is_plain_text_and_nothing_reaches_stderr(tmp_path: Path,
                                                              capfd: pytest.CaptureFixture[str]) -> None:
    """A gang named "$^$" (mathtext that does not parse) and one named with control bytes and a
    character the font lacks: the report is written, the names drawn as they are (escaped), and
    stderr has the report's line only (no matplotlib warning, no traceback)."""
    snap = tmp_path / "cluster.yaml"
    pending = [{"apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": f"p{k}", "namespace": "default",
                             "annotations": {"scheduling.k8s.io/group-name": group}},
                "spec": {"schedulerName": "kubeplace",
                         "containers": [{"name": "c", "image": "i", "resources": {"requests": {"cpu": "2"}}}]}}
               for k, group in enumerate(["$^$", "g\x01\x1b[2J\u202e\U0001f600", "$\\frac{1}{0}$"])]
    node_doc = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"},
                "status": {"allocatable": {"cpu": "1", "memory": "1Gi", "pods": "10"}}}
    snap.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": [node_doc, *pending]}))
    report = tmp_path / "r.html"
    out = CliRunner().invoke(main, ["plan", str(snap), "--report", str(report), "-o", "json"])
    assert out.exit_code == 0, out.output
    assert out.stderr.splitlines() == [f"report: {report}"]
    text = report.read_text()
    assert "default/$^$" in text and "default/g\\x01\\x1b[2J\\u202e" in text  # a table cell
    assert "default/g\\x01\\x1b[NJ\\u202e" in text  # the reasons chart (its numbers as N)
    assert not re.search("[\x00-\x08\x0b-\x1f\x7f\u202a-\u202e]", text)
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        chart = reasons_chart([("$^$ \x07 \U0001f600", 1), ("$x$", 2)])
    assert chart is not None and "$^$ \\x07" in chart and "$x$" in chart
    assert seen == [] and capfd.readouterr().err == ""
