"""The kube-scheduler's filter plugins whose rules kubeplace does not model.

Each only says, pod by pod, that its rule is there (``unmodelled``): such a pod is left to the
default scheduler, with that reason, rather than placed against a rule kubeplace cannot check.
They pass every node, so they neither prune nor split classes. Disabling one in a profile lets
kubeplace place the pods that hold its rule as if the rule were not there.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass

from kubeplace.kube.objects import Node, Pod, SpecRule
from kubeplace.models.framework import RunContext, all_true
from kubeplace.models.problem import BoolArray

RESOURCE_CLAIMS = "dynamic resource claims"


@dataclass(frozen=True)
class RuleLeftToDefault:
    """A filter that passes every node and reports ``rule`` as not modelled."""

    name: str
    rule: SpecRule
    text: str
    reason: str = ""

    def pod_key(self, pod: Pod) -> Hashable:
        return None

    def node_key(self, node: Node) -> Hashable:
        return None

    def filter(self, pod: Pod, nodes: Sequence[Node]) -> BoolArray:
        return all_true(len(nodes))

    def unmodelled(self, pod: Pod) -> tuple[str, ...]:
        return (self.text,) if self.rule in pod.spec_rules else ()


PLUGINS = {
    "DynamicResources": (SpecRule.RESOURCE_CLAIMS, RESOURCE_CLAIMS),
}
"""Plugin name (the kube-scheduler's) -> the rule it owns and the reason given."""


def builder(name: str) -> Callable[[None, RunContext], RuleLeftToDefault]:
    rule, text = PLUGINS[name]

    def build(_args: None, _ctx: RunContext) -> RuleLeftToDefault:
        return RuleLeftToDefault(name, rule, text)

    return build
