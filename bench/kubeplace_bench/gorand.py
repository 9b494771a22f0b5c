"""Go's ``math/rand`` (the seeded ``rngSource``), draw for draw.

FGD's simulator (hkust-adsl/kubernetes-scheduler-simulator) calls ``rand.Seed(seed)`` on Go's
global source and then the top-level ``rand.Int``, ``rand.Shuffle``, ``rand.Intn`` and
``rand.Perm``: before Go 1.24 (the simulator is a go 1.15 module), a seeded global source is the
classic additive lagged Fibonacci ``rngSource``, the same stream as ``rand.New(rand.NewSource(seed))``
in every Go version. :class:`GoRand` is that source and the ``*Rand`` methods the simulator uses,
with Go's exact rejection loops (``Int31n`` for ``Intn`` and ``Perm``, Lemire's ``int31n`` for
``Shuffle``), so the shuffles, tuning draws and node prefixes are the simulator's own.

The source is seeded from ``rngCooked``, 607 constants Go's ``gen_cooked.go`` derives by running
the generator 780e10 steps: too slow to recompute, and not ours to copy. They are read at run time
from the Go installation (``$GOROOT/src/math/rand/rng.go``; GOROOT from the environment or
``go env GOROOT``); without Go, :func:`rng_cooked` fails with one line saying so.
"""

from __future__ import annotations

import functools
import os
import re
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

from kubeplace.kube.errors import InputError

RNG_LEN = 607
RNG_TAP = 273
INT32_MAX = (1 << 31) - 1
MASK63 = (1 << 63) - 1
MASK64 = (1 << 64) - 1


def _goroot() -> Path:
    env = os.environ.get("GOROOT")
    if env:
        return Path(env)
    go = shutil.which("go")
    if go is None:
        raise InputError("Go is needed for the FGD protocol's draws (its math/rand seeding table) and `go` "
                         "is not on PATH", expected="Go installed (any version), or GOROOT set")
    try:
        out = subprocess.run([go, "env", "GOROOT"], capture_output=True, text=True, check=True, timeout=60)
    except (OSError, subprocess.SubprocessError) as e:
        raise InputError(f"`go env GOROOT` failed: {e}") from None
    return Path(out.stdout.strip())


@functools.cache
def rng_cooked() -> tuple[int, ...]:
    """Go's ``rngCooked`` seeding table, read from the Go installation's ``math/rand/rng.go``."""
    path = _goroot() / "src" / "math" / "rand" / "rng.go"
    try:
        text = path.read_text()
    except OSError as e:
        raise InputError(f"cannot read Go's math/rand source: {e.strerror}", file=str(path)) from None
    block = re.search(r"rngCooked\s*\[rngLen\]int64\s*=\s*\[\.\.\.\]int64\{(.*?)\}", text, re.S)
    values = tuple(int(v) for v in re.findall(r"-?\d+", block.group(1))) if block else ()
    if len(values) != RNG_LEN:
        raise InputError(f"no {RNG_LEN}-entry rngCooked table found", file=str(path))
    return values


def _seedrand(x: int) -> int:
    """x[n+1] = 48271 * x[n] mod (2**31 - 1), Go's Schrage form (int32 arithmetic)."""
    hi, lo = divmod(x, 44488)  # x > 0 here: Go's truncating / and % are Python's floor ones
    x = 48271 * lo - 3399 * hi
    return x + INT32_MAX if x < 0 else x


class GoRand:
    """``rand.New(rand.NewSource(seed))`` of Go's ``math/rand``."""

    def __init__(self, seed: int) -> None:
        cooked = rng_cooked()
        self.tap, self.feed = 0, RNG_LEN - RNG_TAP
        seed %= INT32_MAX  # Go's truncating % plus INT32_MAX when negative: Python's floor %
        if seed == 0:
            seed = 89482311
        x = seed
        vec = [0] * RNG_LEN
        for i in range(-20, RNG_LEN):
            x = _seedrand(x)
            if i >= 0:
                u = x << 40
                x = _seedrand(x)
                u ^= x << 20
                x = _seedrand(x)
                u ^= x
                vec[i] = (u ^ cooked[i]) & MASK64
        self.vec = vec

    def uint64(self) -> int:
        self.tap = (self.tap - 1) % RNG_LEN
        self.feed = (self.feed - 1) % RNG_LEN
        x = (self.vec[self.feed] + self.vec[self.tap]) & MASK64
        self.vec[self.feed] = x
        return x

    def int63(self) -> int:
        return self.uint64() & MASK63

    def go_int(self) -> int:
        """``rand.Int()`` on a 64-bit platform."""
        return self.int63()

    def float64(self) -> float:
        """``rand.Float64()``: Int63 / 2**63, drawn again on the (rare) 1.0."""
        while True:
            f = float(self.int63()) / (1 << 63)
            if f != 1.0:
                return f

    def int31(self) -> int:
        return self.int63() >> 32

    def uint32(self) -> int:
        return (self.int63() >> 31) & 0xFFFFFFFF

    def int31n(self, n: int) -> int:
        if n <= 0:
            raise ValueError("invalid argument to Int31n")
        if n & (n - 1) == 0:
            return self.int31() & (n - 1)
        top = INT32_MAX - (1 << 31) % n
        v = self.int31()
        while v > top:
            v = self.int31()
        return v % n

    def intn(self, n: int) -> int:
        if n > INT32_MAX:
            raise ValueError("Intn beyond 2**31 - 1 is not needed here")
        return self.int31n(n)

    def _int31n_lemire(self, n: int) -> int:
        """Go's unexported ``int31n`` (Shuffle's)."""
        prod = self.uint32() * n
        low = prod & 0xFFFFFFFF
        if low < n:
            thresh = ((1 << 32) - n) % n
            while low < thresh:
                prod = self.uint32() * n
                low = prod & 0xFFFFFFFF
        return prod >> 32

    def perm(self, n: int) -> list[int]:
        m = [0] * n
        for i in range(n):
            j = self.intn(i + 1)
            m[i] = m[j]
            m[j] = i
        return m

    def shuffle(self, n: int, swap: Callable[[int, int], None]) -> None:
        if n > INT32_MAX:
            raise ValueError("Shuffle beyond 2**31 elements is not needed here")
        for i in range(n - 1, 0, -1):
            swap(i, self._int31n_lemire(i + 1))

    def shuffled(self, items: list[object]) -> None:
        """``rand.Shuffle(len(items), swap)`` on a Python list, in place."""

        def swap(i: int, j: int) -> None:
            items[i], items[j] = items[j], items[i]

        self.shuffle(len(items), swap)
