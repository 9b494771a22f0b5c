"""``--make-room-for NS/NAME``: the fewest moves after which a pending pod (or its whole gang) fits.

The target pods join the move-aware model with variables ``t[k, i]`` that must place every one
of them; the goal is the number of moves, within the same budgets as a rebalance. The exact
backend's OPTIMAL status proves the count minimal (over the candidate target nodes of each
moved class: every eligible node when ``max_targets`` >= the node count); INFEASIBLE means no
set of moves within the budget makes room.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import numpy as np

from kubeplace.kube.errors import InputError
from kubeplace.kube.gangs import gang_of
from kubeplace.kube.objects import GangKey, Pod
from kubeplace.models.config import Configuration, Profile
from kubeplace.rebalance.cluster_state import ClusterState
from kubeplace.rebalance.layout import Layout, build_layout
from kubeplace.rebalance.model import build_moves
from kubeplace.rebalance.movable import INTER_POD_RULES, Rules
from kubeplace.rebalance.solve_moves import REPLACEMENT_NOTE, Move, Settings, run, to_moves
from kubeplace.solver.budget import Budget


@dataclass(frozen=True)
class RoomPlan:
    target: str
    pods: tuple[str, ...]
    fits: bool
    moves: tuple[Move, ...]
    placements: tuple[tuple[str, str], ...]  # (pod key, node) for the target pods
    status: str
    proven: bool
    seconds: float
    message: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {"moves": [m.to_dict() for m in self.moves],
                "placements": [{"pod": k, "node": n} for k, n in self.placements],
                "summary": {"target": self.target, "fits": self.fits, "pods_moved": len(self.moves),
                            "proven_minimal": self.proven, "status": self.status,
                            "seconds": round(self.seconds, 3), "message": self.message},
                "notes": [REPLACEMENT_NOTE]}


def target_pods(state: ClusterState, key: str) -> list[Pod]:
    """The pending pod ``NS/NAME`` with the rest of its gang, or the pending members of the gang
    ``NS/NAME``; InputError when neither exists."""
    from kubeplace.kube.parse import parse_pod

    namespace, _, name = key.rpartition("/")
    namespace = namespace or "default"
    pending = [parse_pod(raw) for raw in state.raw_pods.values()
               if not (raw.get("spec") or {}).get("nodeName")
               and ((raw.get("metadata") or {}).get("namespace") or "default") == namespace]
    pending = [p for p in pending if not p.deleting and not p.finished]
    pod = next((p for p in pending if p.name == name), None)
    gang = gang_of(pod) if pod is not None else GangKey(namespace, name)
    members = [p for p in pending if gang is not None and gang_of(p) == gang]
    if pod is not None:
        return sorted(members or [pod], key=lambda p: p.name)
    if members:
        return sorted(members, key=lambda p: p.name)
    raise InputError(f"no pending pod or gang {namespace}/{name}", field="--make-room-for",
                     expected="NAMESPACE/NAME of a pending pod or of a gang")


def make_room(state: ClusterState, key: str, rules: Rules, config: Configuration, profile: Profile,
              settings: Settings) -> RoomPlan:
    started = time.monotonic()
    targets = target_pods(state, key)
    layout = build_layout(state, rules, config, profile, targets)
    left = {p.key: p for p in layout.agg.left}
    for t in targets:
        if t.key in left:
            raise InputError(f"pod {t.key} has rules kubeplace does not model ({', '.join(left[t.key].unmodelled)})",
                             field="--make-room-for")
        inter_pod = sorted(rule.value for rule in t.spec_rules & INTER_POD_RULES)
        if inter_pod:
            raise InputError(f"pod {t.key} has rules the move model does not model ({', '.join(inter_pod)})",
                             field="--make-room-for", expected="a pod without required inter-pod rules")
    keys = tuple(p.key for p in targets)
    p = layout.problem
    t_cls, t_node = np.nonzero(p.eligible[list(layout.target_agg_classes)]) if layout.target_agg_classes else ([], [])
    t_cls = np.asarray(layout.target_agg_classes, dtype=np.int64)[np.asarray(t_cls, dtype=np.int64)]
    t_node = np.asarray(t_node, dtype=np.int64)
    if len(t_node) == 0:
        return RoomPlan(key, keys, False, (), (), "infeasible", True, time.monotonic() - started,
                        "no node accepts the pod whatever moves (filters or capacity alone)")
    model = build_moves(layout, settings.budgets, settings.max_targets, (t_cls, t_node), spread=True)
    for k in layout.target_agg_classes:
        sel = np.nonzero(model.t_cls == k)[0]
        need = int(layout.target_count[k])
        model.lb.add_row(model.t[sel], np.ones(len(sel), np.int64), need, need)
    result = run(model, [(int(v), 1) for v in model.m], settings, Budget.of(settings.solver.time_limit))
    seconds = time.monotonic() - started
    if result.values is None:
        proven = result.status.value == "infeasible"
        message = ("none within the budget" if proven else
                   f"no answer within {settings.solver.time_limit:g}s ({result.status.value})")
        return RoomPlan(key, keys, False, (), (), result.status.value, proven, seconds, message)
    y = model.dense(result.values)
    moves = tuple(Move(m.namespace, m.name, m.uid, m.source, m.target, f"makes room for {key}", m.owner,
                       m.scheduler_name) for m in to_moves(layout, y))
    placements = _placements(layout, model.t_cls, model.t_node, result.values[model.t], targets)
    return RoomPlan(key, keys, True, moves, placements, result.status.value, result.status.value == "optimal",
                    seconds, f"{len(moves)} move(s) make room")


def _placements(layout: Layout, t_cls: Any, t_node: Any, counts: Any,
                targets: list[Pod]) -> tuple[tuple[str, str], ...]:
    p = layout.problem
    n_movable = len(layout.pods)
    out = []
    taken: dict[int, int] = {}
    for k, i, n in zip(t_cls.tolist(), t_node.tolist(), counts.tolist(), strict=True):
        members = [m - n_movable for m in p.members[k] if m >= n_movable]
        for _ in range(int(n)):
            idx = members[taken.get(k, 0)]
            taken[k] = taken.get(k, 0) + 1
            out.append((targets[idx].key, p.node_names[i]))
    return tuple(sorted(out))
