"""The simulated cluster: Node manifests (and pods already running) read from a snapshot, and
what-if edits of the node set by pool.

A node's pool is the value of its pool label (``--pool-label``, default ``kubeplace.io/pool``;
for example ``cloud.google.com/gke-nodepool``, ``eks.amazonaws.com/nodegroup``,
``karpenter.sh/nodepool``, or ``nvidia.com/gpu.product`` to treat each GPU model as a pool).
"""

from __future__ import annotations

import copy
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from kubeplace.kube.errors import InputError, unique_objects
from kubeplace.kube.files import load_objects
from kubeplace.kube.parse import parse_node, parse_pod
from kubeplace.simulate.names import MAX_NODES
from kubeplace.simulate.trace import RawObject

POOL_LABEL = "kubeplace.io/pool"


@dataclass(frozen=True)
class Cluster:
    nodes: tuple[RawObject, ...]
    running: tuple[RawObject, ...]
    """Pods bound in the snapshot: they run for the whole simulation."""
    source: str


@dataclass(frozen=True)
class NodeEdits:
    add: tuple[tuple[str, int], ...] = ()
    """(pool, count): nodes copied from the pool's first node."""
    remove: tuple[str, ...] = ()
    scale: tuple[tuple[str, float], ...] = ()
    """(pool, factor): the pool's node count times factor, rounded (up to at least 1 node when
    factor > 0); copies of its first node are added, its last nodes removed."""
    pool_label: str = POOL_LABEL


def read_cluster(paths: Sequence[Path]) -> Cluster:
    """Nodes and bound pods of the snapshot files, each checked as ``kubeplace plan`` reads it
    (the simulated store would drop one it cannot parse without a word), a name twice refused;
    refused without a node."""
    objects = load_objects(list(paths))
    nodes = tuple(dict(o) for o, _ in objects if o.get("kind") == "Node")
    running = tuple(dict(o) for o, _ in objects
                    if o.get("kind") == "Pod" and (o.get("spec") or {}).get("nodeName"))
    unique_objects((parse_node(o, where) for o, where in objects if o.get("kind") == "Node"), lambda n: n.name,
                   "Node")
    unique_objects((parse_pod(o, where) for o, where in objects
                    if o.get("kind") == "Pod" and (o.get("spec") or {}).get("nodeName")), lambda p: p.key, "Pod")
    source = ", ".join(map(str, paths))
    if not nodes:
        raise InputError("no nodes in the cluster", file=source, expected="Node objects")
    return Cluster(nodes, running, source)


def pool_of(node: RawObject, label: str) -> str:
    return str(((node.get("metadata") or {}).get("labels") or {}).get(label, ""))


def edit_nodes(cluster: Cluster, edits: NodeEdits) -> Cluster:
    nodes = list(cluster.nodes)
    pools = {pool_of(n, edits.pool_label) for n in nodes} - {""}

    def known(pool: str, flag: str) -> str:
        if pool not in pools:
            raise InputError(f"unknown pool {pool!r}", file=cluster.source, field=flag,
                             expected=f"a value of the node label {edits.pool_label}: "
                                      f"{', '.join(sorted(pools)) or 'none in the cluster'}")
        return pool

    for pool in edits.remove:
        known(pool, "--remove-pool")
        nodes = [n for n in nodes if pool_of(n, edits.pool_label) != pool]
    for pool, factor in edits.scale:
        members = [n for n in nodes if pool_of(n, edits.pool_label) == known(pool, "--scale-pool")]
        _within_bound(len(nodes) - len(members), len(members) * factor, f"{pool}={factor:g}", "--scale-pool",
                      cluster.source)
        wanted = max(1, math.ceil(len(members) * factor - 1e-9)) if factor > 0 else 0
        if wanted < len(members):
            dropped = {id(n) for n in members[wanted:]}
            nodes = [n for n in nodes if id(n) not in dropped]
        else:
            nodes += _copies(members[0], pool, wanted - len(members), nodes)
    for pool, count in edits.add:
        members = [n for n in nodes if pool_of(n, edits.pool_label) == known(pool, "--add")]
        template = members[0] if members else next(n for n in cluster.nodes if pool_of(n, edits.pool_label) == pool)
        _within_bound(len(nodes), count, f"{pool}={count}", "--add", cluster.source)
        nodes += _copies(template, pool, count, nodes)
    if not nodes:
        raise InputError("no nodes left after the edits", file=cluster.source, field="--remove-pool")
    kept = {n["metadata"]["name"] for n in nodes}
    running = tuple(p for p in cluster.running if p["spec"]["nodeName"] in kept)
    return Cluster(tuple(nodes), running, cluster.source)


def _within_bound(kept: int, pool_nodes: float, value: str, flag: str, source: str) -> None:
    """Refuses an edit that would leave more than ``MAX_NODES`` nodes (checked before any copy)."""
    if kept + pool_nodes > MAX_NODES:
        raise InputError(f"{value} would make the cluster {kept + pool_nodes:.12g} nodes", file=source, field=flag,
                         expected=f"at most {MAX_NODES} nodes")


def _copies(template: RawObject, pool: str, count: int, existing: Sequence[RawObject]) -> list[RawObject]:
    names = {n["metadata"]["name"] for n in existing}
    out: list[RawObject] = []
    k = 0
    while len(out) < count:
        name = f"{pool}-added-{k}".lower().replace("_", "-")
        k += 1
        if name in names:
            continue
        node = copy.deepcopy(template)
        node["metadata"]["name"] = name
        node["metadata"].pop("uid", None)
        labels = node["metadata"].setdefault("labels", {})
        if "kubernetes.io/hostname" in labels:
            labels["kubernetes.io/hostname"] = name
        out.append(node)
        names.add(name)
    return out
