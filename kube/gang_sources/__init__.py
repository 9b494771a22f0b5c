"""The gang sources and the registry that lists them (docs/development.md, Adding a gang source).

A source lives in its module here (how a pod says its gang, the PodGroup kind it reads, what it lists
from a cluster, its scheduler's admission check: ``source.GangSource``) and is one line of
:data:`SOURCES`. ``kube.gangs``, ``kube.gang_admission``, the snapshot readers (``kube.live``,
``serve.informer``, ``rebalance.cluster_state``), ``serve.events`` and the chart's RBAC test derive
what they need from it.
"""

from __future__ import annotations

from kubeplace.kube.gang_sources import (
    jobset_lws,
    kai,
    kueue_workloads,
    plain,
    scheduler_plugins,
    volcano,
    workload_api,
)
from kubeplace.kube.gang_sources.source import Api, GangSource, PodGroupKind

SOURCES: tuple[GangSource, ...] = (
    scheduler_plugins.SOURCE,
    scheduler_plugins.OLD_SOURCE,
    workload_api.SOURCE,
    volcano.SOURCE,
    kai.SOURCE,
    plain.SOURCE,
    jobset_lws.SOURCE,
    kueue_workloads.SOURCE,
)
"""Every gang source, one line each, in the order a pod's gang is asked of them (the first that
names one decides)."""

KINDS: dict[str, PodGroupKind] = {s.kind.group: s.kind for s in SOURCES if s.kind is not None}
"""The PodGroup kinds by API group."""
READS: tuple[Api, ...] = tuple(api for s in SOURCES for api in s.reads)
"""Every resource the gang sources list from a cluster."""
STATUS_APIS: tuple[Api, ...] = tuple((k.group, k.status_version, "podgroups") for k in KINDS.values()
                                     if k.status_version)
"""The PodGroup resources whose ``status`` (phase, scheduled count) ``serve`` writes."""
ADMISSIONS = {s.name: s.admission for s in SOURCES if s.admission is not None}
"""Each source's scheduler admission check, by the origin of its PodGroups."""
__all__ = ["ADMISSIONS", "KINDS", "READS", "SOURCES", "STATUS_APIS", "GangSource", "PodGroupKind"]
