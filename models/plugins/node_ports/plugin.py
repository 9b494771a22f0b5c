"""NodePorts: a host port (protocol, port, IP) is used at most once per node.

As a filter it removes nodes whose bound pods already hold a conflicting port (or a pod nominated
there of the pod's priority or more); as a
constraint it keeps pending pods from sharing one. Two ports conflict when protocol and
port are equal and the IPs are equal or either is the wildcard: ``0.0.0.0`` or no IP, as the
kube-scheduler's HostPortInfo reads them (``DefaultBindAllHostIP``); ``::`` is one address like any
other, it does not stand for every IPv6 one.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from kubeplace.kube.objects import HostPort, Node, Pod
from kubeplace.models.framework import ClassView, RunContext
from kubeplace.models.problem import BoolArray, GroupCap, Rule

NAME = "NodePorts"
WILDCARD = ""


def normalise(port: HostPort) -> HostPort:
    ip = WILDCARD if port.ip in ("", "0.0.0.0") else port.ip
    return HostPort(port.port, port.protocol or "TCP", ip)


def conflict(a: HostPort, b: HostPort) -> bool:
    a, b = normalise(a), normalise(b)
    return (a.protocol, a.port) == (b.protocol, b.port) and (a.ip == b.ip or WILDCARD in (a.ip, b.ip))


@dataclass(frozen=True)
class NodePorts:
    used_by_node: Mapping[str, frozenset[HostPort]] = field(default_factory=dict)
    held_by_node: Mapping[str, frozenset[tuple[int, HostPort]]] = field(default_factory=dict)
    """(priority, port) of the pods nominated to each node (``kube.nominated``): held against
    pods of that priority or lower."""
    name: str = NAME
    reason: str = "node(s) didn't have free ports for the requested pod ports"

    def pod_key(self, pod: Pod) -> Hashable:
        ports = tuple(sorted({normalise(p) for p in pod.host_ports}, key=lambda p: (p.protocol, p.port, p.ip)))
        return (ports, pod.priority) if ports and self.held_by_node else ports

    def node_key(self, node: Node) -> Hashable:
        return self.used_by_node.get(node.name, frozenset()), self.held_by_node.get(node.name, frozenset())

    def node_key_basis(self) -> object:
        return (self.used_by_node, self.held_by_node)

    def filter(self, pod: Pod, nodes: Sequence[Node]) -> BoolArray:
        wanted = pod.host_ports
        if not wanted:
            return np.ones(len(nodes), dtype=np.bool_)
        return np.array([not any(conflict(w, u) for w in wanted for u in self._taken(n.name, pod.priority))
                         for n in nodes], dtype=np.bool_)

    def _taken(self, node: str, priority: int) -> list[HostPort]:
        held = [port for at, port in self.held_by_node.get(node, ()) if at >= priority]
        return [*self.used_by_node.get(node, ()), *held]

    def constraints(self, view: ClassView) -> Sequence[Rule]:
        """One cap per port that two pending classes could both take on a node."""
        by_port: dict[tuple[str, int], dict[str, set[int]]] = defaultdict(lambda: defaultdict(set))
        for c, pod in enumerate(view.class_pods):
            for p in {normalise(p) for p in pod.host_ports}:
                by_port[(p.protocol, p.port)][p.ip].add(c)
        n_nodes = len(view.nodes)
        caps: list[Rule] = []
        for (protocol, port), by_ip in sorted(by_port.items()):
            wildcard = by_ip.get(WILDCARD, set())
            specific = [ip for ip in by_ip if ip != WILDCARD] or [WILDCARD]
            for ip in sorted(specific):
                classes = tuple(sorted(wildcard | by_ip.get(ip, set())))
                caps.append(GroupCap(f"hostPort {protocol}/{port} {ip or '*'}", classes,
                                     np.ones(n_nodes, dtype=np.int64)))
        return caps


def build(_args: None, ctx: RunContext) -> NodePorts:
    used: dict[str, set[HostPort]] = defaultdict(set)
    for pod in ctx.snapshot.bound:
        if pod.host_ports:  # (a node without any: no entry, the same as an empty one)
            used[pod.node_name].update(normalise(p) for p in pod.host_ports)
    held: dict[str, set[tuple[int, HostPort]]] = defaultdict(set)
    for pod in ctx.snapshot.nominated:
        held[pod.nominated_node].update((pod.priority, normalise(p)) for p in pod.host_ports)
    return NodePorts({k: frozenset(v) for k, v in used.items()}, {k: frozenset(v) for k, v in held.items() if v})
