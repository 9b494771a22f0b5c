"""NodePorts: a host port (protocol, port, IP) is used at most once per node: the filter and the
constraint (``plugin``), the verifier's per-node check (``verify``), the emulation's check
(``emulate``)."""

from __future__ import annotations

from kubeplace.models.framework import CONSTRAINT, FILTER
from kubeplace.models.plugins.node_ports import emulate, verify
from kubeplace.models.plugins.node_ports.plugin import NAME, WILDCARD, NodePorts, build, conflict, normalise
from kubeplace.models.rules import Verifier, rule

RULE = rule(NAME, (FILTER, CONSTRAINT), None, build, verify=Verifier(node=verify.check_node),
            emulate=emulate.admits, filter_order=5, verified_always=True)

__all__ = ["NAME", "RULE", "WILDCARD", "NodePorts", "build", "conflict", "normalise"]
