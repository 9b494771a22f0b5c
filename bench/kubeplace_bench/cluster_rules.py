"""``kubeplace bench cluster`` scenarios for the inter-pod rules: topology spread, inter-pod
(anti-)affinity and exclusive topology, with pods shaped as the charts and controllers make them.

Each scenario is built so that one pod at a time strands a domain: the kube-scheduler, scoring
each pod alone, takes the node that looks emptiest, and the pods that come later find no domain
with room for them. Each states what both schedulers are expected to place (:class:`Expected`).
kubeplace models these rules (JobSet and LWS followers not created yet as stand-ins that hold
their room), so it places every pod where the kube-scheduler strands some; the bench reports both
counts and any pod kubeplace leaves to the default scheduler.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable

import numpy as np

from kubeplace.kube.objects import GPU
from kubeplace_bench.cluster_scenarios import Expected, Followers, Manifest, Scenario, node, pod

ZONE = "topology.kubernetes.io/zone"
HOSTNAME = "kubernetes.io/hostname"
RACK = "cloud.provider.com/topology-rack"
"""The rack label (as in Kueue's topology-aware scheduling examples); the exclusive topology key."""
ZONES = ("zone-a", "zone-b", "zone-c")
POOL = "pool"
GPU_TAINT = {"key": GPU, "value": "present", "effect": "NoSchedule"}

# Deployment replicas, as Helm charts label them
NAME, INSTANCE, TEMPLATE_HASH = "app.kubernetes.io/name", "app.kubernetes.io/instance", "pod-template-hash"
# JobSet (sigs.k8s.io/jobset api/jobset/v1alpha2) and batch/v1 Job labels and annotations
JOBSET_NAME, REPLICATED_JOB, JOB_INDEX = ("jobset.sigs.k8s.io/jobset-name", "jobset.sigs.k8s.io/replicatedjob-name",
                                          "jobset.sigs.k8s.io/job-index")
JOB_KEY, JOBSET_EXCLUSIVE = "jobset.sigs.k8s.io/job-key", "alpha.jobset.sigs.k8s.io/exclusive-topology"
JOB_NAME, COMPLETION_INDEX = "batch.kubernetes.io/job-name", "batch.kubernetes.io/job-completion-index"
# LeaderWorkerSet (sigs.k8s.io/lws api/leaderworkerset/v1) labels and annotations
LWS = "leaderworkerset.sigs.k8s.io/"
LWS_NAME, LWS_GROUP_INDEX, LWS_WORKER_INDEX = f"{LWS}name", f"{LWS}group-index", f"{LWS}worker-index"
LWS_GROUP_KEY, LWS_SIZE, LWS_LEADER_NAME = f"{LWS}group-key", f"{LWS}size", f"{LWS}leader-name"
LWS_SUBGROUP_INDEX, LWS_SUBGROUP_KEY = f"{LWS}subgroup-index", f"{LWS}subgroup-key"
LWS_SUBGROUP_SIZE, LWS_SUBGROUP_EXCLUSIVE = f"{LWS}subgroup-size", f"{LWS}subgroup-exclusive-topology"


def sha1(text: str) -> str:
    """The hex SHA-1 JobSet and LWS use for their job and group keys."""
    return hashlib.sha1(text.encode()).hexdigest()


def _exclusive(key_label: str, key: str, topology: str, all_namespaces: bool) -> Manifest:
    """Required affinity to the own key and anti-affinity to every other key, on ``topology``: what
    JobSet's and LWS's webhooks inject (``setExclusiveAffinities`` / ``SetExclusiveAffinities``);
    JobSet's terms carry ``namespaceSelector: {}``, LWS's none (the pod's own namespace)."""
    same = {"labelSelector": {"matchExpressions": [{"key": key_label, "operator": "In", "values": [key]}]},
            "topologyKey": topology}
    others = {"labelSelector": {"matchExpressions": [{"key": key_label, "operator": "Exists"},
                                                     {"key": key_label, "operator": "NotIn", "values": [key]}]},
              "topologyKey": topology}
    if all_namespaces:
        same["namespaceSelector"] = others["namespaceSelector"] = {}
    return {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [same]},
            "podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [others]}}


# --------------------------------------------------------------------------- (5) HA web tier


def ha_replica(index: int, app: str, cpu_m: int, memory_mi: int) -> Manifest:
    """A Deployment replica as HA charts set it: required hostname anti-affinity on its own app
    (a "hard" anti-affinity preset) and zone spread, DoNotSchedule, maxSkew 1, per template hash."""
    labels = {NAME: app, INSTANCE: "shop", TEMPLATE_HASH: sha1(app)[:10]}
    selector = {"matchLabels": {NAME: app, INSTANCE: "shop"}}
    affinity = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"labelSelector": selector, "topologyKey": HOSTNAME}]}}
    spread = [{"maxSkew": 1, "topologyKey": ZONE, "whenUnsatisfiable": "DoNotSchedule", "labelSelector": selector,
               "matchLabelKeys": [TEMPLATE_HASH]}]
    return pod(index, app, cpu_m, memory_mi, labels=labels, affinity=affinity, spread=spread)


