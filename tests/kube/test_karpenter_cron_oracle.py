"""Budget schedules against Karpenter's own cron: random schedules, durations and times, each
judged by ``Budget.IsActive``'s code (robfig/cron v3's ``ParseStandard`` with ``TZ=UTC``, ``Next``
of ``now - duration`` not after ``now``) built from Go's module cache, and by
:func:`kube.karpenter_disruption.budget_active`: the same answer, and the same schedules refused.
Skipped where Go or the module is not there (the Karpenter build brings it)."""

from __future__ import annotations

import datetime
import os
import random
import shutil
import subprocess
from pathlib import Path

import pytest

from kubeplace.kube.errors import InputError
from kubeplace.kube.karpenter_disruption import budget_active, cron_schedule
from kubeplace.kube.objects import NodePoolBudget

ROBFIG = "github.com/robfig/cron/v3"
VERSION = "v3.0.1"
ORACLE = '''package main

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/robfig/cron/v3"
)

func main() {
	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		parts := strings.Split(in.Text(), "|")
		duration, _ := time.ParseDuration(parts[1])
		seconds, _ := strconv.ParseInt(parts[2], 10, 64)
		now := time.Unix(seconds, 0).UTC()
		schedule, err := cron.ParseStandard(fmt.Sprintf("TZ=UTC %s", parts[0]))
		if err != nil {
			fmt.Println("refused")
			continue
		}
		fmt.Println(!schedule.Next(now.Add(-duration)).After(now))
	}
}
'''
MONTHS, DAYS = ("jan", "FEB", "Mar", "dec"), ("sun", "MON", "Tue", "sat", "fri")


@pytest.fixture(scope="module")
def oracle(tmp_path_factory: pytest.TempPathFactory) -> Path:
    go = shutil.which("go")
    if go is None:
        pytest.skip("Go is not on PATH")
    cache = subprocess.run([go, "env", "GOMODCACHE"], capture_output=True, text=True, check=True).stdout.strip()
    if not (Path(cache) / f"{ROBFIG}@{VERSION}").is_dir():
        pytest.skip(f"{ROBFIG}@{VERSION} is not in Go's module cache (the Karpenter build brings it)")
    folder = tmp_path_factory.mktemp("cron-oracle")
    (folder / "main.go").write_text(ORACLE)
    (folder / "go.mod").write_text(f"module oracle\n\ngo 1.22\n\nrequire {ROBFIG} {VERSION}\n")
    env = {**os.environ, "GOFLAGS": "-mod=mod", "GOPROXY": "off", "GOSUMDB": "off"}
    subprocess.run([go, "build", "-o", "oracle", "."], cwd=folder, env=env, check=True, capture_output=True,
                   timeout=300)
    return folder / "oracle"


def _item(rnd: random.Random, low: int, high: int, names: tuple[str, ...]) -> str:
    def value() -> str:
        if names and rnd.random() < 0.3:
            return rnd.choice(names)
        return str(rnd.randint(low, high + (1 if rnd.random() < 0.03 else 0)))

    return rnd.choice([lambda: "*", lambda: "?", lambda: f"*/{rnd.randint(1, 9)}", value, value,
                       lambda: f"{value()}-{value()}", lambda: f"{value()}-{value()}/{rnd.randint(1, 5)}",
                       lambda: f"{value()}/{rnd.randint(1, 9)}"])()


def _schedule(rnd: random.Random) -> str:
    if rnd.random() < 0.08:
        return rnd.choice(["@daily", "@hourly", "@weekly", "@monthly", "@yearly", "@annually", "@midnight"])
    bounds = ((0, 59, ()), (0, 23, ()), (1, 31, ()), (1, 12, MONTHS), (0, 6, DAYS))
    return " ".join(",".join(_item(rnd, low, high, names) for _ in range(rnd.choice((1, 1, 2, 3))))
                    for low, high, names in bounds)


def test_budget_schedules_are_judged_as_karpenters_cron_judges_them(oracle: Path) -> None:
    rnd = random.Random(0)
    cases = []
    for _ in range(3000):
        hours, minutes = rnd.choice((0, 1, 5, 30, 200)), rnd.choice((0, 1, 30, 59))
        duration = (f"{hours}h" if hours else "") + (f"{minutes}m" if minutes or not hours else "")
        start = datetime.datetime(2020, 1, 1, tzinfo=datetime.UTC)
        now = start + datetime.timedelta(minutes=rnd.randrange(10 * 365 * 24 * 60), seconds=rnd.choice((0, 0, 1, 59)))
        cases.append((_schedule(rnd), duration, now))
    lines = "".join(f"{s}|{d}|{int(n.timestamp())}\n" for s, d, n in cases)
    answers = subprocess.run([str(oracle)], input=lines, capture_output=True, text=True, check=True,
                             timeout=120).stdout.split()
    judged = 0
    for (schedule, duration, now), karpenter in zip(cases, answers, strict=True):
        try:
            cron_schedule(schedule)
        except InputError as error:
            if "never matches" in error.problem:  # refused here; Karpenter counts it always active
                assert karpenter == "true", schedule
            else:
                assert karpenter == "refused", (schedule, error.problem)
            continue
        ours = budget_active(NodePoolBudget("1", (), schedule, duration), now)
        assert str(ours).lower() == karpenter, (schedule, duration, now)
        judged += 1
    assert judged > 1000
