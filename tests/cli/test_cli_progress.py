"""The progress bar: drawn on a terminal (time spent of the budget, incumbent, bound), nothing
when stderr is not a terminal. Checked with rich consoles, and with the real command under a
pseudo-terminal and piped."""

from __future__ import annotations

import io
import os
import pty
import select
import subprocess
import sys
import time
from pathlib import Path

from rich.console import Console

from kubeplace.cli.render import event_text, progress, recorder
from kubeplace.solver.run import Event

REPO = Path(__file__).resolve().parents[2]
DEMO = REPO / "fixtures" / "demo"
PLAN_EVENT = Event("objective", 31, 1005, 2.0899, 1005, 0.9)


def test_event_text_of_a_plan_and_of_a_rebalance() -> None:
    assert event_text(PLAN_EVENT) == "objective: placed weight 1005 (bound 1005), 31 pods, objective 2.0899"
    assert event_text(Event("greedy", 40, 0, 3.5, None, 0.2, moves=7)) == "greedy: objective 3.5, 7 pod(s) moved"


def test_a_terminal_gets_a_bar_with_the_incumbent_and_bound() -> None:
    out = io.StringIO()
    console = Console(file=out, force_terminal=True, width=160, color_system=None)
    with progress(True, 2.0, console, label="5000 nodes") as show:
        assert show is not None
        show(PLAN_EVENT)
        time.sleep(0.3)
    text = out.getvalue()
    assert "5000 nodes: objective: placed weight 1005 (bound 1005)" in text and "of a 2s budget" in text
    assert "━" in text  # the bar


def test_nothing_when_not_a_terminal_or_disabled() -> None:
    out = io.StringIO()
    for enabled in (True, False):
        with progress(enabled, 2.0, Console(file=out, force_terminal=False)) as show:
            assert show is None
    assert out.getvalue() == ""
    record, events = recorder(None)
    record(PLAN_EVENT)
    assert events == [PLAN_EVENT]


def _command(*args: str) -> list[str]:
    return [sys.executable, "-m", "kubeplace.cli.main", "plan", str(DEMO), "--time-limit", "2", *args]


def test_the_command_under_a_terminal_draws_it_and_piped_prints_nothing_on_stderr() -> None:
    env = {**os.environ, "COLUMNS": "160", "TERM": "xterm"}
    piped = subprocess.run(_command(), capture_output=True, text=True, cwd=REPO, env=env, timeout=120)
    assert piped.returncode == 0 and piped.stderr == ""
    main, child = pty.openpty()
    process = subprocess.Popen(_command("-o", "json"), stdin=child, stdout=subprocess.DEVNULL, stderr=child,
                               cwd=REPO, env=env)
    os.close(child)
    seen = b""
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        ready, _, _ = select.select([main], [], [], 0.5)
        if ready:
            try:
                chunk = os.read(main, 65536)
            except OSError:  # the child closed the terminal
                break
            if not chunk:
                break
            seen += chunk
        elif process.poll() is not None:
            break
    os.close(main)
    assert process.wait(timeout=30) == 0
    text = seen.decode(errors="replace")
    assert "placed weight" in text and "bound" in text and "of a 2s budget" in text, text[-2000:]
