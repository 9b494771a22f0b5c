"""Synthetic traces: Poisson arrivals of jobs drawn from a mix of pod shapes, some of them gangs.

Jobs arrive at ``rate`` per second (exponential gaps), run for an exponential time of mean
``mean_duration`` seconds, and are one pod, or with probability ``gang_fraction`` a gang of one
of ``gang_sizes`` pods (all arriving together, minMember the gang's size). Seeded: the same
arguments write the same trace.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from kubeplace.kube.errors import INT32_MAX, InputError, expect_label_value
from kubeplace.kube.objects import CPU, GPU, MEMORY
from kubeplace.kube.quantity import resource_amount
from kubeplace.simulate.names import MAX_TRACE_PODS
from kubeplace.simulate.trace import API_VERSION, KIND, RawObject


@dataclass(frozen=True)
class Shape:
    name: str
    cpu: str
    memory: str
    gpus: int
    weight: float


DEFAULT_SHAPES = (Shape("small", "500m", "1Gi", 0, 6), Shape("large", "4", "16Gi", 0, 2),
                  Shape("gpu", "8", "32Gi", 1, 1))


def parse_shape(text: str) -> Shape:
    """``NAME=CPU/MEMORY[/GPUS]:WEIGHT``, e.g. ``big=8/64Gi/2:1``: the name a label value (the
    pods' ``app``), CPU and memory Kubernetes quantities, GPUs a whole number, the weight a
    finite number > 0."""
    try:
        name, rest = text.split("=", 1)
        resources, weight = rest.rsplit(":", 1)
        parts = resources.split("/")
        gpus = int(parts[2]) if len(parts) == 3 else 0
        share = float(weight)
        if len(parts) not in (2, 3) or not name or not math.isfinite(share) or share <= 0 or not 0 <= gpus <= INT32_MAX:
            raise ValueError
        expect_label_value(name, "--shape")
        resource_amount(CPU, parts[0])
        resource_amount(MEMORY, parts[1])
        return Shape(name, parts[0], parts[1], gpus, share)
    except (ValueError, InputError):  # (a QuantityError is a ValueError)
        raise InputError(f"bad shape {text!r}", field="--shape",
                         expected="NAME=CPU/MEMORY[/GPUS]:WEIGHT, NAME a label value, CPU and MEMORY quantities, "
                                  "WEIGHT > 0") from None


def _template(shape: Shape) -> RawObject:
    requests = {"cpu": shape.cpu, "memory": shape.memory}
    resources: RawObject = {"requests": requests}
    if shape.gpus:
        requests[GPU] = str(shape.gpus)
        resources["limits"] = {GPU: str(shape.gpus)}
    return {"metadata": {"labels": {"app": shape.name}},
            "spec": {"containers": [{"name": "main", "image": "registry.local/job:1", "resources": resources}]}}


def generate(jobs: int, rate: float, mean_duration: float, shapes: Sequence[Shape] = DEFAULT_SHAPES,
             gang_fraction: float = 0.0, gang_sizes: Sequence[int] = (4,), seed: int = 0) -> RawObject:
    """A trace document (``simulate.trace``) of ``jobs`` jobs."""
    numbers = (rate, mean_duration, gang_fraction)
    if jobs < 0 or not all(math.isfinite(x) for x in numbers) or rate <= 0 or mean_duration <= 0 or not shapes \
            or not 0 <= gang_fraction <= 1 or not gang_sizes or min(gang_sizes) < 1:
        raise InputError("bad generator arguments", expected="jobs >= 0, rate > 0, mean duration > 0, shapes, "
                         "gang fraction in [0, 1], gang sizes >= 1")
    most = jobs * (max(gang_sizes) if gang_fraction > 0 else 1)
    if most > MAX_TRACE_PODS:
        raise InputError(f"{jobs} jobs of up to {most // max(jobs, 1)} pods make up to {most} pods",
                         field="--jobs" if jobs > MAX_TRACE_PODS else "--gang-sizes",
                         expected=f"at most {MAX_TRACE_PODS} pods in a trace")
    rng = np.random.default_rng(seed)
    weights = np.array([s.weight for s in shapes], dtype=np.float64)
    at = 0.0
    items: list[RawObject] = []
    for job in range(jobs):
        at += float(rng.exponential(1.0 / rate))
        shape = shapes[int(rng.choice(len(shapes), p=weights / weights.sum()))]
        duration = max(1.0, round(float(rng.exponential(mean_duration)), 3))
        item: RawObject = {"arrivalSeconds": round(at, 3), "durationSeconds": duration, "template": shape.name,
                           "name": f"job-{job:05d}"}
        if rng.random() < gang_fraction:
            size = int(gang_sizes[int(rng.integers(len(gang_sizes)))])
            item |= {"count": size, "gang": {"name": f"job-{job:05d}", "minMember": size}}
        items.append(item)
    return {"apiVersion": API_VERSION, "kind": KIND, "templates": {s.name: _template(s) for s in shapes},
            "items": items}
