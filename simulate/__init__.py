"""``kubeplace simulate``: replays a workload trace on a cluster in simulated time with kubeplace's
own ``serve`` cycle and the baseline schedulers, and measures allocation and queueing over time."""
