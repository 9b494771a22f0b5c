"""NodePorts in the kube-scheduler emulation (``solver.emulate``): per node, whether the pod's
host ports are free of the ports of the pods there (bound, placed, nominated with its priority
or more)."""

from __future__ import annotations

import numpy as np

from kubeplace.kube.objects import Pod
from kubeplace.models.emulated_pods import EmulatedPods
from kubeplace.models.plugins.node_ports.plugin import conflict
from kubeplace.models.problem import BoolArray


def admits(pod: Pod, pods: EmulatedPods) -> BoolArray:
    if not pod.host_ports:
        return np.ones(pods.n, dtype=np.bool_)
    return np.array([not any(conflict(w, u) for w in pod.host_ports for other in here for u in other.host_ports)
                     for here in pods.with_nominated(pod)], dtype=np.bool_)
