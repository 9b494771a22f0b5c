"""A pod's effective resource request, computed from its raw manifest.

Mirrors ``PodRequests`` in k8s.io/component-helpers/resource/helpers.go::

    request = max(sum(app containers) + sum(sidecars),
                  max over ordinary init container i of (init_i + sidecars declared before i))
    pod-level spec.resources.requests replace that for cpu, memory and hugepages-*
    (defaulted as the API server does: from the containers' requests, else from pod-level limits)
    request += spec.overhead

plus the API server's defaulting (a limit without a request is also the request), which pod
files written by hand may lack. Every resource is counted, extended ones included, and
``pods: 1`` is always there. Functions take the camelCase dicts of YAML/JSON manifests.

With ``use_status_resources`` (``UseStatusResources``, what the kube-scheduler 1.36 counts for a
pod bound to a node, since in-place pod resize is GA), the resources the kubelet reports for the
pod weigh in too, as ``determineEffectiveRequests`` weighs them: for each app container and each
sidecar that has ``status.(init)containerStatuses[].resources``, the larger of its spec requests,
``resources.requests`` (actuated) and ``allocatedResources`` (allocated), or of the last two
alone while the resize is Infeasible (condition ``PodResizePending`` with reason ``Infeasible``:
the kubelet keeps running the old size); ordinary init containers by their spec; pod-level
requests likewise from ``status.resources.requests`` and ``status.allocatedResources``
(InPlacePodLevelResourcesVerticalScaling, beta and on in 1.36) once ``status.resources`` is there.
A pending pod is counted by its spec: the API server drops the status of a pod it creates.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from kubeplace.kube.dra import ContainerRequests, is_extended_resource
from kubeplace.kube.errors import InputError, expect_list, expect_mapping, expect_str
from kubeplace.kube.quantity import QuantityError, check_amount, resource_amount

Resources = dict[str, int]

SIDECAR_RESTART_POLICY = "Always"
"""An init container with ``restartPolicy: Always`` is a sidecar: it keeps running."""
CONTAINER_RESTART_POLICIES = (SIDECAR_RESTART_POLICY, "OnFailure", "Never")
"""What the API server accepts for a container's own ``restartPolicy`` (spelled exactly)."""


HUGEPAGES_PREFIX = "hugepages-"
OVERCOMMITTABLE_POD_LEVEL = ("cpu", "memory")
"""The pod-level resources whose request defaults to the containers' (``IsOvercommitAllowed``)."""


def is_pod_level_resource(resource: str) -> bool:
    """Resources that pod-level ``spec.resources`` may set (PodLevelResources)."""
    return resource in OVERCOMMITTABLE_POD_LEVEL or resource.startswith(HUGEPAGES_PREFIX)


def parse_resource_list(raw: object, field: str) -> Resources:
    """``{"cpu": "500m", "memory": "1Gi"}`` -> ``{"cpu": 500, "memory": 1073741824}``."""
    amounts: Resources = {}
    for resource, value in expect_mapping(raw, field).items():
        try:
            amounts[str(resource)] = resource_amount(str(resource), value)
        except QuantityError as error:
            raise InputError(error.problem, field=f"{field}.{resource}", expected=error.expected) from None
    return amounts


def resource_requests(resources: object, field: str) -> Resources:
    """Requests of a ``resources`` block, a limit standing in for a missing request. A resource
    that cannot be overcommitted (extended resources, hugepages) with a request other than its
    limit is refused, as ``ValidateResourceRequirements`` refuses it."""
    block = expect_mapping(resources, field)
    limits = parse_resource_list(block.get("limits"), f"{field}.limits")
    own = parse_resource_list(block.get("requests"), f"{field}.requests")
    for resource, amount in own.items():
        if resource in limits and amount != limits[resource] and not is_overcommittable(resource):
            raw = expect_mapping(block.get("limits"), f"{field}.limits")
            raise InputError(f"must be equal to {resource} limit of {raw[resource]}", field=f"{field}.requests",
                             expected="a request equal to the limit for a resource that cannot be overcommitted")
    return {**limits, **own}


def is_overcommittable(resource: str) -> bool:
    """``IsOvercommitAllowed``: a native resource (no domain, or a kubernetes.io one), not hugepages."""
    native = "/" not in resource or "kubernetes.io/" in resource
    return native and not resource.startswith(HUGEPAGES_PREFIX)


def container_requests(container: Mapping[str, Any], field: str) -> Resources:
    return resource_requests(container.get("resources"), f"{field}.resources")


def container_limits_of(container: Mapping[str, Any], field: str) -> Resources:
    resources = expect_mapping(container.get("resources"), f"{field}.resources")
    return parse_resource_list(resources.get("limits"), f"{field}.resources.limits")


ContainerAmounts = Callable[[Mapping[str, Any], str], Resources]
"""A container's requests or limits, read from its manifest (and the field path naming it)."""


def is_sidecar(init_container: Mapping[str, Any]) -> bool:
    return init_container.get("restartPolicy") == SIDECAR_RESTART_POLICY


