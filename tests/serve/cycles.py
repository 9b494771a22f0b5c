"""A serve scheduler on a cluster of ``nodes`` nodes of 4 CPU / 32 GiB (two pools, label ``pool``)
running ``bound`` pods, planning one 5-pod gang per cycle as the gangs bench does, the watch
showing each cycle's pods bound before the next: what a cycle costs at cluster scale.

Tests use it small; run as a script it times (or profiles) cycles at the bench's scale::

    python -m tests.serve.cycles --nodes 2000 --bound 2500 --cycles 40 [--profile]
"""

from __future__ import annotations

import argparse
import cProfile
import os
import pstats
import random
import time
from typing import Any

from kubeplace.models.config import Configuration, Profile, SolverSettings
from kubeplace.serve.cycle_report import CycleReport
from kubeplace.serve.informer import ADDED, MODIFIED, Store
from kubeplace.serve.intake import unit_of
from kubeplace.serve.loop import Scheduler
from kubeplace.serve.settings import ServeSettings
from tests.builders import node, pod
from tests.serve.fakes import FakeCluster

GANG = 5


def cluster(nodes: int, bound: int, seed: int = 0) -> tuple[Scheduler, FakeCluster]:
    rng = random.Random(seed)
    store = Store()
    store.replace("nodes", [node(f"n{i:05d}").cpu("4").memory("32Gi").label("pool", "a" if i < nodes // 2 else "b")
                            .manifest() for i in range(nodes)])
    running = [pod(f"r{i:05d}").cpu(rng.choice(["500m", "1", "2"])).memory(rng.choice(["1Gi", "2Gi", "4Gi"]))
               .on(f"n{rng.randrange(nodes):05d}").manifest() for i in range(bound)]
    store.replace("pods", running)
    fake = FakeCluster()
    return Scheduler(fake, store, Configuration(), Profile(), SolverSettings(time_limit=5, workers=1),
                     ServeSettings(batch_window=0, initial_backoff=1, max_backoff=10)), fake


def gang_cycle(s: Scheduler, fake: FakeCluster, serial: int) -> tuple[float, CycleReport]:
    """Creates gang ``g<serial>``, plans and binds it in one cycle (its seconds, its report), then
    shows its pods bound as the watch would, and collects between cycles as ``run`` does."""
    manifests = [pod(f"g{serial}-{k}").cpu("1").memory("2Gi").label("kubeplace.io/gang", f"g{serial}")
                 .annotation("kubeplace.io/gang-min-member", str(GANG)).manifest() for k in range(GANG)]
    for m in manifests:
        s.store.apply("pods", ADDED, m)
    units = list({unit_of(s.store.typed("pods", f"default/{m['metadata']['name']}")) for m in manifests})
    started = time.perf_counter()
    report = s.cycle(units)
    seconds = time.perf_counter() - started
    s.collector.between_cycles()
    for key, where, _ in fake.bindings[-len(report.bound):] if report.bound else []:
        seen: dict[str, Any] = dict(s.store.get("pods", key) or {})
        seen["spec"] = {**seen["spec"], "nodeName": where}
        s.store.apply("pods", MODIFIED, seen)
    return seconds, report


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nodes", type=int, default=2000)
    parser.add_argument("--bound", type=int, default=2500)
    parser.add_argument("--cycles", type=int, default=40)
    parser.add_argument("--profile", action="store_true", help="cProfile the cycles (cumulative, top 50)")
    args = parser.parse_args()
    s, fake = cluster(args.nodes, args.bound)
    s.warm_up()
    for serial in range(3):  # the memos and kept sums warm
        gang_cycle(s, fake, serial)
    profiler = cProfile.Profile() if args.profile else None
    if profiler is not None:
        profiler.enable()
    times = sorted(gang_cycle(s, fake, serial)[0] for serial in range(3, 3 + args.cycles))
    if profiler is not None:
        profiler.disable()
        pstats.Stats(profiler).sort_stats("cumulative").print_stats(50)
    print(f"{args.nodes} nodes, {args.bound} bound pods, {args.cycles} cycles of a {GANG}-pod gang "
          f"(load average {os.getloadavg()[0]:.1f}): mean {sum(times) / len(times) * 1000:.1f} ms, "
          f"median {times[len(times) // 2] * 1000:.1f} ms, max {times[-1] * 1000:.1f} ms")
    s.close()


if __name__ == "__main__":
    main()
