"""NodeAffinity: the filter (nodeSelector and required terms, ``plugin``), the preferred terms'
score (``score``, weight in ``args``), the verifier check (``verify``)."""

from __future__ import annotations

from kubeplace.models.framework import CONSTRAINT, FILTER, SCORE
from kubeplace.models.plugins.node_affinity import verify
from kubeplace.models.plugins.node_affinity.args import NodeAffinityArgs
from kubeplace.models.plugins.node_affinity.plugin import NAME, NodeAffinity, build, requirement_mask, term_mask
from kubeplace.models.plugins.node_affinity.score import build_node_affinity, preferred_weights
from kubeplace.models.rules import Verifier, rule

RULE = rule(NAME, (FILTER, CONSTRAINT, SCORE), NodeAffinityArgs, build_node_affinity,
            verify=Verifier(pair=verify.check_pair), filter_order=4, verified_always=True)

__all__ = ["NAME", "RULE", "NodeAffinity", "NodeAffinityArgs", "build", "preferred_weights", "requirement_mask",
           "term_mask"]
