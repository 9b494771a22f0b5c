"""The rebalance benchmark: kubeplace's moves against the descheduler's LowNodeUtilization, and
make-room against the optimum and the greedy "evict from the emptiest node".

Balance: on each cluster the emulation runs first; kubeplace then gets at most as many moves as
the emulation made (``--max-moves`` = its evictions) and must reach a better objective. Both are
scored by the same exact objective (sum_r w_r sum_i (u_ir - mean_r)^2, cpu, memory and GPU).

Defragmentation: a pending GPU job (or gang) that fits nowhere; the moves kubeplace's make-room
needs (CP-SAT), the optimum proved by an independent exact backend (HiGHS) on small cases, and
the greedy baseline's moves.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from kubeplace.cli.render import progress
from kubeplace.models.config import SolverSettings
from kubeplace.models.config_load import load_configuration
from kubeplace.rebalance.baselines import LowNodeUtilization, evict_from_emptiest, low_node_utilization
from kubeplace.rebalance.cluster_state import ClusterState, state_of
from kubeplace.rebalance.layout import build_layout
from kubeplace.rebalance.makeroom import make_room, target_pods
from kubeplace.rebalance.model import Budgets
from kubeplace.rebalance.movable import Rules
from kubeplace.rebalance.solve_moves import Settings, rebalance
from kubeplace_bench.rebalance_clusters import defrag, fragmented, openb

POLICIES = {
    "static 20/50": LowNodeUtilization((20.0, 20.0, None), (50.0, 50.0, None)),
    "deviation 10/10": LowNodeUtilization((10.0, 10.0, None), (10.0, 10.0, None), deviation=True),
}


def _state(objects: list[dict[str, Any]]) -> ClusterState:
    return state_of([(o, "bench") for o in objects])


def balance_rows(name: str, objects: list[dict[str, Any]], time_limit: float, seed: int,
                 say: Callable[[str], None]) -> list[dict[str, Any]]:
    config = load_configuration(None)
    profile = config.profile(None)
    layout = build_layout(_state(objects), Rules(), config, profile)
    before = layout.value(layout.x0)
    rows = []
    for policy_name, policy in POLICIES.items():
        started = time.monotonic()
        y, evictions = low_node_utilization(layout, policy)
        lnu_seconds = time.monotonic() - started
        lnu_after = layout.value(y)
        say(f"{name}: LowNodeUtilization {policy_name}: {evictions} evictions, {before:.4f} -> {lnu_after:.4f}")
        with progress(True, time_limit, label=f"{name}: kubeplace, max {evictions} moves") as on_event:
            plan = rebalance(layout, Settings(budgets=Budgets(max_moves=evictions),
                                              solver=SolverSettings(time_limit=time_limit, workers=2, seed=seed)),
                             on_event)
        say(f"{name}: kubeplace (max {evictions} moves): {len(plan.moves)} moves, "
            f"{before:.4f} -> {plan.objective_after:.4f} ({plan.status})")
        moved = len(plan.moves)
        rows.append({
            "cluster": name, "nodes": layout.problem.n_nodes, "movable_pods": len(layout.pods),
            "baseline": f"LowNodeUtilization {policy_name}", "objective_before": round(before, 4),
            "baseline_after": round(lnu_after, 4), "baseline_moves": evictions,
            "baseline_gain_per_move": round((before - lnu_after) / evictions, 5) if evictions else None,
            "kubeplace_after": round(plan.objective_after, 4), "kubeplace_moves": moved,
            "kubeplace_gain_per_move": round((before - plan.objective_after) / moved, 5) if moved else None,
            "kubeplace_better": (plan.objective_after < lnu_after - 1e-9 and moved <= evictions) or evictions == 0,
            "kubeplace_seconds": round(plan.seconds, 2), "baseline_seconds": round(lnu_seconds, 3),
        })
    return rows


def defrag_rows(seeds: range, time_limit: float, say: Callable[[str], None]) -> list[dict[str, Any]]:
    config = load_configuration(None)
    profile = config.profile(None)
    rows = []
    cases = [("small 1x8 GPUs", 6, 1, True), ("small gang 2x8 GPUs", 8, 2, True),
             ("medium 1x8 GPUs", 60, 1, False), ("medium gang 4x8 GPUs", 60, 4, False)]
    for label, n_nodes, members, prove in cases:
        for seed in seeds:
            objects, key = defrag(seed, n_nodes=n_nodes, gpus_per_node=8, job_gpus=8, members=members,
                                  sizes=(1, 2, 4))
            state = _state(objects)
            settings = Settings(solver=SolverSettings(time_limit=time_limit, workers=2, seed=seed),
                                max_targets=max(24, n_nodes))
            room = make_room(state, key, Rules(), config, profile, settings)
            optimum: int | None = None
            if prove:
                exact = make_room(state, key, Rules(), config, profile,
                                  Settings(solver=SolverSettings("highs", time_limit), max_targets=n_nodes))
                optimum = len(exact.moves) if exact.fits and exact.proven else None
            layout = build_layout(state, Rules(), config, profile, target_pods(state, key))
            greedy = evict_from_emptiest(layout)
            rows.append({"case": label, "seed": seed, "nodes": n_nodes,
                         "kubeplace_moves": len(room.moves) if room.fits else None,
                         "kubeplace_proven": room.proven, "optimum": optimum, "greedy_moves": greedy,
                         "kubeplace_seconds": round(room.seconds, 2)})
            say(f"defrag {label} seed {seed}: kubeplace {rows[-1]['kubeplace_moves']}, optimum {optimum}, "
                f"greedy {greedy}")
    return rows


def run(seed: int, nodes: int, openb_dir: Path | None, openb_nodes: int, time_limit: float,
        defrag_seeds: int, say: Callable[[str], None]) -> dict[str, Any]:
    balance: list[dict[str, Any]] = []
    notes: list[str] = []
    balance += balance_rows(f"fragmented-{nodes}", fragmented(seed, nodes), time_limit, seed, say)
    if openb_dir is not None:
        objects, note = openb(seed, openb_dir, openb_nodes)
        notes.append(note)
        balance += balance_rows(f"openb-{openb_nodes}", objects, time_limit, seed, say)
    return {"seed": seed, "time_limit": time_limit, "balance": balance,
            "defrag": defrag_rows(range(seed, seed + defrag_seeds), time_limit, say), "notes": notes}


def table(doc: dict[str, Any]) -> str:
    lines = [f"{'cluster':<16} {'baseline':<34} {'before':>9} {'base after':>10} {'moves':>6} "
             f"{'kp after':>9} {'moves':>6} {'gain/move base':>14} {'gain/move kp':>12}"]
    for r in doc["balance"]:
        lines.append(f"{r['cluster']:<16} {r['baseline']:<34} {r['objective_before']:>9.4f} "
                     f"{r['baseline_after']:>10.4f} {r['baseline_moves']:>6} {r['kubeplace_after']:>9.4f} "
                     f"{r['kubeplace_moves']:>6} {r['baseline_gain_per_move'] or 0:>14.5f} "
                     f"{r['kubeplace_gain_per_move'] or 0:>12.5f}")
    lines += ["", f"{'defrag case':<22} {'seed':>4} {'nodes':>5} {'kubeplace':>9} {'proven':>6} {'optimum':>7} "
                  f"{'greedy':>6}"]
    for r in doc["defrag"]:
        lines.append(f"{r['case']:<22} {r['seed']:>4} {r['nodes']:>5} {_n(r['kubeplace_moves']):>9} "
                     f"{'yes' if r['kubeplace_proven'] else 'no':>6} {_n(r['optimum']):>7} {_n(r['greedy_moves']):>6}")
    return "\n".join(lines + [f"note: {n}" for n in doc["notes"]])


def _n(value: int | None) -> str:
    return "-" if value is None else str(value)
