"""Extended resources served by DRA (the kube-scheduler's DRAExtendedResource feature, beta and on
by default in 1.36): a pod asks for ``nvidia.com/gpu: 2`` and a DeviceClass with
``extendedResourceName: nvidia.com/gpu`` (or the class ``c`` of ``deviceclass.resource.kubernetes.io/c``)
serves it with its devices, on a node that has no allocatable of that name from a device plugin.

There the pod's request becomes an implicit resource claim (the kube-scheduler's "special"
claim, created at binding with a generated name ``<pod>-extended-resources-...``): one
``ExactCount`` request of the class per container that asks for the resource, named
``container-<i>-request-<j>`` (``i`` the container's index in ``initContainers + containers``,
``j`` the resource's index in the container's sorted requests), with the container's count; an
init container reuses the devices of the containers that outlive it and asks only for the rest,
and of the init containers' requests only the largest is kept (createRequestsAndMappings). The
devices in total are the pod's effective request of the resource. The mappings (container,
resource, request) go to the pod's ``status.extendedResourceClaimStatus``.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence

from kubeplace.kube.dra import EXTENDED_CLAIM, ContainerRequests, DeviceRequest, Devices, RequestMapping, ResourceClaim
from kubeplace.kube.objects import Node, Pod


def mapped_resources(pod: Pod, devices: Devices) -> tuple[str, ...]:
    """The extended resources the pod requests that a DeviceClass serves (sorted)."""
    if not devices.classes:  # (none serves any: every bound pod of every cycle asks this)
        return ()
    asked = {r for c in pod.container_requests for r in c.requests}
    return tuple(sorted(r for r in asked if pod.requests.get(r, 0) > 0 and devices.class_for(r) is not None))


def served_on(resources: Sequence[str], node: Node) -> tuple[str, ...]:
    """Of those, the ones the node serves by DRA: no device plugin gives it any (shouldDelegateResourceToDRA)."""
    return tuple(r for r in resources if node.allocatable.get(r, 0) <= 0)


def extended_claim(pod: Pod, devices: Devices, resources: Collection[str]) -> tuple[ResourceClaim,
                                                                                   tuple[RequestMapping, ...]]:
    """The pod's extended resource claim for ``resources`` and its request mappings."""
    requests: list[DeviceRequest] = []
    mappings: list[RequestMapping] = []
    for resource in sorted(resources):
        device_class = devices.class_for(resource)
        if device_class is None:
            continue
        long_lived: dict[int, DeviceRequest] = {}
        long_mappings: list[RequestMapping] = []
        for container in (c for c in pod.container_requests if c.long_lived):
            request, own = _request(container, resource, device_class.name, [])
            if request is not None:
                long_lived[container.index] = request
            long_mappings += own
        largest: DeviceRequest | None = None
        short_names: set[str] = set()
        short_mappings: list[RequestMapping] = []
        for container in (c for c in pod.container_requests if not c.long_lived):
            reusable = [r for i, r in sorted(long_lived.items()) if i >= container.index]
            request, own = _request(container, resource, device_class.name, reusable)
            if request is not None:
                short_names.add(request.name)
                if largest is None or largest.count < request.count:
                    largest = request
            short_mappings += own
        if largest is not None and len(short_names) > 1:
            short_mappings = [RequestMapping(m.container, m.resource, largest.name)
                              if m.request in short_names else m for m in short_mappings]
        requests += [largest] if largest is not None else []
        requests += [long_lived[i] for i in sorted(long_lived)]
        mappings += long_mappings + short_mappings
    claim = ResourceClaim(pod.namespace, EXTENDED_CLAIM, requests=tuple(sorted(requests, key=lambda r: r.name)),
                          owner_uid=pod.uid, extended=True)
    return claim, tuple(mappings)


def _request(container: ContainerRequests, resource: str, device_class: str,
             reusable: Sequence[DeviceRequest]) -> tuple[DeviceRequest | None, list[RequestMapping]]:
    """createResourceRequestAndMappings: the container's request of the resource beyond what
    ``reusable`` requests give it, and its mappings."""
    wanted = container.requests.get(resource, 0)
    if wanted <= 0:
        return None, []
    mappings = []
    total = 0
    for request in reusable:
        total += request.count
        mappings.append(RequestMapping(container.name, resource, request.name))
        if total >= wanted:
            return None, mappings
    name = f"container-{container.index}-request-{container.positions.get(resource, 0)}"
    mappings.append(RequestMapping(container.name, resource, name))
    return DeviceRequest(name, device_class, count=wanted - total), mappings