def web_pool(per_zone: int, labels: dict[str, str] | None = None) -> list[Manifest]:
    """``per_zone`` nodes of 8 CPU / 32 GiB in each of the three zones."""
    return [node(f"web-{zone[-1]}-{i}", 8, 32, labels={ZONE: zone, **(labels or {})})
            for zone in ZONES for i in range(per_zone)]


def ha_pods(first: int, h: int) -> list[Manifest]:
    """3h replicas each of web and api (3 CPU / 12 GiB) interleaved, then 3h of db (6 CPU / 24 GiB)."""
    pods: list[Manifest] = []
    for _ in range(3 * h):
        for app in ("web", "api"):
            pods.append(ha_replica(first + len(pods), app, 3000, 12 * 1024))
    for _ in range(3 * h):
        pods.append(ha_replica(first + len(pods), "db", 6000, 24 * 1024))
    return pods


def ha_web(seed: int) -> Scenario:
    """Three zones of 2h nodes (8 CPU); web and api replicas (3 CPU) arrive interleaved, then db (6 CPU),
    3h replicas each, every one with hostname anti-affinity and zone spread.

    One at a time, LeastAllocated sends each web and api replica to an empty node (spread and
    anti-affinity allow it: each zone takes h of each app), so every node ends with 5 CPU free and no
    db replica fits. In the plan that places all, a web and an api replica share h nodes per zone
    and each db replica has a node of its own, one per host and h per zone.
    """
    h = int(np.random.default_rng([seed, 5]).integers(1, 3))
    pods = ha_pods(0, h)
    expected = Expected(6 * h, 9 * h, "one at a time every node takes one 3-CPU replica, leaving no 6 CPU "
                        "for a db replica; planned together, web and api share a node")
    return Scenario("ha-web", f"3 zones x {2 * h} nodes of 8 CPU; {3 * h} web, {3 * h} api (3 CPU), then {3 * h} db "
                    "(6 CPU) replicas, zone spread + hostname anti-affinity", tuple(web_pool(2 * h)), tuple(pods),
                    expected=expected)


# --------------------------------------------------------------------------- (6) JobSet, exclusive racks


def gpu_racks(m: int, taint: bool = False) -> list[Manifest]:
    """m racks of 4 nodes (64 CPU / 512 GiB / 8 GPUs) and m racks of 2 nodes (128 CPU / 1 TiB / 8 GPUs),
    over the three zones. LeastAllocated scores the larger nodes of the small racks higher."""
    nodes = []
    for k in range(2 * m):
        small = k % 2 == 1
        rack, zone = f"rack-{k}", ZONES[k % len(ZONES)]
        for i in range(2 if small else 4):
            n = node(f"gpu-{k}-{i}", 128 if small else 64, 1024 if small else 512, gpus=8,
                     labels={RACK: rack, ZONE: zone})
            if taint:
                n["spec"]["taints"].append(dict(GPU_TAINT))
            nodes.append(n)
    return nodes


def _gpu_pod(index: int, shape: str, labels: dict[str, str], annotations: dict[str, str],
             affinity: Manifest | None, tolerate: bool) -> Manifest:
    """A whole-node ML pod: 16 CPU / 64 GiB / 8 GPUs."""
    manifest = pod(index, shape, 16000, 64 * 1024, gpus=8, labels=labels, annotations=annotations, affinity=affinity)
    if tolerate:
        manifest["spec"]["tolerations"].append({**GPU_TAINT, "operator": "Equal"})
    return manifest


