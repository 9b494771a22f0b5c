"""models/plugins/gpu_model/: the filter and the independent verifier check agree on the accepted
GPU models (annotation, ``|``-separated), with the default and with configured names."""

from __future__ import annotations

import pytest

from kubeplace.kube.objects import Node, Pod, Snapshot
from kubeplace.models.framework import RunContext
from kubeplace.models.plugins import gpu_model
from kubeplace.models.plugins.gpu_model import GPUModelArgs, verify
from kubeplace.plan.verify import VerifySettings, rule_checks
from kubeplace.plan.verify import verify as verify_plan

CUSTOM = GPUModelArgs(nodeLabel="gpu", podAnnotation="wants")


@pytest.mark.parametrize("args", [GPUModelArgs(), CUSTOM])
@pytest.mark.parametrize("wanted", ["", " ", "H100", "H100|A100", " A100 | ", "L4"])
def test_the_filter_and_the_verifier_check_agree(args: GPUModelArgs, wanted: str) -> None:
    nodes = [Node("none"), Node("h100", labels={args.nodeLabel: "H100"}), Node("a100", labels={args.nodeLabel: "A100"})]
    pod = Pod("default", "p", annotations={args.podAnnotation: wanted})
    snapshot = Snapshot(tuple(nodes), (pod,), ())
    admitted = gpu_model.build(args, RunContext(snapshot)).filter(pod, nodes).tolist()
    assert admitted == [not list(verify.check_pair(pod, n, snapshot, args)) for n in nodes]


def test_the_verifier_reads_the_profiles_args() -> None:
    node = Node("n1", labels={"gpu": "A100"}, allocatable={"pods": 10})
    snapshot = Snapshot((node,), (Pod("default", "p", annotations={"wants": "H100"}),), ())
    settings = VerifySettings(rules=rule_checks(args={"GPUModel": CUSTOM}))
    [violation] = verify_plan(snapshot, [("default", "p", "n1")], settings)
    assert (violation.rule, violation.detail) == ("GPUModel", "needs GPU model H100, node has A100")
    assert verify_plan(snapshot, [("default", "p", "n1")]) == []  # the default annotation is not set
