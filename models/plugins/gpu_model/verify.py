"""GPUModel's independent verifier check: a pod's accepted models (annotation, ``|``-separated;
none or an empty one: any node) include the node's model label. Imports only ``kubeplace.kube``."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Protocol

from kubeplace.kube.objects import Node, Pod, Snapshot


class GPUModelSettings(Protocol):
    """What the check reads of the rule's args (``GPUModelArgs``)."""

    @property
    def nodeLabel(self) -> str: ...

    @property
    def podAnnotation(self) -> str: ...


def check_pair(pod: Pod, node: Node, _snapshot: Snapshot, args: GPUModelSettings) -> Iterator[str]:
    wanted = pod.annotations.get(args.podAnnotation, "")
    models = {model.strip() for model in wanted.split("|") if model.strip()}
    if not models:
        return
    have = node.labels.get(args.nodeLabel)
    if have not in models:
        yield f"needs GPU model {' or '.join(sorted(models))}, node has {have or 'none'}"
