"""``kubeplace bench simulate-fidelity --scan-seeds``: which generated traces a live run can be
compared with, found in the simulation alone (no control plane).

Under contention a trace can be chaotic: where a departure or a backoff's end falls within a
few tens of milliseconds of a batch closing, which comes first decides that batch, and the rest
of the run follows from it. Live, those milliseconds (a binding's latency, a cycle's duration,
the watch's delay) change from run to run, so on such a trace no live run is expected to stay
within a point of the simulation, nor of another live run. For each seed this prints the
trace's size, its contention (pods that waited, the longest wait) and the simulation's own
spread (:func:`kubeplace_bench.fidelity.own_spread`) per scheduler; a trace with contention and
a small spread is one where the fidelity floor says something.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from kubeplace.simulate.cluster import Cluster
from kubeplace_bench.cluster import Say
from kubeplace_bench.fidelity import (
    TraceSpec,
    capacity_of,
    end_of,
    fidelity_trace,
    gangs_of,
    nodes,
    own_spread,
    simulated,
    spread_cell,
    usages,
)

WAITED_SECONDS = 1.0
"""A pod bound this much after its arrival or later waited (it did not fit at once)."""


def scan(spec: TraceSpec, seeds: Sequence[int], schedulers: Sequence[str], say: Say) -> dict[str, Any]:
    """``{"seeds": [{"seed", "pods", "gangs", "schedulers": {name: {...}}}]}`` for ``spec`` with
    each seed."""
    cluster = Cluster(tuple(nodes(spec.nodes)), (), "kwok nodes")
    rows = []
    for seed in seeds:
        seeded = replace(spec, seed=seed)
        trace = fidelity_trace(seeded)
        end = end_of(trace, seeded)
        use, capacity = usages(trace), capacity_of(cluster)
        arrived = {a.key: a.at for a in trace.arrivals}
        row: dict[str, Any] = {"seed": seed, "pods": len(trace.arrivals), "gangs": len(gangs_of(trace)),
                               "schedulers": {}}
        for scheduler in schedulers:
            replay = simulated(cluster, trace, scheduler, end)
            waits = [at - arrived[key] for key, at in replay.started.items()]
            row["schedulers"][scheduler] = {
                "pods_bound": len(replay.started),
                "waited": sum(1 for w in waits if w >= WAITED_SECONDS),
                "longest_wait_seconds": round(max(waits, default=0.0), 2),
                "simulation_spread": own_spread(cluster, trace, scheduler, end, replay, use, capacity,
                                                seeded.margin),
            }
        say(f"  seed {seed}: {row['pods']} pods, " + ", ".join(
            f"{name} spread {spread_cell(f['simulation_spread'])}" for name, f in row["schedulers"].items()))
        rows.append(row)
    return {"trace": {"jobs": spec.jobs, "compress": spec.compress, "tick": spec.tick, "nodes": spec.nodes},
            "waited_seconds": WAITED_SECONDS, "seeds": rows}


def table(doc: dict[str, Any]) -> str:
    names = list(doc["seeds"][0]["schedulers"]) if doc["seeds"] else []
    head = ["seed", "pods", "gangs", *(f"{n} {c}" for n in names for c in ("waited", "longest s", "spread"))]
    rows = [[str(r["seed"]), str(r["pods"]), str(r["gangs"]),
             *(cell for n in names for cell in (str(r["schedulers"][n]["waited"]),
                                                f"{r['schedulers'][n]['longest_wait_seconds']:.1f}",
                                                spread_cell(r["schedulers"][n]["simulation_spread"])))]
            for r in doc["seeds"]]
    widths = [max(len(r[i]) for r in [head, *rows]) for i in range(len(head))]
    lines = ["  ".join(c.rjust(w) for c, w in zip(r, widths, strict=True)) for r in [head, *rows]]
    t = doc["trace"]
    return "\n".join([*lines, "", f"trace: {t['jobs']} jobs, compressed {t['compress']:g}x, arrivals on "
                      f"{t['tick']:g}s ticks, {t['nodes']} nodes; waited: pods bound "
                      f"{doc['waited_seconds']:g}s or more after their arrival; spread: the simulation against itself "
                      "with other latencies, the largest "
                      "difference in points, mean/end, and * when another set of pods was bound"])

