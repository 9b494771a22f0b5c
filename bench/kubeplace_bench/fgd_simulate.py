"""The FGD paper's protocol (``bench.fgd_protocol``) through ``kubeplace simulate``'s engine:
``kubeplace bench fgd-protocol --via simulate``.

The run's nodes become Node manifests renamed as the authors' simulator renames them,
``"%04d-" + name`` with the seeded prefixes, so the smallest name among equal scores (the tie
rule of ``simulate.policies``) is the seeded order; its pods become a trace, in the run's order,
that never leaves. With ``at_once`` every pod arrives at second 0, named ``p<index>-<name>`` so
that the scheduling queue (priority, creation time, then name) holds them in the run's order and
one cycle tries each once, one at a time; without it, one pod arrives per second and each has a
cycle of its own. Either way a pod that does not fit is retried only on an event that may help
it, and nothing leaves: each is tried once, as in the protocol. The typical pods are the
original list's (``Setup.typical``).
"""

from __future__ import annotations

from collections.abc import Sequence

from kubeplace.models.config import Configuration, Profile, SolverSettings
from kubeplace.serve.settings import ServeSettings
from kubeplace.simulate.cluster import Cluster
from kubeplace.simulate.engine import Result, simulate
from kubeplace.simulate.policies.typical import TaskDistribution
from kubeplace.simulate.schedulers import Setup
from kubeplace.simulate.trace import Arrival, Trace
from kubeplace_bench.fgd_protocol import ProtocolRun, alloc_at, rows_of
from kubeplace_bench.gpusim import NodeSpec
from kubeplace_bench.openb import NAMESPACE, kube_name, node_manifest, pod_manifest


def protocol_world(nodes: Sequence[NodeSpec], run: ProtocolRun, at_once: bool = True) -> tuple[Cluster, Trace]:
    renamed = [NodeSpec(f"{run.tie_rank[k]:04d}-{kube_name(n.name)}", n.cpu, n.mem, n.gpus, n.model)
               for k, n in enumerate(nodes)]
    width = len(str(max(len(run.pods) - 1, 0)))
    arrivals = tuple(Arrival(0.0 if at_once else float(j), None,
                             pod_manifest(p, name=f"p{j:0{width}d}-{kube_name(p.name)}"[:253]))
                     for j, p in enumerate(run.pods))
    return Cluster(tuple(node_manifest(n) for n in renamed), (), "fgd-protocol"), Trace(arrivals, "fgd-protocol")


def simulate_run(policy: str, nodes: Sequence[NodeSpec], run: ProtocolRun, typical: TaskDistribution,
                 at_once: bool = True) -> Result:
    cluster, trace = protocol_world(nodes, run, at_once)
    setup = Setup(Configuration(), Profile(), SolverSettings(workers=1), ServeSettings(bind_workers=1),
                  typical=typical)
    return simulate(cluster, trace, policy, setup, latency=0.0)


def placed_indices(run: ProtocolRun, result: Result) -> list[int]:
    """The run's pods the simulation bound (by the index their names carry)."""
    prefix = f"{NAMESPACE}/p"
    return sorted(int(r.key[len(prefix):].split("-", 1)[0]) for r in result.pods if r.start is not None)


def run_policy_in_simulate(policy: str, nodes: Sequence[NodeSpec], run: ProtocolRun, typical: TaskDistribution,
                           at_once: bool = True) -> float:
    """``policy`` of ``simulate.policies`` on the run through ``simulate``: the protocol's figure.
    A placement the independent verifier refused fails loudly (it never should)."""
    result = simulate_run(policy, nodes, run, typical, at_once)
    if result.summary.refused:
        raise AssertionError(f"the verifier refused {result.summary.refused} placements of {policy}")
    return alloc_at(*rows_of(run.pods, placed_indices(run, result)), sum(n.gpus for n in nodes))
