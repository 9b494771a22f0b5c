"""Free static volumes and where they can be used, and the rules that keep one volume to one claim
across a batch of pods (VolumeBinding, classes of local volumes).

Claims of one *shape* (class, size, access modes, volume mode, selector) match the same volumes.
For a class whose free volumes each admit a single node, the claims placed on a node can all bind
exactly when, for every set of shapes, the claims of those shapes are no more than the free
volumes that match any of them there (Hall's condition); only sets of shapes that share volumes
need a rule of their own. A rule counts pods, so a pod counts for its most claims of the set.
"""

from __future__ import annotations

import itertools
from collections import Counter
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from kubeplace.kube.objects import Node, SelectorTerm
from kubeplace.kube.selectors import term_matches
from kubeplace.kube.storage_objects import AVAILABLE, PersistentVolume, PersistentVolumeClaim, Storage
from kubeplace.models.problem import GroupCap
from kubeplace.models.volumes import shape, static_match

MAX_SHAPES = 6
"""Claim shapes of one class sharing volumes that get a rule per set (2^6 - 1 sets); pods of
further shapes are not placed on that class's volumes."""


@dataclass(frozen=True)
class VolumeReach:
    """The free volumes (no claimRef, Available, not being deleted) by class, smallest first, and
    the snapshot's nodes each one admits."""

    by_class: Mapping[str, tuple[PersistentVolume, ...]] = field(default_factory=dict)
    reached: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    single: Mapping[tuple[str, str], tuple[PersistentVolume, ...]] = field(default_factory=dict)
    """(class, node) -> the free volumes of the class that admit that node only."""

    @staticmethod
    def of(storage: Storage, nodes: Sequence[Node]) -> VolumeReach:
        free = sorted((v for v in storage.volumes.values()
                       if v.claim_ref is None and v.phase == AVAILABLE and not v.deleting),
                      key=lambda v: (v.capacity, v.name))
        index: dict[tuple[str, str], list[int]] = {}
        for i, node in enumerate(nodes if free else ()):  # (no free volume: no node need be looked up)
            for item in node.labels.items():
                index.setdefault(item, []).append(i)
        cache: dict[Hashable, tuple[str, ...]] = {}
        by_class: dict[str, list[PersistentVolume]] = {}
        reached: dict[str, tuple[str, ...]] = {}
        single: dict[tuple[str, str], list[PersistentVolume]] = {}
        for volume in free:
            terms = volume.node_affinity
            if terms not in cache:
                cache[terms] = _admitted(terms, nodes, index)
            reached[volume.name] = cache[terms]
            by_class.setdefault(volume.storage_class, []).append(volume)
            if len(cache[terms]) == 1:
                single.setdefault((volume.storage_class, cache[terms][0]), []).append(volume)
        return VolumeReach({k: tuple(v) for k, v in by_class.items()}, reached,
                           {k: tuple(v) for k, v in single.items()})

    def of_class(self, class_name: str) -> tuple[PersistentVolume, ...]:
        return self.by_class.get(class_name, ())

    def nodes(self, volume: PersistentVolume) -> tuple[str, ...]:
        return self.reached.get(volume.name, ())

    def local(self, class_name: str, node_name: str) -> tuple[PersistentVolume, ...]:
        return self.single.get((class_name, node_name), ())


def _admitted(terms: tuple[SelectorTerm, ...] | None, nodes: Sequence[Node],
              index: Mapping[tuple[str, str], list[int]]) -> tuple[str, ...]:
    """Names of the nodes a volume's node affinity admits (labels only, as CheckNodeAffinity)."""
    if terms is None:
        return tuple(n.name for n in nodes)
    found: set[int] = set()
    for term in terms:
        narrowing = next((r for r in term.match_expressions if r.operator == "In"), None)
        candidates = (range(len(nodes)) if narrowing is None else
                      sorted({i for value in narrowing.values for i in index.get((narrowing.key, value), ())}))
        found.update(i for i in candidates if i not in found and term_matches(term, nodes[i].labels, ""))
    return tuple(nodes[i].name for i in sorted(found))


