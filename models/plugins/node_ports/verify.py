"""NodePorts' independent verifier check, per node: the pod's host ports against those of the
pods already there (bound, placed before it, nominated with its priority or more) and of its own
other copies. Two ports conflict as the kube-scheduler's HostPortInfo says
(``kube-scheduler/framework/types.go``): same protocol (TCP when empty) and port, and the same IP
or either one ``0.0.0.0`` (or empty). Imports only ``kubeplace.kube``."""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from kubeplace.kube.objects import HostPort, Node, Pod

_EVERY_ADDRESS = ("", "0.0.0.0")


def check_node(pod: Pod, count: int, _node: Node, here: Sequence[Pod]) -> Iterator[str]:
    for other in [*here, *([pod] if count > 1 else [])]:
        for mine in pod.host_ports:
            for theirs in other.host_ports:
                if ports_conflict(mine, theirs):
                    yield f"host port {mine.protocol or 'TCP'}/{mine.port} already used by {other.key}"


def ports_conflict(a: HostPort, b: HostPort) -> bool:
    if a.port != b.port or (a.protocol or "TCP") != (b.protocol or "TCP"):
        return False
    return a.ip == b.ip or a.ip in _EVERY_ADDRESS or b.ip in _EVERY_ADDRESS
