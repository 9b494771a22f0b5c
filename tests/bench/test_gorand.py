"""gorand reproduces Go's math/rand draw for draw: checked against Go itself where Go is installed."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from kubeplace_bench.gorand import GoRand

GO_PROGRAM = """package main

import (
	"fmt"
	"math/rand"
)

func main() {
	for _, seed := range []int64{0, 1, 42, 51, -7, 1 << 40} {
		r := rand.New(rand.NewSource(seed))
		fmt.Println(r.Int())
		for _, n := range []int{1, 2, 3, 7, 64, 1000, 1213, 1 << 30, 2147483647} {
			fmt.Println(r.Intn(n))
		}
		items := make([]int, 50)
		for i := range items {
			items[i] = i
		}
		r.Shuffle(len(items), func(i, j int) { items[i], items[j] = items[j], items[i] })
		fmt.Println(items)
		fmt.Println(r.Perm(20))
		fmt.Println(r.Float64())
	}
}
"""


def python_draws() -> list[str]:
    out = []
    for seed in (0, 1, 42, 51, -7, 1 << 40):
        r = GoRand(seed)
        out.append(str(r.go_int()))
        out += [str(r.intn(n)) for n in (1, 2, 3, 7, 64, 1000, 1213, 1 << 30, 2147483647)]
        items: list[object] = list(range(50))
        r.shuffled(items)
        out.append("[" + " ".join(map(str, items)) + "]")
        out.append("[" + " ".join(map(str, r.perm(20))) + "]")
        out.append(repr(r.float64()))
    return out


@pytest.mark.skipif(shutil.which("go") is None, reason="Go is not installed")
def test_the_draws_are_go_s_own(tmp_path: Path) -> None:
    (tmp_path / "main.go").write_text(GO_PROGRAM)
    (tmp_path / "go.mod").write_text("module gorandcheck\n\ngo 1.20\n")
    done = subprocess.run(["go", "run", "."], cwd=tmp_path, capture_output=True, text=True, timeout=300,
                          env={**os.environ, "GOFLAGS": "-mod=mod", "GOTOOLCHAIN": "local"})
    assert done.returncode == 0, done.stderr
    assert done.stdout.split("\n")[:-1] == python_draws()


@pytest.mark.skipif(shutil.which("go") is None, reason="Go is not installed")
def test_seed_one_starts_as_go_documents() -> None:
    # Go's own regression value: rand.New(rand.NewSource(1)).Int63() == 5577006791947779410
    assert GoRand(1).int63() == 5577006791947779410


def test_without_go_one_line_names_what_is_missing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from kubeplace.kube.errors import InputError
    from kubeplace_bench import gorand

    gorand.rng_cooked.cache_clear()
    monkeypatch.setenv("GOROOT", str(tmp_path))
    with pytest.raises(InputError, match="cannot read Go's math/rand source"):
        GoRand(42)
    (tmp_path / "src" / "math" / "rand").mkdir(parents=True)
    (tmp_path / "src" / "math" / "rand" / "rng.go").write_text("package rand\n")
    with pytest.raises(InputError, match="no 607-entry rngCooked table"):
        GoRand(42)
    monkeypatch.delenv("GOROOT")
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(InputError, match="`go` is not on PATH"):
        GoRand(42)
    gorand.rng_cooked.cache_clear()