def local_caps(class_name: str, needs: Sequence[Sequence[PersistentVolumeClaim]], nodes: Sequence[Node],
               reach: VolumeReach) -> list[GroupCap]:
    """Group rules for the claims of a class of local volumes; ``needs[c]`` are the claims of
    class ``c``'s pods that need one of its free volumes."""
    shapes: dict[Hashable, PersistentVolumeClaim] = {}
    counts: list[Counter[int]] = []
    for claims in needs:
        counted: Counter[int] = Counter()
        for claim in claims:
            key = shape(claim)
            shapes.setdefault(key, claim)
            counted[list(shapes).index(key)] += 1
        counts.append(counted)
    reps = list(shapes.values())
    if not reps:
        return []
    matched = [[frozenset(v.name for v in reach.local(class_name, n.name) if static_match(rep, v)) for n in nodes]
               for rep in reps]
    shares = {(a, b) for a, b in itertools.combinations(range(len(reps)), 2)
              if any(matched[a][i] & matched[b][i] for i in range(len(nodes)))}
    caps: list[GroupCap] = []
    for component in _components(len(reps), shares):
        excess = component[MAX_SHAPES:]
        if excess:
            members = tuple(c for c, counted in enumerate(counts) if any(counted[k] for k in excess))
            caps.append(GroupCap(f"volumes of {class_name}: more than {MAX_SHAPES} claim shapes sharing volumes",
                                 members, np.zeros(len(nodes), dtype=np.int64)))
        kept = component[:MAX_SHAPES]
        for size in range(1, len(kept) + 1):
            for subset in itertools.combinations(kept, size):
                if size > 1 and len(_components(size, {(subset.index(a), subset.index(b)) for a, b in shares
                                                       if a in subset and b in subset})) > 1:
                    continue  # shapes that share no volume: implied by the rules of their parts
                rule = _cap(class_name, subset, counts, matched, len(nodes))
                if rule is not None:
                    caps.append(rule)
    return caps


def _cap(class_name: str, subset: Sequence[int], counts: Sequence[Counter[int]],
         matched: Sequence[Sequence[frozenset[str]]], n_nodes: int) -> GroupCap | None:
    members = [c for c, counted in enumerate(counts) if any(counted[k] for k in subset)]
    if not members:
        return None
    most = max(sum(counts[c][k] for k in subset) for c in members)
    cap = np.array([len(frozenset().union(*(matched[k][i] for k in subset))) // most for i in range(n_nodes)],
                   dtype=np.int64)
    return GroupCap(f"volumes of {class_name} for claim shapes {list(subset)}", tuple(members), cap)


def _components(n: int, edges: set[tuple[int, int]]) -> list[list[int]]:
    parent = list(range(n))

    def find(a: int) -> int:
        while parent[a] != a:
            parent[a] = parent[parent[a]]
            a = parent[a]
        return a

    for a, b in edges:
        parent[find(a)] = find(b)
    groups: dict[int, list[int]] = {}
    for k in range(n):
        groups.setdefault(find(k), []).append(k)
    return list(groups.values())


def match_on_node(claims: Sequence[PersistentVolumeClaim],
                  free: Sequence[PersistentVolume]) -> list[PersistentVolume | None]:
    """A volume for as many of ``claims`` as possible (a maximum bipartite matching, each claim
    trying the smallest volumes first), in the order of ``claims``."""
    options = [[j for j, v in enumerate(free) if static_match(c, v)] for c in claims]
    holder: dict[int, int] = {}  # volume -> claim

    def place(claim: int, seen: set[int]) -> bool:
        for j in options[claim]:
            if j in seen:
                continue
            seen.add(j)
            if j not in holder or place(holder[j], seen):
                holder[j] = claim
                return True
        return False

    for claim in sorted(range(len(claims)), key=lambda k: claims[k].request):
        place(claim, set())
    by_claim = {k: j for j, k in holder.items()}
    return [free[by_claim[k]] if k in by_claim else None for k in range(len(claims))]
