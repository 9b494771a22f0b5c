"""One gang identity: ``kube.gangs.gang_of`` decides which gang a pod belongs to, for every source,
and no other module of the product reads a pod's gang marks to decide it again."""

from __future__ import annotations

import ast

import pytest

from kubeplace.kube.followers import JOB_NAME, JOBSET_EXCLUSIVE, JOBSET_NODE_SELECTOR_STRATEGY, LWS_EXCLUSIVE
from kubeplace.kube.gangs import KAI_ANNOTATION, MEMBER_LABELS, PLAIN_LABEL, VOLCANO_ANNOTATION, gang_of
from kubeplace.kube.kueue import KUEUE_WORKLOAD
from kubeplace.kube.objects import GangKey
from tests.builders import GANG_SOURCES, pod
from tests.test_structure import product_modules

MARKS = (*MEMBER_LABELS, VOLCANO_ANNOTATION, KAI_ANNOTATION, PLAIN_LABEL, KUEUE_WORKLOAD, JOBSET_EXCLUSIVE,
         LWS_EXCLUSIVE)
SOURCE_MODULES = {"kubeplace.kube.gangs", "kubeplace.kube.followers", "kubeplace.kube.kueue"}
"""The modules that define the marks and read them (``gang_of`` and the sources it asks), beside the
sources' own modules (``kube.gang_sources``)."""


@pytest.mark.parametrize("source", sorted(GANG_SOURCES))
def test_gang_of_knows_every_source(source: str) -> None:
    member = GANG_SOURCES[source](pod("w0", "ml"), "job")
    want = GangKey("ml", "job-0" if source == "leaderworkerset" else "job")
    assert gang_of(member.build()) == want


def test_a_pod_marked_by_no_source_is_in_no_gang() -> None:
    assert gang_of(pod("solo").label("app", "web").build()) is None
    jobset = pod("w0").annotation(JOBSET_EXCLUSIVE, "topology.kubernetes.io/zone").label(JOB_NAME, "job")
    assert gang_of(jobset.build()) == GangKey("default", "job")
    pre_labelled = jobset.annotation(JOBSET_NODE_SELECTOR_STRATEGY, "true")  # no leader to plan for
    assert gang_of(pre_labelled.build()) is None


def test_no_module_but_the_sources_reads_a_pods_gang_marks() -> None:
    """The regression: plan/verify.py and plan/verify_preempt.py each kept their own copy of the gang
    rule (the preemption verifier's knew neither KAI, nor the Workload API, nor Kueue, JobSet or
    LeaderWorkerSet). A mark spelled out, or ``Pod.scheduling_group`` read, outside the source
    modules is such a copy: ask ``kube.gangs.gang_of`` (or ``named_pod_group``) instead."""
    copies = []
    for name, module in product_modules().items():
        if name in SOURCE_MODULES or name.startswith("kubeplace.kube.gang_sources."):
            continue
        for node in ast.walk(ast.parse(module.path.read_text())):
            if isinstance(node, ast.Constant) and node.value in MARKS:
                copies.append(f"{module.path.name}:{node.lineno}: {node.value!r}")
            elif isinstance(node, ast.Attribute) and node.attr == "scheduling_group":
                copies.append(f"{module.path.name}:{node.lineno}: .scheduling_group")
    assert copies == []
