"""The HTML reports of ``plan --report`` and ``rebalance --report`` in a real headless Chromium:
the demo, a rebalance and a 5,000-node plan load with no console error and no request leaving
the file, show their charts, and the 5,000-node one stays small and opens fast. Screenshots are
kept under pytest's temporary directory (their paths are printed: ``pytest -s`` shows them)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from kubeplace.cli.main import main
from kubeplace_bench.rebalance_clusters import fragmented
from kubeplace_bench.synthetic import SyntheticSpec, as_list, manifests
from tests.report.browser import Page, chromium, open_page

DEMO = Path(__file__).resolve().parents[2] / "fixtures" / "demo"
MAX_BYTES = 3_000_000
MAX_LOAD_SECONDS = 2.0
FACTS = {
    "sections": "[...document.querySelectorAll('section')].map(s => s.id)",
    "charts": "document.querySelectorAll('figure.chart svg').length",
    "drawn": "[...document.querySelectorAll('figure.chart svg')].every(s => s.getBoundingClientRect().width > 300"
             " && s.getBoundingClientRect().height > 80)",
    "chart_names": "[...document.querySelectorAll('figure.chart')].map(f => f.dataset.chart)",
    "title": "document.title",
}

pytestmark = pytest.mark.timeout(600)


def _cli(*args: str) -> None:
    out = CliRunner().invoke(main, list(args))
    assert out.exit_code == 0, out.output


def _check(page: Page, html: Path, expected_sections: list[str]) -> None:
    assert page.errors == []
    assert {url.split(":")[0] for url in page.requests} <= {"file", "data"}, page.requests  # nothing fetched
    assert page.facts["sections"] == expected_sections
    assert page.facts["drawn"] is True
    print(f"\n{html.name}: {html.stat().st_size / 1e6:.2f} MB, load event after {page.load_seconds:.3f}s "
          f"({page.wall_seconds:.3f}s seen from the test), {page.facts['charts']} charts")


def test_demo_plan_report(tmp_path: Path) -> None:
    chromium()
    html = tmp_path / "plan.html"
    _cli("plan", str(DEMO), "--report", str(html))
    page = open_page(html, tmp_path / "plan.png", FACTS)
    print(f"screenshot: {tmp_path / 'plan.png'}")
    _check(page, html, ["utilisation", "gpus", "unplaced", "solver"])
    assert page.facts["title"] == f"kubeplace plan: {DEMO}"
    assert page.facts["chart_names"] == [
        "cpu utilisation before and after", "memory utilisation before and after", "pods utilisation before and after",
        "nvidia.com/gpu utilisation before and after", "GPU device map before and after",
        "pods not placed by reason", "incumbent and bound over time"]


def test_rebalance_report(tmp_path: Path) -> None:
    chromium()
    cluster, html = tmp_path / "cluster.yaml", tmp_path / "rebalance.html"
    cluster.write_text(yaml.safe_dump(as_list(fragmented(1, 200))))
    _cli("rebalance", str(cluster), "--time-limit", "3", "--report", str(html))
    page = open_page(html, tmp_path / "rebalance.png", FACTS)
    print(f"screenshot: {tmp_path / 'rebalance.png'}")
    _check(page, html, ["utilisation", "gpus", "moves", "solver"])
    assert "incumbent and bound over time" in page.facts["chart_names"]


@pytest.mark.slow
def test_5000_node_plan_report_is_small_and_opens_fast(tmp_path: Path) -> None:
    chromium()
    cluster, html = tmp_path / "cluster.yaml", tmp_path / "plan-5000.html"
    spec = SyntheticSpec(nodes=5000, pods=10000, seed=1, bound_fraction=0.3)
    cluster.write_text(yaml.dump(as_list(manifests(spec)), Dumper=getattr(yaml, "CSafeDumper", yaml.SafeDumper)))
    started = time.monotonic()
    _cli("plan", str(cluster), "--time-limit", "5", "-o", "json", "--report", str(html))
    print(f"\nplan of 5,000 nodes / 10,000 pods with --report: {time.monotonic() - started:.1f}s")
    page = open_page(html, tmp_path / "plan-5000.png", FACTS)
    print(f"screenshot: {tmp_path / 'plan-5000.png'}")
    _check(page, html, ["utilisation", "gpus", "unplaced", "solver"])
    assert html.stat().st_size < MAX_BYTES
    assert page.load_seconds < MAX_LOAD_SECONDS
