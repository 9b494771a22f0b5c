"""Per gang: its members, whether the plan places it, and why not."""

from __future__ import annotations

from datetime import UTC, datetime

import numpy as np

from kubeplace.kube.gangs import gang_timeout
from kubeplace.kube.objects import Snapshot
from kubeplace.models.aggregate import Aggregation
from kubeplace.models.problem import Gang, IntArray
from kubeplace.plan.plan import GangStatus


def gang_statuses(snapshot: Snapshot, agg: Aggregation, placed_per_class: IntArray,
                  now: datetime | None = None) -> list[GangStatus]:
    p = agg.problem
    groups = {g.key: g for g in snapshot.pod_groups}
    out = []
    for gang in p.gangs:
        classes = np.asarray(gang.classes, dtype=np.int64)
        members = tuple(snapshot.pending[m].name for c in gang.classes for m in p.members[c])
        group = groups.get(gang.key)
        placed = int(placed_per_class[classes].sum())
        ok = placed > 0 and placed >= gang.still_needed
        reason = "" if ok else _why(gang, int(p.count[classes].sum()), group.created if group else "",
                                    gang_timeout(group), now)
        out.append(GangStatus(gang.key.namespace, gang.key.name, gang.min_member, members, gang.running,
                              placed if ok else 0, ok, reason))
    return out


def _why(gang: Gang, pending: int, created: str, timeout: int, now: datetime | None) -> str:
    if gang.blocked:
        return gang.blocked
    running, min_member = gang.running, gang.min_member
    if pending + running < min_member:
        waited = _age(created, now)
        state = "timed out" if waited is not None and waited > timeout else "waiting"
        return (f"gang {state}: {pending + running} of minMember {min_member} pods exist"
                + (f" (for {waited:.0f}s, timeout {timeout}s)" if waited is not None else ""))
    where = f" within one {gang.topology_key} domain" if gang.topology_key else ""
    needs = (f"needs {gang.still_needed} more pods placed together ({running} running)" if gang.still_needed
             else f"{running} running of minMember {min_member}")
    return f"gang not placed: {needs}; no placement of them all fits{where} now"


def _age(created: str, now: datetime | None) -> float | None:
    if not created:
        return None
    try:
        start = datetime.fromisoformat(created.replace("Z", "+00:00"))
    except ValueError:
        return None
    return ((now or datetime.now(UTC)) - start).total_seconds()