def jobset_job(leader_index: int, follower_index: int, replicated: str, job: int, size: int,
               tolerate: bool = False) -> tuple[Manifest, Followers, Manifest]:
    """The leader pod (completion index 0, with the exclusive affinities), its followers and a stand-in
    Job of one job of JobSet ``train`` with ``alpha.jobset.sigs.k8s.io/exclusive-topology`` on racks."""
    job_name = f"train-{replicated}-{job}"
    key = sha1(job_name)  # JobSet hashes namespace/name; one namespace per copy here
    labels = {JOBSET_NAME: "train", REPLICATED_JOB: replicated, JOB_INDEX: str(job), JOB_KEY: key, JOB_NAME: job_name}
    annotations = {JOBSET_EXCLUSIVE: RACK, JOBSET_NAME: "train", REPLICATED_JOB: replicated, JOB_INDEX: str(job),
                   JOB_KEY: key}

    def member(index: int, completion: int, affinity: Manifest | None) -> Manifest:
        return _gpu_pod(index, f"{replicated}{job}-{completion}", {**labels, COMPLETION_INDEX: str(completion)},
                        {**annotations, COMPLETION_INDEX: str(completion)}, affinity, tolerate)

    leader = member(leader_index, 0, _exclusive(JOB_KEY, key, RACK, all_namespaces=True))
    followers = tuple(member(follower_index + c - 1, c, None) for c in range(1, size))
    stand_in = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": job_name, "labels": labels,
                                                                      "annotations": annotations},
                "spec": {"suspend": True, "parallelism": size, "completions": size, "completionMode": "Indexed",
                         "template": {"metadata": {"labels": labels, "annotations": annotations},
                                      "spec": {"restartPolicy": "Never", "containers": leader["spec"]["containers"]}}}}
    return leader, Followers(leader["metadata"]["name"], RACK, followers), stand_in


def jobset_racks(seed: int) -> Scenario:
    """m racks of 4 nodes and m of 2 (one 8-GPU pod per node); a JobSet with m jobs of 4 pods, then m of
    2, each job exclusive on a rack.

    JobSet's webhook gives each job's leader (completion index 0) required affinity to its own job
    key and anti-affinity to every other, on the rack label, and admits the followers only once the
    leader is scheduled, with a nodeSelector on its rack. One at a time, the 4-pod jobs' leaders take
    the 2-node racks (their larger nodes score higher), which hold half of each such job; the 2-pod
    jobs then take 4-node racks. Placing each leader where its whole job fits places every pod.
    """
    m = int(np.random.default_rng([seed, 6]).integers(2, 4))
    jobs = [("big", j, 4) for j in range(m)] + [("small", j, 2) for j in range(m)]
    leaders, groups, stand_ins = [], [], []
    follower_index = len(jobs)
    for i, (replicated, j, size) in enumerate(jobs):
        leader, followers, stand_in = jobset_job(i, follower_index, replicated, j, size)
        follower_index += size - 1
        leaders.append(leader)
        groups.append(followers)
        stand_ins.append(stand_in)
    expected = Expected(4 * m, 6 * m, "one at a time the 4-pod jobs' leaders take the 2-node racks, stranding "
                        "half of each; kubeplace places each leader where its whole job fits, holding room for "
                        "the followers its Job's parallelism says will come, and followers exist only for placed "
                        "leaders")
    notes = ("a suspended Job per job stands in for the Jobs JobSet creates (its parallelism is the job's size); "
             "suspended, so that the Job controller creates no pods: the bench creates them as JobSet's "
             "webhook shapes them",)
    return Scenario("jobset-racks", f"{m} racks of 4 + {m} racks of 2 nodes (8 GPUs each); JobSet with {m} jobs of "
                    f"4 pods, then {m} of 2, exclusive per rack", tuple(gpu_racks(m)), tuple(leaders), notes,
                    followers=tuple(groups), objects=tuple(stand_ins), expected=expected)


# --------------------------------------------------------------------------- (7) LWS groups


