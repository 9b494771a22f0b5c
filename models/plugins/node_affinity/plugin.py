"""NodeAffinity: spec.nodeSelector and required node affinity (all operators, matchFields)."""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass

import numpy as np

from kubeplace.kube.objects import Node, Pod, Requirement, SelectorTerm
from kubeplace.models.framework import RunContext
from kubeplace.models.problem import BoolArray

NAME = "NodeAffinity"


def _int_or_none(text: str | None) -> int | None:
    try:
        return int(text) if text is not None else None
    except ValueError:
        return None


def requirement_mask(req: Requirement, values: Sequence[str | None]) -> BoolArray:
    """Vectorised match of one requirement against one value per node (None = missing)."""
    have = np.array([v is not None for v in values], dtype=np.bool_)
    if req.operator == "Exists":
        return have
    if req.operator == "DoesNotExist":
        return ~have
    if req.operator in ("In", "NotIn"):
        wanted = set(req.values)
        inside = np.array([v in wanted for v in values], dtype=np.bool_)
        return inside if req.operator == "In" else ~inside
    if req.operator in ("Gt", "Lt"):
        bound = _int_or_none(req.values[0]) if len(req.values) == 1 else None
        if bound is None:
            return np.zeros(len(values), dtype=np.bool_)
        ints = [_int_or_none(v) for v in values]
        if req.operator == "Gt":
            return np.array([i is not None and i > bound for i in ints], dtype=np.bool_)
        return np.array([i is not None and i < bound for i in ints], dtype=np.bool_)
    return np.zeros(len(values), dtype=np.bool_)


def term_mask(term: SelectorTerm, nodes: Sequence[Node]) -> BoolArray:
    """A term ANDs its requirements; an empty term matches nothing."""
    if not term.match_expressions and not term.match_fields:
        return np.zeros(len(nodes), dtype=np.bool_)
    mask = np.ones(len(nodes), dtype=np.bool_)
    for req in term.match_expressions:
        mask &= requirement_mask(req, [n.labels.get(req.key) for n in nodes])
    for req in term.match_fields:
        names = [n.name if req.key == "metadata.name" else None for n in nodes]
        mask &= requirement_mask(req, names)
    return mask


@dataclass(frozen=True)
class NodeAffinity:
    """Reads only the node labels some pending pod refers to, so that nodes differing in
    unrelated labels (hostname, ...) still share one evaluation."""

    label_keys: tuple[str, ...]
    uses_node_name: bool
    name: str = NAME
    reason: str = "node(s) didn't match Pod's node affinity/selector"

    def pod_key(self, pod: Pod) -> Hashable:
        return (tuple(sorted(pod.node_selector.items())), pod.required_terms)

    def node_key(self, node: Node) -> Hashable:
        labels = tuple(node.labels.get(k) for k in self.label_keys)
        return (labels, node.name) if self.uses_node_name else labels

    def node_key_basis(self) -> object:
        return (self.label_keys, self.uses_node_name)

    def filter(self, pod: Pod, nodes: Sequence[Node]) -> BoolArray:
        mask = np.ones(len(nodes), dtype=np.bool_)
        for key, value in pod.node_selector.items():
            mask &= np.array([n.labels.get(key) == value for n in nodes], dtype=np.bool_)
        if pod.required_terms is not None:
            any_term = np.zeros(len(nodes), dtype=np.bool_)
            for term in pod.required_terms:
                any_term |= term_mask(term, nodes)
            mask &= any_term
        return mask


def build(_args: None, ctx: RunContext) -> NodeAffinity:
    keys: set[str] = set()
    uses_name = False
    for pod in ctx.snapshot.pending:
        keys.update(pod.node_selector)
        for term in pod.required_terms or ():
            keys.update(r.key for r in term.match_expressions)
            uses_name = uses_name or bool(term.match_fields)
    return NodeAffinity(tuple(sorted(keys)), uses_name)
