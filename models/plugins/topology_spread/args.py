"""PodTopologySpread's args: the kube-scheduler's PodTopologySpreadArgs (default constraints and
how they are chosen, validated per field) and the score weight of the profile; the default
constraints filled into the pending pods that have none."""

from __future__ import annotations

from dataclasses import dataclass, replace

from kubeplace.kube.objects import DO_NOT_SCHEDULE, HONOR, IGNORE, SCHEDULE_ANYWAY, Pod, Snapshot, SpreadConstraint
from kubeplace.kube.workloads import default_selector

HOSTNAME = "kubernetes.io/hostname"
ZONE = "topology.kubernetes.io/zone"


@dataclass(frozen=True)
class DefaultConstraint:
    """One of PodTopologySpreadArgs' ``defaultConstraints`` (no labelSelector: the default
    selector of ``kube.workloads`` is used)."""

    maxSkew: int = 1
    topologyKey: str = ""
    whenUnsatisfiable: str = ""
    nodeAffinityPolicy: str = HONOR
    nodeTaintsPolicy: str = IGNORE

    def problems(self, where: str) -> list[str]:
        bad = [] if self.maxSkew >= 1 else [f"{where}.maxSkew: expected an integer >= 1, got {self.maxSkew}"]
        if not self.topologyKey:
            bad.append(f"{where}.topologyKey: expected a node label key")
        if self.whenUnsatisfiable not in (DO_NOT_SCHEDULE, SCHEDULE_ANYWAY):
            bad.append(f"{where}.whenUnsatisfiable: expected DoNotSchedule or ScheduleAnyway, "
                       f"got {self.whenUnsatisfiable!r}")
        policies = (("nodeAffinityPolicy", self.nodeAffinityPolicy), ("nodeTaintsPolicy", self.nodeTaintsPolicy))
        for name, value in policies:
            if value not in (HONOR, IGNORE):
                bad.append(f"{where}.{name}: expected Honor or Ignore, got {value!r}")
        return bad


SYSTEM_DEFAULTS = (DefaultConstraint(3, HOSTNAME, SCHEDULE_ANYWAY), DefaultConstraint(5, ZONE, SCHEDULE_ANYWAY))
"""``plugin.go systemDefaultConstraints``."""
SYSTEM, LIST = "System", "List"


@dataclass(frozen=True)
class PodTopologySpreadArgs:
    """The kube-scheduler's PodTopologySpreadArgs (``defaultConstraints``, ``defaultingType``:
    System uses the system defaults and takes no constraints of its own, List the given ones),
    and ``weight``: the score weight of the ScheduleAnyway constraints in this profile."""

    weight: int = 2
    defaultConstraints: tuple[DefaultConstraint, ...] = ()
    defaultingType: str = SYSTEM

    def validate(self) -> list[str]:
        bad = [] if 0 <= self.weight <= 100 else [f"weight: expected an integer from 0 to 100, got {self.weight}"]
        if self.defaultingType not in (SYSTEM, LIST):
            bad.append(f"defaultingType: expected System or List, got {self.defaultingType!r}")
        elif self.defaultingType == SYSTEM and self.defaultConstraints:
            bad.append("defaultConstraints: expected none with defaultingType System")
        for i, c in enumerate(self.defaultConstraints):
            bad += c.problems(f"defaultConstraints[{i}]")
        keys = [(c.topologyKey, c.whenUnsatisfiable) for c in self.defaultConstraints]
        if len(set(keys)) < len(keys):
            bad.append("defaultConstraints: expected one constraint per topologyKey and whenUnsatisfiable")
        return bad

    def defaulted(self, snapshot: Snapshot) -> Snapshot:
        """``snapshot`` with the default constraints on every pending pod that has none
        (``buildDefaultConstraints``), selecting by its default selector; pods without one keep none."""
        chosen = SYSTEM_DEFAULTS if self.defaultingType == SYSTEM else self.defaultConstraints
        if not chosen or not snapshot.controllers:
            return snapshot

        def fill(pod: Pod) -> Pod:
            if pod.spread:
                return pod
            selector = default_selector(pod, snapshot.controllers)
            if not selector:
                return pod
            return replace(pod, spread=tuple(
                SpreadConstraint(c.maxSkew, c.topologyKey, c.whenUnsatisfiable == DO_NOT_SCHEDULE, selector,
                                 node_affinity_policy=c.nodeAffinityPolicy, node_taints_policy=c.nodeTaintsPolicy,
                                 system_default=self.defaultingType == SYSTEM)
                for c in chosen))
        return replace(snapshot, pending=tuple(map(fill, snapshot.pending)))

