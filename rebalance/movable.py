"""Which running pods may be moved (evicted and placed elsewhere), each exclusion with its reason.

A pod is never moved when it is a mirror or static pod, a DaemonSet pod, being deleted,
system-critical (priority >= 2000000000), bare (no controller would recreate it), uses local
storage (emptyDir/hostPath) unless allowed, in the middle of an in-place resize (or one the
kubelet refused), or is excluded by the user (namespace, label
selector, annotation ``kubeplace.io/evict: "false"``). kubeplace also keeps pods whose
placement rules it does not model (volume claims, and the inter-pod rules, which ``plan``
models but the move model does not: required inter-pod (anti-)affinity, hard topology
spread), pods sharing a GPU device (device-level placement is not modelled here) and gang
members (a gang runs all together, in one topology domain when it asks for one: moving members one
by one would break it).

The facts these rules read that :class:`kube.objects.Pod` does not carry (owner, volumes,
static-pod annotations, a resize under way) come from the raw object: :func:`facts_of`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from kubeplace.kube.errors import expect_list, expect_mapping
from kubeplace.kube.gangs import gang_of
from kubeplace.kube.gpu_conventions import DEFAULT_CONVENTIONS, GpuConventions
from kubeplace.kube.objects import MIRROR_ANNOTATION, SOURCE_ANNOTATION, SYSTEM_CRITICAL_PRIORITY, Pod, SpecRule
from kubeplace.kube.requests import pod_requests
from kubeplace.kube.selectors import matches, parse_selector

EVICT_ANNOTATION = "kubeplace.io/evict"
SYSTEM_CRITICAL = SYSTEM_CRITICAL_PRIORITY
LOCAL_VOLUMES = ("emptyDir", "hostPath")

MIRROR = "mirror pod"
STATIC = "static pod"
DAEMONSET = "DaemonSet pod"
DELETING = "being deleted"
CRITICAL = "system-critical priority"
BARE = "bare pod without a controller (nothing would recreate it)"
LOCAL_STORAGE = "local storage"
USER_NAMESPACE = "namespace excluded"
USER_SELECTOR = "excluded by --exclude-selector"
USER_ANNOTATION = f'annotation {EVICT_ANNOTATION}: "false"'
OUT_OF_SCOPE = "outside -n/-l"
NOT_RUNNING = "not running on a known node"
GPU_SHARE = "shares a GPU device (device-level moves not modelled)"
RESOURCE_CLAIMS = "resource claims (their devices are allocated for this node; moving them is not modelled)"
GANG = "member of a gang (evicting one member alone would break the gang)"
RESIZING = ("in-place resize in progress or Infeasible (its node holds other resources for it than its spec "
            "asks; made again elsewhere it would ask its spec)")
INTER_POD_RULES = frozenset({SpecRule.REQUIRED_POD_AFFINITY, SpecRule.REQUIRED_POD_ANTI_AFFINITY,
                             SpecRule.HARD_TOPOLOGY_SPREAD})
"""Rules ``plan`` models and the move model does not: their carriers stay where they run."""


@dataclass(frozen=True)
class PodFacts:
    """What the movability rules read from a raw pod beyond :class:`kube.objects.Pod`."""

    owner_kind: str = ""
    owner_name: str = ""
    owner_uid: str = ""
    mirror: bool = False
    static: bool = False
    local_volumes: tuple[str, ...] = ()
    """``emptyDir:NAME`` / ``hostPath:NAME`` per local volume."""
    resizing: bool = False
    """Bound and counted other than its spec asks: the kubelet still holds the old size of an
    in-place resize, or refused it (Infeasible). Made again elsewhere it would ask its spec."""


def facts_of(raw: Mapping[str, Any]) -> PodFacts:
    metadata = expect_mapping(raw.get("metadata"), "metadata")
    spec = expect_mapping(raw.get("spec"), "spec")
    annotations = expect_mapping(metadata.get("annotations"), "metadata.annotations")
    owner = ("", "", "")
    for item in expect_list(metadata.get("ownerReferences"), "metadata.ownerReferences"):
        ref = expect_mapping(item, "metadata.ownerReferences[]")
        if ref.get("controller") is True or owner == ("", "", ""):
            owner = (str(ref.get("kind") or ""), str(ref.get("name") or ""), str(ref.get("uid") or ""))
    local = []
    for item in expect_list(spec.get("volumes"), "spec.volumes"):
        volume = expect_mapping(item, "spec.volumes[]")
        local += [f"{kind}:{volume.get('name', '?')}" for kind in LOCAL_VOLUMES if kind in volume]
    source = str(annotations.get(SOURCE_ANNOTATION) or "")
    return PodFacts(
        owner_kind=owner[0], owner_name=owner[1], owner_uid=owner[2],
        mirror=MIRROR_ANNOTATION in annotations,
        static=source not in ("", "api") or owner[0] == "Node",
        local_volumes=tuple(local),
        resizing=bool(spec.get("nodeName")) and pod_requests(raw, use_status_resources=True) != pod_requests(raw),
    )


@dataclass(frozen=True)
class Rules:
    """The user's say on which pods may move."""

    exclude_namespaces: frozenset[str] = frozenset()
    exclude_selector: str | None = None
    only_namespaces: frozenset[str] | None = None
    """-n: only pods of these namespaces move (None: every namespace)."""
    only_selector: str | None = None
    """-l: only pods matching this selector move."""
    allow_local_storage: bool = False

    def check(self) -> None:
        """Raises InputError for a malformed selector, before anything else happens."""
        for text in (self.exclude_selector, self.only_selector):
            if text:
                parse_selector(text)