def pod_requests(pod: Mapping[str, Any], use_status_resources: bool = False) -> Resources:
    """The effective request of a pod manifest for every resource it asks for, plus ``pods: 1``;
    with ``use_status_resources``, as the kube-scheduler counts a pod bound to a node (the
    module's docstring).

    Raises :class:`InputError` with the field path (``spec.containers[0].resources...``,
    ``status.containerStatuses[0].allocatedResources...``) on a malformed spec, status or
    quantity; the caller adds the file and object.
    """
    spec = expect_mapping(pod.get("spec"), "spec")
    status = PodStatusResources.of(pod) if use_status_resources else None
    requests = _aggregate(spec, container_requests if status is None else status.container_requests)
    if spec.get("resources") is not None:  # pod-level requests, defaulted from the spec's containers
        if status is None:
            requests.update(_pod_level_requests(spec, requests))
        else:
            requests.update(status.pod_level_requests(_pod_level_requests(spec, _aggregate(spec, container_requests))))
    requests = _sum([requests, parse_resource_list(spec.get("overhead"), "spec.overhead")])
    requests["pods"] = 1
    return {resource: _representable(resource, amount) for resource, amount in sorted(requests.items())
            if amount or resource == "pods"}


def extended_requests(spec: Mapping[str, Any]) -> tuple[ContainerRequests, ...]:
    """Each container's requests of extended resources, init containers first (the order and
    indices the kube-scheduler names an extended resource claim's requests by)."""
    out = []
    init = expect_list(spec.get("initContainers"), "spec.initContainers")
    containers = expect_list(spec.get("containers"), "spec.containers")
    for index, raw in enumerate([*init, *containers]):
        field = f"spec.initContainers[{index}]" if index < len(init) else f"spec.containers[{index - len(init)}]"
        container = expect_mapping(raw, field)
        every = container_requests(container, field)
        requests = {r: a for r, a in every.items() if a and is_extended_resource(r)}
        if requests:
            names = sorted(every)
            out.append(ContainerRequests(index, expect_str(container.get("name"), f"{field}.name"),
                                         index >= len(init) or is_sidecar(container), requests,
                                         {r: names.index(r) for r in requests}))
    return tuple(out)


CONTAINER_STATUS_LISTS = ("containerStatuses", "initContainerStatuses")
RESIZE_PENDING = "PodResizePending"
INFEASIBLE = "Infeasible"


@dataclass(frozen=True)
class ReportedResources:
    """What the kubelet reports for a container (or the pod) in its status, read only where it
    reports ``resources`` (the kube-scheduler's ``cs.Resources != nil``)."""

    actuated: Resources
    """``resources.requests``: what the container runs with."""
    allocated: Resources
    """``allocatedResources``: what the kubelet admitted it with."""

    def effective(self, spec: Resources, infeasible: bool) -> Resources:
        """``determineEffectiveRequests``: the larger of spec, actuated and allocated; while the
        resize is Infeasible the spec is not what runs, and only the last two count."""
        reported = _max(self.actuated, self.allocated)
        return reported if infeasible else _max(spec, reported)


@dataclass(frozen=True)
class PodStatusResources:
    """The resources a pod's status reports, by container name, and whether its resize is Infeasible."""

    containers: Mapping[str, ReportedResources]
    pod: ReportedResources | None
    infeasible: bool

    @staticmethod
    def of(pod: Mapping[str, Any]) -> PodStatusResources:
        status = expect_mapping(pod.get("status"), "status")
        containers: dict[str, ReportedResources] = {}
        for kind in CONTAINER_STATUS_LISTS:  # by name; an init container's status wins, as in the scheduler's map
            for index, raw in enumerate(expect_list(status.get(kind), f"status.{kind}")):
                field = f"status.{kind}[{index}]"
                entry = expect_mapping(raw, field)
                reported = _reported(entry, field)
                name = expect_str(entry.get("name"), f"{field}.name")
                if reported is not None:
                    containers[name] = reported
                else:
                    containers.pop(name, None)
        return PodStatusResources(containers, _reported(status, "status"), _is_resize_infeasible(status))

    def container_requests(self, container: Mapping[str, Any], field: str) -> Resources:
        """An app container's or a sidecar's requests as counted on its node; an ordinary init
        container's are its spec's (it has run to completion)."""
        spec = container_requests(container, field)
        if field.startswith("spec.initContainers") and not is_sidecar(container):
            return spec
        reported = self.containers.get(expect_str(container.get("name"), f"{field}.name"))
        return spec if reported is None else reported.effective(spec, self.infeasible)

    def pod_level_requests(self, spec: Resources) -> Resources:
        """Pod-level requests (``spec``, as defaulted) as counted on the node: each resource set
        there takes its effective value (0 when no list has it) once ``status.resources`` is reported."""
        if self.pod is None or not spec:
            return spec
        effective = self.pod.effective(spec, self.infeasible)
        return {resource: effective.get(resource, 0) for resource in spec}


