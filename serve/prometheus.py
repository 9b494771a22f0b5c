"""Prometheus metrics of ``kubeplace serve``, in a registry of their own (two schedulers in one
process, as the tests run them, do not share counters)."""

from __future__ import annotations

from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest, start_http_server

LATENCY_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30, 60, 120, 300, 600)
SOLVE_BUCKETS = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30, 60)
SLI_BUCKETS = tuple(0.01 * 2**k for k in range(20))
"""The kube-scheduler's ``scheduler_pod_scheduling_sli_duration_seconds`` buckets (ExponentialBuckets(0.01, 2, 20))."""
ATTEMPT_BUCKETS = tuple(0.001 * 2**k for k in range(15))
"""The kube-scheduler's ``scheduler_scheduling_attempt_duration_seconds`` buckets (ExponentialBuckets(0.001, 2, 15))."""
ATTEMPTS_LABELLED = 16
"""The SLI's ``attempts`` label counts up to this; a pod bound after more attempts counts under it
(the label's values stay bounded, the kube-scheduler's are not)."""
SCHEDULED, UNSCHEDULABLE, ERROR = "scheduled", "unschedulable", "error"
"""The kube-scheduler's ``result`` label values of an attempt."""


class Metrics:
    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry or CollectorRegistry()
        r = self.registry
        self.pod_latency = Histogram(
            "kubeplace_pod_scheduling_seconds", "From a pod first seen pending to its binding.",
            buckets=LATENCY_BUCKETS, registry=r)
        self.gang_latency = Histogram(
            "kubeplace_gang_scheduling_seconds", "From a gang's first member seen pending to its last binding.",
            buckets=LATENCY_BUCKETS, registry=r)
        self.solve_seconds = Histogram(
            "kubeplace_solve_seconds", "Planning time of one cycle (model, solve, plan).",
            buckets=SOLVE_BUCKETS, registry=r)
        self.cycle_seconds = Histogram(
            "kubeplace_cycle_seconds", "One whole cycle: snapshot, plan, verify, bind.",
            buckets=SOLVE_BUCKETS, registry=r)
        self.sli = Histogram(
            "scheduler_pod_scheduling_sli_duration_seconds",
            "The kube-scheduler's SLI: from a pod first seen pending to its binding, by the attempts it took "
            "(cycles that planned it; the last value counts that many or more).",
            ["attempts"], buckets=SLI_BUCKETS, registry=r)
        self.attempt_seconds = Histogram(
            "scheduler_scheduling_attempt_duration_seconds",
            "The kube-scheduler's attempt latency: from the start of the cycle that planned a pod to its binding "
            "answered (scheduled, error) or its pod found unschedulable, by result and profile (scheduler name).",
            ["result", "profile"], buckets=ATTEMPT_BUCKETS, registry=r)
        self.pods_bound = Counter("kubeplace_pods_bound", "Pods bound.", registry=r)
        self.binds_failed = Counter("kubeplace_binds_failed", "Bindings refused or failed, by outcome.",
                                    ["outcome"], registry=r)
        self.unschedulable = Counter("kubeplace_pods_unschedulable", "Pods a cycle could not place.", registry=r)
        self.gangs_waiting = Gauge("kubeplace_gangs_waiting", "Gangs waiting for members to exist.", registry=r)
        self.gangs_timed_out = Counter("kubeplace_gangs_timed_out", "Gangs that waited past their timeout.",
                                       registry=r)
        self.gangs_below_min = Counter("kubeplace_gangs_below_min_member",
                                       "Gangs left with fewer than minMember bound after a failed binding.",
                                       registry=r)
        self.solver_gap = Gauge("kubeplace_solver_gap", "Relative gap of the last cycle's solve (0 = optimal).",
                                registry=r)
        self.queue_active = Gauge("kubeplace_queue_active_units", "Units (pods or gangs) waiting for a cycle.",
                                  registry=r)
        self.queue_unschedulable = Gauge("kubeplace_queue_unschedulable_units",
                                         "Units backing off or waiting for an event that may help them.", registry=r)
        self.pending_units = Gauge(
            "kubeplace_pending_units", "Units (pods or gangs) in each queue: active, backoff, unschedulable "
            "(the kube-scheduler's scheduler_pending_pods).", ["queue"], registry=r)
        self.leader = Gauge("kubeplace_leader", "1 while this replica holds the lease.", registry=r)
        self.cycles = Counter("kubeplace_cycles", "Scheduling cycles run.", registry=r)
        self.preemption_attempts = Counter(
            "kubeplace_preemption_attempts", "Pods that may preempt left out by the plan without preemption.",
            registry=r)
        self.preemption_victims = Counter("kubeplace_preemption_victims", "Pods deleted or evicted by preemption.",
                                          registry=r)
        self.preemption_wasted = Counter(
            "kubeplace_preemption_wasted_evictions",
            "Victims removed for a pod whose other victims could not be removed (must stay 0).", registry=r)

    def pending(self, queues: dict[str, int]) -> None:
        """Sets the queue gauges from :meth:`serve.queue.SchedulingQueue.pending`."""
        for queue, units in queues.items():
            self.pending_units.labels(queue).set(units)
        self.queue_active.set(queues.get("active", 0))
        self.queue_unschedulable.set(queues.get("backoff", 0) + queues.get("unschedulable", 0))

    def bound(self, waited: float | None, attempts: int) -> None:
        """A pod bound: its wait since first seen pending (None: not seen pending), in serve's own
        latency and the SLI."""
        if waited is not None:
            self.pod_latency.observe(waited)
            self.sli.labels(str(min(max(attempts, 1), ATTEMPTS_LABELLED))).observe(max(0.0, waited))

    def attempted(self, result: str, profile: str, seconds: float, pods: int = 1) -> None:
        """``pods`` scheduling attempts of ``profile`` that ended with ``result`` after ``seconds``."""
        histogram = self.attempt_seconds.labels(result, profile)
        for _ in range(pods):
            histogram.observe(max(0.0, seconds))

    def serve(self, port: int, address: str = "0.0.0.0") -> Any:
        """Serves ``/metrics`` on ``address:port`` from a daemon thread; returns the server."""
        return start_http_server(port, addr=address, registry=self.registry)

    def series(self) -> int:
        """Samples of every metric (a label set of a histogram counts its buckets, sum and count)."""
        return sum(len(family.samples) for family in self.registry.collect())

    def text(self) -> str:
        return generate_latest(self.registry).decode()

    def value(self, name: str, labels: dict[str, str] | None = None) -> float:
        """One sample's current value (tests, logs); 0 when it has none yet."""
        found = self.registry.get_sample_value(name, labels or {})
        return 0.0 if found is None else float(found)
