"""Example user plugin: pods that ask for special nodes go only to nodes that allow them.

A pod asks with the label ``special: "true"``; a node allows it with the label
``allow-special-pods: "true"``. Enable it with ``config.yaml`` beside this file::

    kubeplace plan fixtures/demo --config examples/plugins/config.yaml

A user plugin needs nothing but kubeplace's public plugin API (``kubeplace.plugins``):
no solver import, no change to kubeplace's code. kubeplace imports it from the path
given in the configuration, looked up first in the configuration file's directory, and
builds it once when it loads the configuration: its factory declares the FILTER extension
point, so the plugin must have ``reason``, ``pod_key``, ``node_key`` and ``filter`` (a
plugin missing one is refused with an error that names it, never silently skipped).
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass

import numpy as np

from kubeplace.plugins import FILTER, BoolArray, Node, PluginFactory, Pod, RunContext


@dataclass(frozen=True)
class NodeLabelMatchArgs:
    podLabel: str = "special"
    nodeLabel: str = "allow-special-pods"
    value: str = "true"

    def validate(self) -> list[str]:
        return [] if self.podLabel and self.nodeLabel else ["podLabel and nodeLabel must not be empty"]


@dataclass(frozen=True)
class NodeLabelMatch:
    args: NodeLabelMatchArgs
    name: str = "NodeLabelMatch"
    reason: str = "node(s) do not allow special pods"

    def pod_key(self, pod: Pod) -> Hashable:
        return pod.labels.get(self.args.podLabel) == self.args.value

    def node_key(self, node: Node) -> Hashable:
        return node.labels.get(self.args.nodeLabel) == self.args.value

    def filter(self, pod: Pod, nodes: Sequence[Node]) -> BoolArray:
        if not self.pod_key(pod):
            return np.ones(len(nodes), dtype=np.bool_)
        return np.array([bool(self.node_key(n)) for n in nodes], dtype=np.bool_)


def _build(args: NodeLabelMatchArgs, _ctx: RunContext) -> NodeLabelMatch:
    return NodeLabelMatch(args)


FACTORY = PluginFactory("NodeLabelMatch", FILTER, NodeLabelMatchArgs, _build)
