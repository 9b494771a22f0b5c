"""models/plugins/taint_toleration/: the filter and the independent verifier check agree on the
NoSchedule and NoExecute taints, and a plan against an untolerated taint is refused."""

from __future__ import annotations

import pytest

from kubeplace.kube.objects import NO_EXECUTE, NO_SCHEDULE, PREFER_NO_SCHEDULE, Node, Pod, Snapshot, Taint, Toleration
from kubeplace.models.plugins import taint_toleration
from kubeplace.models.plugins.taint_toleration import verify
from kubeplace.plan.verify import verify as verify_plan

TAINTS = [(), (Taint("gpu", "a100", NO_SCHEDULE),), (Taint("gpu", "a100", NO_EXECUTE),),
          (Taint("gpu", "a100", PREFER_NO_SCHEDULE),), (Taint("gpu", "", NO_SCHEDULE), Taint("spot", "1", NO_EXECUTE))]
TOLERATIONS = [(), (Toleration("gpu", "Equal", "a100", ""),), (Toleration("gpu", "Exists", "", NO_SCHEDULE),),
               (Toleration("", "Exists", "", ""),), (Toleration("gpu", "Equal", "h100", ""),),
               (Toleration("gpu", "Exists", "", ""), Toleration("spot", "Equal", "1", NO_EXECUTE))]


@pytest.mark.parametrize("tolerations", TOLERATIONS)
def test_the_filter_and_the_verifier_check_agree(tolerations: tuple[Toleration, ...]) -> None:
    nodes = [Node(f"n{i}", taints=taints, allocatable={"cpu": 1000, "pods": 10}) for i, taints in enumerate(TAINTS)]
    pod = Pod("default", "p", tolerations=tolerations, requests={"cpu": 100})
    admitted = taint_toleration.TaintToleration().filter(pod, nodes).tolist()
    assert admitted == [not list(verify.check_pair(pod, n, Snapshot((), (), ()), None)) for n in nodes]


def test_a_plan_on_an_untolerated_taint_is_refused_by_the_rules_check() -> None:
    tainted = Node("n1", taints=(Taint("gpu", "a100", NO_SCHEDULE),), allocatable={"cpu": 1000, "pods": 10})
    snapshot = Snapshot(nodes=(tainted,),
                        pending=(Pod("default", "p", requests={"cpu": 100}),), bound=())
    [violation] = verify_plan(snapshot, [("default", "p", "n1")])
    assert (violation.rule, violation.detail) == ("TaintToleration", "untolerated taint gpu=a100:NoSchedule")
