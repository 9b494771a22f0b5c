"""RuntimeClasses (node.k8s.io/v1) and the RuntimeClass admission controller's merge into a pod.

On a cluster the API server admits a pod with ``spec.runtimeClassName`` by merging its
RuntimeClass (plugin/pkg/admission/runtimeclass): ``scheduling.nodeSelector`` into the pod's
node selector (a key with another value refuses the pod), ``scheduling.tolerations`` appended
to its tolerations, and ``overhead.podFixed`` set as ``spec.overhead`` (a pod that already sets
another overhead is refused). A pod read from a file that has not been through the API server
(Helm output, ``--dry-run=client``, a hand-written manifest: no ``metadata.resourceVersion``)
is merged the same way here, so that a kata pod is not planned onto a plain node; a pod the
API server stored already carries the merge and is read as it is.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from kubeplace.kube.errors import InputError, expect_list, expect_mapping, expect_name, expect_str, expect_string_map
from kubeplace.kube.requests import parse_resource_list
from kubeplace.kube.taints import parse_tolerations

RawObject = Mapping[str, Any]
RUNTIME_CLASS = ("node.k8s.io", "RuntimeClass")


@dataclass(frozen=True)
class RuntimeClass:
    """What admission merges into a pod, kept raw (the pod's parser reads it with the pod)."""

    name: str
    node_selector: Mapping[str, str] = field(default_factory=dict)
    tolerations: tuple[Mapping[str, Any], ...] = ()
    overhead: Mapping[str, Any] | None = None
    """``overhead.podFixed`` as written; None without one."""


def parse_runtime_classes(objects: Iterable[tuple[RawObject, str]],
                          label: Callable[[RawObject], str]) -> dict[str, RuntimeClass]:
    """RuntimeClass name -> what admission merges; a malformed one is an InputError naming it."""
    classes: dict[str, RuntimeClass] = {}
    for obj, where in objects:
        try:
            runtime_class = _parse(obj)
        except InputError as error:
            raise error.located(file=where, obj=label(obj)) from None
        classes[runtime_class.name] = runtime_class
    return classes


def _parse(obj: RawObject) -> RuntimeClass:
    name = expect_name(expect_mapping(obj.get("metadata"), "metadata"))
    scheduling = expect_mapping(obj.get("scheduling"), "scheduling")
    tolerations = expect_list(scheduling.get("tolerations"), "scheduling.tolerations")
    parse_tolerations(tolerations, "scheduling.tolerations")
    overhead = obj.get("overhead")
    pod_fixed = None
    if overhead is not None:
        pod_fixed = expect_mapping(expect_mapping(overhead, "overhead").get("podFixed"), "overhead.podFixed")
        parse_resource_list(pod_fixed, "overhead.podFixed")
    return RuntimeClass(name, expect_string_map(scheduling.get("nodeSelector"), "scheduling.nodeSelector"),
                        tuple(expect_mapping(t, "scheduling.tolerations[]") for t in tolerations), pod_fixed)


def is_stored(pod: RawObject) -> bool:
    """Whether the API server has stored this pod (it has a ``resourceVersion``): admission ran."""
    metadata = pod.get("metadata")
    return isinstance(metadata, Mapping) and bool(metadata.get("resourceVersion"))


def admitted(pod: RawObject, classes: Mapping[str, RuntimeClass]) -> tuple[RawObject, str]:
    """``pod`` with its RuntimeClass merged as admission merges it, and "" or why it cannot be
    placed: a RuntimeClass the input lacks (the API server refuses such a pod; kubeplace does not
    guess what it would add). A conflict admission refuses is an InputError naming the field."""
    spec = expect_mapping(pod.get("spec"), "spec")
    name = expect_str(spec.get("runtimeClassName"), "spec.runtimeClassName")
    if not name or is_stored(pod):
        return pod, ""
    runtime_class = classes.get(name)
    if runtime_class is None:
        return pod, f'pod rejected: RuntimeClass "{name}" not found (spec.runtimeClassName, not in the input)'
    merged = dict(spec)
    if runtime_class.overhead is not None:
        merged["overhead"] = _overhead(spec, runtime_class.overhead)
    if runtime_class.node_selector:
        merged["nodeSelector"] = _node_selector(spec, runtime_class.node_selector)
    if runtime_class.tolerations:
        own = expect_list(spec.get("tolerations"), "spec.tolerations")
        merged["tolerations"] = [*own, *(t for t in runtime_class.tolerations if t not in own)]
    return {**pod, "spec": merged}, ""


def _overhead(spec: Mapping[str, Any], pod_fixed: Mapping[str, Any]) -> Mapping[str, Any]:
    own = spec.get("overhead")
    if own and parse_resource_list(own, "spec.overhead") != parse_resource_list(pod_fixed, "overhead.podFixed"):
        raise InputError("pod rejected: Pod's Overhead doesn't match RuntimeClass's defined Overhead",
                         field="spec.overhead")
    return pod_fixed


def _node_selector(spec: Mapping[str, Any], runtime_selector: Mapping[str, str]) -> dict[str, str]:
    selector = dict(expect_string_map(spec.get("nodeSelector"), "spec.nodeSelector"))
    for key, value in runtime_selector.items():
        if selector.get(key, value) != value:
            raise InputError(f"conflict: runtimeClass.scheduling.nodeSelector[{key}] = {value}; "
                             f"pod.spec.nodeSelector[{key}] = {selector[key]}", field=f"spec.nodeSelector.{key}")
        selector[key] = value
    return selector
