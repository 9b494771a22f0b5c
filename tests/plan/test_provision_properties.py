"""Property tests of ``plan --provision`` on small random catalogues and batches: every plan is
verified by the independent verifier, and its new nodes never cost more than Karpenter's way
(first-fit decreasing, the cheapest type per node) pays for the same pods."""

from __future__ import annotations

from typing import Any

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kubeplace.models.config import Configuration, Profile, SolverSettings
from kubeplace.plan.provision import make_provision_plan
from kubeplace.solver.budget import Budget
from kubeplace.solver.cutting_stock import UNLIMITED, Items, Offers, cost_of, placed
from kubeplace.solver.cutting_stock_columns import holds_all, provision
from tests.builders import node, pod, snapshot_of
from tests.plan.test_provision import catalogue, instance_type, node_pool, offering, provisioned

EXAMPLES = settings(max_examples=40, deadline=None, derandomize=True, database=None,
                    suppress_health_check=[HealthCheck.too_slow])
ZONES = ("a", "b")
ZONE = "topology.kubernetes.io/zone"


@st.composite
def catalogues(draw: Any) -> list[dict[str, Any]]:
    types = []
    for k in range(draw(st.integers(1, 4))):
        cpu = draw(st.sampled_from([1, 2, 4, 8]))
        memory = cpu * draw(st.sampled_from([2, 4, 8]))
        offers = [offering(zone, draw(st.integers(1, 40)) / 100, capacity_type)
                  for zone in ZONES for capacity_type in ("on-demand", "spot") if draw(st.booleans())]
        types.append(instance_type(f"t{k}", cpu, memory, *(offers or [offering("a", 0.5)])))
    return types


RULES = ("none", "zone spread", "hostname anti-affinity", "zone gang", "existing node")


@st.composite
def batches(draw: Any) -> list[Any]:
    """Groups of like pods, each with one rule of :data:`RULES` (an existing node with room for a
    few pods of any shape besides)."""
    objects: list[Any] = []
    for k in range(draw(st.integers(1, 4))):
        cpu = draw(st.sampled_from(["250m", "500m", "1", "1500m", "3"]))
        memory = draw(st.sampled_from(["512Mi", "1Gi", "4Gi"]))
        rule = draw(st.sampled_from(RULES))
        count = draw(st.integers(1, 5))
        for i in range(count):
            builder = pod(f"s{k}-{i}").cpu(cpu).memory(memory).label("app", f"s{k}")
            if rule == "zone spread":
                builder = builder.spec("topologySpreadConstraints", [{
                    "maxSkew": 1, "topologyKey": ZONE, "whenUnsatisfiable": "DoNotSchedule",
                    "labelSelector": {"matchLabels": {"app": f"s{k}"}}}])
            elif rule == "hostname anti-affinity":
                term = {"topologyKey": "kubernetes.io/hostname", "labelSelector": {"matchLabels": {"app": f"s{k}"}}}
                builder = builder.spec("affinity", {"podAntiAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": [term]}})
            elif rule == "zone gang":
                builder = (builder.label("kubeplace.io/gang", f"g{k}").annotation("kubeplace.io/gang-min-member",
                                                                                  str(count))
                           .annotation("kubeplace.io/gang-topology-key", ZONE))
            objects.append(builder)
        if rule == "existing node":
            objects.append(node(f"old-{k}").cpu("2").memory("4Gi").label(ZONE, "a"))
    return objects


@EXAMPLES
@given(catalogues(), batches())
def test_every_plan_is_verified_and_never_dearer_than_the_greedy(types: list[dict[str, Any]],
                                                                  pods: list[Any]) -> None:
    planned = provisioned(node_pool(), *pods, types=catalogue(*types), seconds=2)  # asserts it is verified
    provision = planned.plan.provision
    assert provision is not None
    assert provision.cost <= provision.greedy_cost
    assert provision.bound is None or provision.bound <= provision.cost


@st.composite
def models(draw: Any) -> tuple[Items, Offers]:
    n_items, n_offers = draw(st.integers(1, 5)), draw(st.integers(1, 6))
    demand = np.array([[draw(st.integers(1, 8)) * 250, draw(st.integers(1, 8)) * 512] for _ in range(n_items)],
                      dtype=np.int64)
    capacity = np.array([[draw(st.sampled_from([1000, 2000, 4000])), draw(st.sampled_from([2048, 4096, 8192]))]
                         for _ in range(n_offers)], dtype=np.int64)
    eligible = np.array([[draw(st.booleans()) for _ in range(n_offers)] for _ in range(n_items)], dtype=np.bool_)
    items = Items(demand, np.array([draw(st.integers(1, 12)) for _ in range(n_items)], dtype=np.int64),
                  np.ones(n_items, dtype=np.int64),
                  np.array([draw(st.sampled_from([1, 3, UNLIMITED])) for _ in range(n_items)], dtype=np.int64),
                  eligible)
    limit = draw(st.sampled_from([UNLIMITED, 2, 5]))
    offers = Offers(capacity, np.array([draw(st.integers(1, 100)) for _ in range(n_offers)], dtype=np.int64) * 10**7,
                    np.zeros(n_offers, dtype=np.int64), np.ones((n_offers, 1), dtype=np.int64),
                    np.array([[limit]], dtype=np.int64))
    return items, offers


@settings(max_examples=150, deadline=None, derandomize=True, database=None)
@given(models())
def test_the_model_keeps_every_node_within_its_offer_and_beats_the_greedy(model: tuple[Items, Offers]) -> None:
    items, offers = model
    result = provision(items, offers, Budget.of(2.0))
    assert holds_all(result.bins, items, offers) and holds_all(result.greedy, items, offers)
    assert (placed(result.bins, items.n_items) <= items.count).all()
    assert len(result.bins) <= int(offers.room[0, 0])
    weight, greedy_weight = placed(result.bins, items.n_items) @ items.weight, placed(result.greedy,
                                                                                      items.n_items) @ items.weight
    assert weight >= greedy_weight
    assert weight > greedy_weight or cost_of(result.bins, offers) <= cost_of(result.greedy, offers)
    if result.bound is not None:
        assert result.bound <= result.cost + 1


@settings(max_examples=25, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(catalogues(), batches(), st.sampled_from([1.0, 1.5, 3.0]))
def test_every_pod_is_placed_once_whatever_the_time_limit(types: list[dict[str, Any]], pods: list[Any],
                                                         seconds: float) -> None:
    """Two workers on the clock: the time-dependent paths (the emulation cut short, the
    solver's answer or a seed's) never place a pod twice nor fail."""
    planned = make_provision_plan(snapshot_of(node_pool(), *pods), catalogue(*types), Configuration(), Profile(),
                                  SolverSettings(time_limit=seconds, workers=2))
    keys = [f"{p.namespace}/{p.name}" for p in planned.plan.placements]
    assert len(keys) == len(set(keys))
    assert not planned.violations
