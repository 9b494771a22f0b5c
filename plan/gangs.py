"""Per gang: its members, whether the plan places it, and why not."""

from __future__ import annotations

from datetime import UTC, datetime

import numpy as np

from kubeplace.kube.gangs import DEFAULT_TIMEOUT_SECONDS
from kubeplace.kube.objects import Snapshot
from kubeplace.models.aggregate import Aggregation
from kubeplace.models.problem import IntArray
from kubeplace.plan.plan import GangStatus


def gang_statuses(snapshot: Snapshot, agg: Aggregation, placed_per_class: IntArray,
                  now: datetime | None = None) -> list[GangStatus]:
    p = agg.problem
    groups = {g.key: g for g in snapshot.pod_groups}
    out = []
    for gang in p.gangs:
        classes = np.asarray(gang.classes, dtype=np.int64)
        members = tuple(snapshot.pending[m].name for c in gang.classes for m in p.members[c])
        group = groups.get(gang.name)
        min_member = group.min_member if group else gang.min_member
        running = min_member - gang.min_member if group else 0
        placed = int(placed_per_class[classes].sum())
        ok = placed > 0 and placed >= gang.min_member
        namespace, name = gang.name.split("/", 1)
        reason = "" if ok else _why(len(members), running, min_member, placed, group.created if group else "",
                                    group.timeout_seconds if group else DEFAULT_TIMEOUT_SECONDS, now,
                                    gang.topology_key)
        out.append(GangStatus(namespace, name, min_member, members, running, placed if ok else 0, ok, reason))
    return out


def _why(pending: int, running: int, min_member: int, fit: int, created: str, timeout: int,
         now: datetime | None, topology_key: str = "") -> str:
    if pending + running < min_member:
        waited = _age(created, now)
        state = "timed out" if waited is not None and waited > timeout else "waiting"
        return (f"gang {state}: {pending + running} of minMember {min_member} pods exist"
                + (f" (for {waited:.0f}s, timeout {timeout}s)" if waited is not None else ""))
    where = f" within one {topology_key} domain" if topology_key else ""
    return (f"gang not placed: needs {min_member - running} more pods placed together "
            f"({running} running); no placement of them all fits{where} now")


def _age(created: str, now: datetime | None) -> float | None:
    if not created:
        return None
    try:
        start = datetime.fromisoformat(created.replace("Z", "+00:00"))
    except ValueError:
        return None
    return ((now or datetime.now(UTC)) - start).total_seconds()
