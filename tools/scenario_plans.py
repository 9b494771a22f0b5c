"""Every fixtures/scenarios plan, with and without --preempt, one line each (the scenario, then the
plan's JSON without its seconds and source), to diff two checkouts' behaviour:

    python tools/scenario_plans.py > after.txt
    git archive OLD | tar -x -C /tmp/old
    PYTHONPATH=/tmp/old:/tmp/old/bench python tools/scenario_plans.py > before.txt
    diff before.txt after.txt            # nothing: the plans are byte-identical

``--workers 1`` (the default here) plans deterministically; ``--workers 2`` as the CLI does.
The code planning is the ``kubeplace`` on ``sys.path`` (the checkout ``PYTHONPATH`` names first);
the scenarios are this checkout's.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from click.testing import CliRunner

from kubeplace.cli.main import main

SCENARIOS = Path(__file__).resolve().parent.parent / "fixtures" / "scenarios"
TIMING = ("seconds", "source")


def _without_timing(doc: Any) -> Any:
    if isinstance(doc, dict):
        return {k: _without_timing(v) for k, v in doc.items() if k not in TIMING and not k.endswith("_seconds")}
    if isinstance(doc, list):
        return [_without_timing(v) for v in doc]
    return doc


def plans(workers: int) -> list[str]:
    out = []
    runner = CliRunner()
    for folder in sorted(p for p in SCENARIOS.iterdir() if (p / "cluster.yaml").exists()):
        for extra in ([], ["--preempt"]):
            args = ["plan", str(folder / "cluster.yaml"), "-o", "json", "--workers", str(workers), *extra]
            if workers == 1:
                args += ["--seed", "0"]
            result = runner.invoke(main, args)
            try:
                text = json.dumps(_without_timing(json.loads(result.output)), sort_keys=True)
            except json.JSONDecodeError:
                text = f"exit {result.exit_code}: {result.output.strip()}"
            out.append(f"{folder.name}{' --preempt' if extra else ''} {text}")
    return out


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workers", type=int, default=1)
    print("\n".join(plans(parser.parse_args().workers)))