def lws_group(first: int, lws: str, group: int, size: int, tolerate: bool = False) -> list[Manifest]:
    """One group of LeaderWorkerSet ``lws`` with subgroup-exclusive topology on racks and one subgroup
    (subGroupSize = size): leader and workers all carry affinity to their subgroup key and
    anti-affinity to every other, and are created together (startupPolicy LeaderCreated)."""
    leader_name = f"{lws}-{group}"
    subgroup_key = sha1(f"{leader_name}/0")  # LWS's genGroupUniqueKey(leader name, subgroup index)
    labels = {LWS_NAME: lws, LWS_GROUP_INDEX: str(group), LWS_GROUP_KEY: sha1(f"lws/{leader_name}"),
              LWS_SUBGROUP_INDEX: "0", LWS_SUBGROUP_KEY: subgroup_key}
    annotations = {LWS_SIZE: str(size), LWS_SUBGROUP_SIZE: str(size), LWS_SUBGROUP_EXCLUSIVE: RACK}
    affinity = _exclusive(LWS_SUBGROUP_KEY, subgroup_key, RACK, all_namespaces=False)
    pods = []
    for worker in range(size):
        extra = {LWS_LEADER_NAME: leader_name} if worker else {}
        pods.append(_gpu_pod(first + worker, f"{lws}{group}-{worker}", {**labels, LWS_WORKER_INDEX: str(worker)},
                             {**annotations, **extra}, affinity, tolerate))
    return pods


def lws_pods(first: int, m: int, tolerate: bool = False) -> list[Manifest]:
    """LWS ``big`` (m groups of 4), then LWS ``small`` (m groups of 2), group by group."""
    pods: list[Manifest] = []
    for lws, size in (("big", 4), ("small", 2)):
        for group in range(m):
            pods += lws_group(first + len(pods), lws, group, size, tolerate)
    return pods


def lws_racks(seed: int) -> Scenario:
    """m racks of 4 nodes and m of 2 (one 8-GPU pod per node); LeaderWorkerSets of m groups of 4, then
    m groups of 2, every pod carrying its group's rack exclusivity.

    The first pod of each group may go anywhere (the kube-scheduler's rule for the first pod of a
    self-affine group); one at a time it takes a larger node of a 2-node rack, and the rest of a
    4-pod group then finds room for one more. Placed as groups, every group fits.
    """
    m = int(np.random.default_rng([seed, 7]).integers(2, 4))
    expected = Expected(4 * m, 6 * m, "one at a time each 4-pod group starts in a 2-node rack and strands "
                        "half; kubeplace places each group in a rack that holds it")
    notes = ("LWS with subgroup-exclusive topology and one subgroup per group: every pod carries the "
             "affinities and all are pending together. (With group-exclusive topology, LWS creates the "
             "workers only once the leader is scheduled, pinned by a nodeSelector: the jobset-racks shape.)",)
    return Scenario("lws-racks", f"{m} racks of 4 + {m} racks of 2 nodes (8 GPUs each); LWS groups: {m} of 4, "
                    f"then {m} of 2, exclusive per rack", tuple(gpu_racks(m)), tuple(lws_pods(0, m)), notes,
                    expected=expected)


# --------------------------------------------------------------------------- (8) mixed


def mixed_rules(seed: int) -> Scenario:
    """A general pool (3 zones x 2 nodes of 8 CPU) and tainted GPU racks (2 of 4 nodes, 2 of 2) in the
    same zones: 3 plain batch pods (2 CPU, no rules), then the HA web tier (h = 1), then LWS groups
    (2 of 4, 2 of 2).

    One at a time, the batch pods and the web and api replicas leave every general node with less
    than the 6 CPU a db replica needs, and two LWS groups strand half their pods. Placed together,
    each batch pod shares a node with a db replica or a web and api pair, and every group fits.
    One size whatever the seed.
    """
    batch = [pod(i, "batch", 2000, 4096) for i in range(3)]
    for p in batch:
        p["spec"]["nodeSelector"] = {POOL: "general"}
    web = ha_pods(len(batch), 1)
    gpu = lws_pods(len(batch) + len(web), 2, tolerate=True)
    nodes = [*web_pool(2, {POOL: "general"}), *gpu_racks(2, taint=True)]
    expected = Expected(3 + 6 + 8, 24, "batch pods and web/api replicas leave no general node 6 CPU for db; two "
                        "LWS groups strand half their pods; kubeplace places all")
    return Scenario("mixed-rules", "general pool 3 zones x 2 nodes + 4 GPU racks; 3 batch pods, HA web (3 web, 3 api, "
                    "3 db), LWS groups (2 of 4, 2 of 2)", tuple(nodes), (*batch, *web, *gpu), expected=expected)


RULE_SCENARIOS: dict[str, Callable[[int], Scenario]] = {
    "ha-web": ha_web,
    "jobset-racks": jobset_racks,
    "lws-racks": lws_racks,
    "mixed-rules": mixed_rules,
}