def _reported(entry: Mapping[str, Any], field: str) -> ReportedResources | None:
    """``resources`` and ``allocatedResources`` of a container status (or of the pod's status),
    None without ``resources``. Every quantity is checked, limits included, as the API server decodes them."""
    allocated = parse_resource_list(entry.get("allocatedResources"), f"{field}.allocatedResources")
    if entry.get("resources") is None:
        return None
    block = expect_mapping(entry.get("resources"), f"{field}.resources")
    parse_resource_list(block.get("limits"), f"{field}.resources.limits")
    return ReportedResources(parse_resource_list(block.get("requests"), f"{field}.resources.requests"), allocated)


def _is_resize_infeasible(status: Mapping[str, Any]) -> bool:
    """``IsPodResizeInfeasible``: the first ``PodResizePending`` condition has reason ``Infeasible``."""
    for index, raw in enumerate(expect_list(status.get("conditions"), "status.conditions")):
        condition = expect_mapping(raw, f"status.conditions[{index}]")
        if expect_str(condition.get("type"), f"status.conditions[{index}].type") == RESIZE_PENDING:
            return expect_str(condition.get("reason"), f"status.conditions[{index}].reason") == INFEASIBLE
    return False


def _representable(resource: str, amount: int) -> int:
    """Each quantity is in range, but a sum of them (containers, sidecars, overhead) may not be."""
    try:
        return check_amount(resource, amount)
    except QuantityError as error:
        raise InputError(f"effective request: {error.problem}", field="spec", expected=error.expected) from None


def _aggregate(spec: Mapping[str, Any], of_container: ContainerAmounts) -> Resources:
    """The containers' requests (or limits) as ``AggregateContainerRequests`` adds them up: the
    app containers and sidecars, or the peak of an init container and the sidecars before it."""
    amounts = _sum(
        of_container(expect_mapping(container, f"spec.containers[{index}]"), f"spec.containers[{index}]")
        for index, container in enumerate(expect_list(spec.get("containers"), "spec.containers"))
    )
    return _max(amounts, _init_containers_amounts(spec, amounts, of_container))


def _init_containers_amounts(spec: Mapping[str, Any], app_amounts: Resources,
                             of_container: ContainerAmounts) -> Resources:
    """Adds the sidecars to ``app_amounts`` in place and returns the init-phase peak."""
    sidecars_so_far: Resources = {}
    init_peak: Resources = {}
    init_containers = expect_list(spec.get("initContainers"), "spec.initContainers")
    for index, raw in enumerate(init_containers):
        field = f"spec.initContainers[{index}]"
        container = expect_mapping(raw, field)
        _check_restart_policy(container, field)
        own = of_container(container, field)
        if is_sidecar(container):
            for resource, amount in own.items():
                app_amounts[resource] = app_amounts.get(resource, 0) + amount
            sidecars_so_far = _sum([sidecars_so_far, own])
            while_running = dict(sidecars_so_far)
        else:
            while_running = _sum([own, sidecars_so_far])
        init_peak = _max(init_peak, while_running)
    return init_peak


def _check_restart_policy(container: Mapping[str, Any], field: str) -> None:
    """``always`` is not ``Always``: the API server refuses it, and it would not be a sidecar."""
    policy = container.get("restartPolicy")
    if policy is not None and policy not in CONTAINER_RESTART_POLICIES:
        raise InputError(f"unsupported restartPolicy {policy!r}", field=f"{field}.restartPolicy",
                         expected=", ".join(CONTAINER_RESTART_POLICIES))


def _pod_level_requests(spec: Mapping[str, Any], containers: Resources) -> Resources:
    """Pod-level requests as the API server defaults them (``defaultHugePagePodLimits`` then
    ``defaultPodRequests`` in pkg/apis/core/v1/defaults.go), restricted to the resources allowed
    there: with pod-level limits, a missing cpu or memory request is the containers' aggregate
    request when they ask for it, else the pod-level limit; a missing hugepages request is the
    pod-level limit, which itself defaults to the containers' aggregate hugepages limit."""
    if spec.get("resources") is None:
        return {}
    block = expect_mapping(spec.get("resources"), "spec.resources")
    requests = parse_resource_list(block.get("requests"), "spec.resources.requests")
    limits = parse_resource_list(block.get("limits"), "spec.resources.limits")
    if limits or requests:
        container_limits = _aggregate(spec, container_limits_of)
        for resource, amount in container_limits.items():
            if resource.startswith(HUGEPAGES_PREFIX) and resource not in requests:
                limits.setdefault(resource, amount)
    if limits:
        for resource, amount in containers.items():
            if resource in OVERCOMMITTABLE_POD_LEVEL:
                requests.setdefault(resource, amount)
        for resource, amount in limits.items():
            if is_pod_level_resource(resource):
                requests.setdefault(resource, amount)
    return {resource: amount for resource, amount in requests.items() if is_pod_level_resource(resource)}


def _sum(lists: Iterable[Resources]) -> Resources:
    total: Resources = {}
    for resources in lists:
        for resource, amount in resources.items():
            total[resource] = total.get(resource, 0) + amount
    return total


def _max(first: Resources, second: Resources) -> Resources:
    return {resource: max(first.get(resource, 0), second.get(resource, 0)) for resource in first.keys() | second}
