"""Node selector requirements and terms: the shape node affinity, PersistentVolume node affinity,
StorageClass topologies and DRA allocations share (re-exported by ``kube.objects``)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Requirement:
    """One node selector requirement (matchExpressions or matchFields entry)."""

    key: str
    operator: str  # In, NotIn, Exists, DoesNotExist, Gt, Lt
    values: tuple[str, ...] = ()


@dataclass(frozen=True)
class SelectorTerm:
    """Requirements ANDed; terms of a node selector are ORed."""

    match_expressions: tuple[Requirement, ...] = ()
    match_fields: tuple[Requirement, ...] = ()
