"""Fuzz: every gang source's fields (minMember, minResources, timeouts, phases, counts, sizes) end in
a plan the verifier accepts or a one-line input error, never a traceback, and never in more
stand-ins than the nodes could hold."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from kubeplace.kube.errors import InputError
from kubeplace.kube.objects import Snapshot
from kubeplace.models.config import Configuration, Profile, SolverSettings
from kubeplace.plan.pipeline import make_plan, with_stand_ins
from kubeplace.plan.verify import verify
from tests.builders import BUILDER_SOURCE, node, pod, snapshot_of

RACK = "rack"
INTS = st.one_of(st.integers(-3, 5), st.sampled_from([0, 2**31 - 1, 2**31, -(2**31) - 1, 10**20]))
ODD = st.one_of(INTS, st.none(), st.booleans(), st.floats(allow_nan=True), st.sampled_from(
    ["", "3", "²", "٣", " 4 ", "1e3", "-1", "0x10", "999999999999"]), st.lists(st.integers(0, 3), max_size=2),
    st.dictionaries(st.sampled_from(["a", "minCount"]), st.integers(0, 3), max_size=1))
QUANTITIES = st.one_of(st.sampled_from(["1", "500m", "1Gi", "1e400", "-1", "lots", "9999999", "0"]), ODD)
RESOURCE_NAMES = st.sampled_from(["cpu", "memory", "pods", "nvidia.com/gpu", "requests.cpu", "limits.memory",
                                  "count/pods", "ephemeral-storage", "hugepages-2Mi", "requests.nvidia.com/gpu"])
QUANTITIES = st.integers(0, 9).flatmap(lambda k: QUANTITIES if k == 0 else st.sampled_from(
    ["1", "500m", "2Gi", "9", "30", "1500m", 2]))
MIN_RESOURCES = st.integers(0, 9).flatmap(
    lambda k: ODD if k == 0 else st.dictionaries(RESOURCE_NAMES, QUANTITIES, max_size=4))


def mostly(valid: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """``valid`` 15 times in 16, else any odd value (so that most examples reach the plan)."""
    return st.integers(0, 15).flatmap(lambda k: ODD if k == 0 else valid)


COUNTS = st.one_of(st.integers(1, 4), st.sampled_from([2**31 - 1]))
PHASES = mostly(st.sampled_from(["", "Pending", "Inqueue", "Running", "Unknown", "Scheduling"]))
FUZZ = settings(max_examples=60, derandomize=True, deadline=None, database=None)

SOURCES = {
    "scheduler-plugins": ("scheduling.x-k8s.io/v1alpha1", ("label", "scheduling.x-k8s.io/pod-group")),
    "volcano": ("scheduling.volcano.sh/v1beta1", ("annotation", "scheduling.k8s.io/group-name")),
    "kai": ("scheduling.run.ai/v2alpha2", ("annotation", "pod-group-name")),
}


def _spec(source: str, draw: Any) -> dict[str, Any]:
    if source == "workload":
        gang = st.fixed_dictionaries({"gang": st.fixed_dictionaries({"minCount": mostly(COUNTS)})})
        policy = draw(mostly(st.one_of(gang, st.just({"basic": {}}))))
        return {"schedulingPolicy": policy,
                "schedulingConstraints": draw(mostly(st.sampled_from([{}, {"topology": [{"key": RACK}]}])))}
    spec: dict[str, Any] = {"minMember": draw(mostly(COUNTS))}
    if source == "kai":
        spec["topologyConstraint"] = draw(mostly(st.sampled_from([{}, {"requiredTopologyLevel": RACK}])))
    else:
        spec.update(minResources=draw(MIN_RESOURCES), scheduleTimeoutSeconds=draw(mostly(st.integers(0, 100))))
    return {k: v for k, v in spec.items() if v is not None or draw(st.booleans())}


@st.composite
def gang_objects(draw: Any) -> list[Any]:
    """Nodes, one PodGroup of any source with fuzzed fields and its members, a CRD-free gang with
    fuzzed annotations, and a JobSet leader and a LeaderWorkerSet leader with fuzzed sizes."""
    nodes = [node(f"n{i}").cpu("8").memory("8Gi").pods(draw(st.integers(0, 4))).label(RACK, f"r{i % 2}")
             for i in range(3)]
    source = draw(st.sampled_from([*SOURCES, "workload"]))
    api = "scheduling.k8s.io/v1beta1" if source == "workload" else SOURCES[source][0]
    group = {"apiVersion": api, "kind": "PodGroup", "metadata": {"name": "g", "namespace": "default"},
             "spec": _spec(source, draw), "status": draw(mostly(st.fixed_dictionaries({"phase": PHASES})))}
    members = []
    for i in range(draw(st.integers(1, 3))):
        member = pod(f"m{i}").cpu(draw(st.sampled_from(["1", "3"])))
        if source == "workload":
            member = member.spec("schedulingGroup", {"podGroupName": "g"})
        else:
            how, key = SOURCES[source][1]
            member = member.label(key, "g") if how == "label" else member.annotation(key, "g")
        members.append(member.on("n0") if draw(st.booleans()) and i else member)
    plain = [pod(f"p{i}").cpu("1").label("kubeplace.io/gang", "plain")
             .annotation("kubeplace.io/gang-min-member", draw(mostly(st.sampled_from(["1", "2", ""])).map(str)))
             .annotation("kubeplace.io/gang-timeout-seconds", draw(mostly(st.sampled_from(["5", "", "0"])).map(str)))
             for i in range(2)]
    return [*nodes, group, *members, *plain, *_leaders(draw)]


def _leaders(draw: Any) -> list[Any]:
    size, parallelism = draw(mostly(COUNTS)), draw(mostly(COUNTS))
    job = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "train", "namespace": "default"},
           "spec": {"parallelism": parallelism, "completions": draw(mostly(st.one_of(st.none(), COUNTS))),
                    "template": {"spec": {"containers": [{"name": "m", "resources": {"requests": {"cpu": "1"}}}]}}}}
    worker = {"spec": {"containers": [{"name": "w", "resources": {"requests": {"cpu": "1"}}}]}}
    lws = {"apiVersion": "leaderworkerset.x-k8s.io/v1", "kind": "LeaderWorkerSet",
           "metadata": {"name": "infer", "namespace": "default"},
           "spec": {"leaderWorkerTemplate": {"size": size, "workerTemplate": worker}}}
    jobset = (pod("train-0").cpu("1").label("batch.kubernetes.io/job-name", "train")
              .label("batch.kubernetes.io/job-completion-index", "0")
              .annotation("alpha.jobset.sigs.k8s.io/exclusive-topology", RACK))
    lws_leader = (pod("infer-0").cpu("1").label("leaderworkerset.sigs.k8s.io/name", "infer")
                  .label("leaderworkerset.sigs.k8s.io/group-index", "0")
                  .label("leaderworkerset.sigs.k8s.io/worker-index", "0")
                  .annotation("leaderworkerset.sigs.k8s.io/exclusive-topology", RACK))
    return [job, jobset, lws, lws_leader]


EXCLUSIVE_JOBSET = "alpha.jobset.sigs.k8s.io/exclusive-topology"
EXCLUSIVE_LWS = "leaderworkerset.sigs.k8s.io/exclusive-topology"


def _slots(snap: Snapshot) -> int:
    return sum(n.allocatable.get("pods", 0) for n in snap.nodes)


@FUZZ
@given(gang_objects())
def test_gang_source_fields_end_in_a_verified_plan_or_an_input_error(objects: list[Any]) -> None:
    try:
        snap = snapshot_of(*objects)
    except InputError as error:
        assert "\n" not in str(error) and str(error).startswith(f"{BUILDER_SOURCE}: ")
        return
    leaders = sum(1 for p in snap.pending if p.annotations.get(EXCLUSIVE_JOBSET) or p.annotations.get(EXCLUSIVE_LWS))
    assert len(snap.reserved) <= leaders  # one stand-in object per leader, however many followers
    assert sum(p.copies for p in snap.reserved) <= _slots(snap)
    plan = make_plan(snap, Configuration(), Profile(), SolverSettings(time_limit=1, workers=1)).plan
    assert plan.summary.verified
    assert verify(snap, [(p.namespace, p.name, p.node) for p in plan.placements]) == []
    everything = [(p.namespace, p.name, p.node, p.count) for p in (*plan.placements, *plan.reservations)]
    assert verify(with_stand_ins(snap), everything) == []