def exclusion(pod: Pod, facts: PodFacts, rules: Rules, node_names: frozenset[str] | None = None,
              gpu: GpuConventions = DEFAULT_CONVENTIONS) -> str:
    """Why ``pod`` must stay where it is; "" when it may move. ``gpu``: the configured GPU
    conventions (a pod with a GPU share request stays)."""
    if facts.mirror:
        return MIRROR
    if facts.static:
        return STATIC
    if facts.owner_kind == "DaemonSet":
        return DAEMONSET
    if pod.deleting:
        return DELETING
    if pod.priority >= SYSTEM_CRITICAL:
        return CRITICAL
    if not facts.owner_kind:
        return BARE
    if not pod.node_name or pod.finished or (node_names is not None and pod.node_name not in node_names):
        return NOT_RUNNING
    if pod.annotations.get(EVICT_ANNOTATION, "").lower() == "false":
        return USER_ANNOTATION
    if pod.namespace in rules.exclude_namespaces:
        return f"{USER_NAMESPACE} ({pod.namespace})"
    if rules.exclude_selector and matches(parse_selector(rules.exclude_selector), pod.labels):
        return USER_SELECTOR
    if rules.only_namespaces is not None and pod.namespace not in rules.only_namespaces:
        return OUT_OF_SCOPE
    if rules.only_selector and not matches(parse_selector(rules.only_selector), pod.labels):
        return OUT_OF_SCOPE
    if facts.local_volumes and not rules.allow_local_storage:
        return f"{LOCAL_STORAGE} ({', '.join(facts.local_volumes)}; --allow-local-storage to move)"
    if pod.unmodelled:
        return f"placement rule not modelled ({', '.join(pod.unmodelled)})"
    inter_pod = sorted(rule.value for rule in pod.spec_rules & INTER_POD_RULES)
    if inter_pod:
        return f"placement rule not modelled when moving pods ({', '.join(inter_pod)})"
    if facts.resizing:
        return RESIZING
    if pod.resource_claims:
        return RESOURCE_CLAIMS
    if any(pod.requests.get(r, 0) for r in gpu.share_resources):
        return GPU_SHARE
    if gang_of(pod) is not None:
        return GANG
    return ""
