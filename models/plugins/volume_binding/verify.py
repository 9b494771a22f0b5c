"""VolumeBinding's independent verifier check, over the whole plan (the kube-scheduler's
volumebinding plugin). Imports only ``kubeplace.kube`` and the other rules' checks.

Written out plainly from the typed objects (``kube.objects``), sharing no code
with ``models/``: a placed pod's claims must all exist and be usable (bound, or unbound of a
WaitForFirstConsumer class), a bound claim's volume must admit the node (node affinity on
labels); an unbound one must get a free static volume that matches it and admits the node, never
one another claim of the plan gets, or be provisioned there (once: its other pods on that node) (a provisioner, allowed
topologies, the CSI driver on the node, capacity). With the plan's volume choices, each choice is
checked; without them, that such volumes exist (a matching).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass

from kubeplace.kube.objects import Node, Pod, SelectorTerm
from kubeplace.kube.plan_view import Finding, PlanView
from kubeplace.kube.storage_objects import ClaimChoice, PersistentVolume, PersistentVolumeClaim, Storage
from kubeplace.models.plugins.node_affinity.verify import requirement_holds, selector_matches


@dataclass(frozen=True)
class _Placed:
    pod: Pod
    node: Node
    claims: tuple[tuple[str, PersistentVolumeClaim | None, bool], ...]  # (name, claim, ephemeral)


def check_plan(view: PlanView, _args: None) -> Iterator[Finding]:
    """What breaks the rule in the plan; the volumes it chose for the unbound claims
    (``view.volume_choices``) are checked when given."""
    storage = view.snapshot.storage
    placed = [_Placed(p.pod, p.node, tuple((v.claim, storage.claim(p.pod.namespace, v.claim), v.ephemeral)
                                           for v in p.pod.volumes))
              for p in view.placements if p.pod.volumes]
    for item in placed:
        yield from (_at(item, detail) for detail in _claims(item, storage))
    yield from _unbound(placed, storage, view.volume_choices)


def _at(item: _Placed, detail: str) -> Finding:
    return item.pod.namespace, item.pod.name, item.node.name, detail


def _claims(item: _Placed, storage: Storage) -> Iterator[str]:
    """Each claim exists and can be used; a bound one's volume admits the node."""
    for name, claim, ephemeral in item.claims:
        if claim is None:
            yield f"claim {name} does not exist"
        elif claim.phase == "Lost":
            yield f"claim {name} has lost its volume {claim.volume_name}"
        elif claim.deleting:
            yield f"claim {name} is being deleted"
        elif ephemeral and claim.owner_uid != item.pod.uid:
            yield f"claim {name} of an ephemeral volume is not owned by the pod"
        elif claim.volume_name and "pv.kubernetes.io/bind-completed" in claim.annotations:
            yield from _bound(item, claim, storage.volumes.get(claim.volume_name))
        elif not _waits_for_consumer(claim, storage) or claim.volume_name:
            yield f"claim {name} is not bound and its class binds it immediately"
        elif claim.annotations.get("volume.kubernetes.io/selected-node", item.node.name) != item.node.name:
            yield (f"claim {name} is being provisioned for node "
                   f"{claim.annotations['volume.kubernetes.io/selected-node']}")


def _bound(item: _Placed, claim: PersistentVolumeClaim, volume: PersistentVolume | None) -> Iterator[str]:
    if volume is None:
        yield f"claim {claim.name} is bound to volume {claim.volume_name}, which does not exist"
        return
    if not _affinity_admits(volume.node_affinity, item.node.labels):
        yield f"volume {volume.name} of claim {claim.name}: its node affinity excludes the node"


def _waits_for_consumer(claim: PersistentVolumeClaim, storage: Storage) -> bool:
    found = storage.classes.get(claim.storage_class) if claim.storage_class else None
    return found is not None and found.binding_mode == "WaitForFirstConsumer"


def _delayed(item: _Placed, storage: Storage) -> list[PersistentVolumeClaim]:
    return [c for _, c, _ in item.claims if c is not None and not c.volume_name and not c.deleting
            and c.phase != "Lost" and _waits_for_consumer(c, storage)]


def _unbound(placed: Sequence[_Placed], storage: Storage,
             choices: Mapping[tuple[str, str], Sequence[ClaimChoice]] | None) -> Iterator[Finding]:
    """Each unbound claim gets a distinct free volume that fits it on its node, or is provisioned
    there; once: another placed pod of the claim must be on that node (the kube-scheduler finds
    the volume it assumed for the first pod pre-bound to the claim, or the claim's node selected)."""
    holder: dict[str, _Placed] = {}  # claim key -> the first placed pod of it
    given: dict[str, str] = {}  # volume -> claim key
    needing: list[tuple[_Placed, PersistentVolumeClaim]] = []
    for item in placed:
        chosen = None if choices is None else {c.claim: c.volume for c in choices.get(
            (item.pod.namespace, item.pod.name), ())}
        for claim in _delayed(item, storage):
            first = holder.setdefault(claim.key, item)
            if first.pod.key != item.pod.key:
                if "ReadWriteOncePod" in claim.access_modes:
                    yield _at(item, f"unbound claim {claim.name} is placed with pod {first.pod.key} too")
                elif first.node.name != item.node.name:
                    yield _at(item, f"unbound claim {claim.name} is bound for pod {first.pod.key} on node "
                                    f"{first.node.name}")
                continue
            if chosen is None:
                if not _provisionable(claim, storage, item.node):
                    needing.append((item, claim))
                continue
            if claim.name not in chosen:
                yield _at(item, f"no volume chosen for unbound claim {claim.name}")
            elif chosen[claim.name] == "":
                if not _provisionable(claim, storage, item.node):
                    yield _at(item, f"claim {claim.name} cannot be provisioned on the node")
            else:
                volume = storage.volumes.get(chosen[claim.name])
                problem = _unusable(claim, volume, item.node, chosen[claim.name])
                if problem:
                    yield _at(item, problem)
                elif given.setdefault(chosen[claim.name], claim.key) != claim.key:
                    yield _at(item, f"volume {chosen[claim.name]} is chosen for claim "
                                                    f"{given[chosen[claim.name]]} too")
    yield from _matching(needing, storage)


def _unusable(claim: PersistentVolumeClaim, volume: PersistentVolume | None, node: Node, name: str) -> str:
    """Why ``claim`` cannot bind to ``volume`` for a pod on ``node`` ("" when it can)."""
    if volume is None:
        return f"volume {name} chosen for claim {claim.name} does not exist"
    ref = volume.claim_ref
    prebound = ref is not None and (ref.namespace, ref.name) == (claim.namespace, claim.name) and ref.uid in (
        "", claim.uid)
    if ref is not None and not prebound:
        return f"volume {name} is bound to claim {ref.namespace}/{ref.name}"
    if volume.deleting or volume.capacity < claim.request or volume.volume_mode != claim.volume_mode:
        return f"volume {name} does not fit claim {claim.name} (size, volume mode or being deleted)"
    if volume.attributes_class != claim.attributes_class:
        return f"volume {name} has another volume attributes class than claim {claim.name}"
    if not prebound:
        if volume.phase != "Available" or volume.storage_class != claim.storage_class:
            return f"volume {name} is not an available volume of class {claim.storage_class}"
        if claim.selector is not None and not selector_matches(claim.selector, volume.labels):
            return f"volume {name} does not match the selector of claim {claim.name}"
        if not set(claim.access_modes) <= set(volume.access_modes):
            return f"volume {name} lacks an access mode of claim {claim.name}"
    if not _affinity_admits(volume.node_affinity, node.labels):
        return f"volume {name} chosen for claim {claim.name}: its node affinity excludes the node"
    return ""


def _provisionable(claim: PersistentVolumeClaim, storage: Storage, node: Node) -> bool:
    storage_class = storage.classes.get(claim.storage_class)
    if storage_class is None or storage_class.provisioner in ("", "kubernetes.io/no-provisioner"):
        return False
    topologies = storage_class.allowed_topologies
    if topologies and not any(t.match_expressions and all(requirement_holds(r, node.labels.get(r.key))
                                                          for r in t.match_expressions) for t in topologies):
        return False
    driver_name = storage_class.provisioner
    if any(d.name == driver_name for csi in storage.csi_nodes.values() for d in csi.drivers):
        csi_node = storage.csi_nodes.get(node.name)
        on_node = [d for d in (csi_node.drivers if csi_node else ()) if d.name == driver_name]
        if not on_node or any(k not in node.labels for k in on_node[0].topology_keys):
            return False
    driver = storage.csi_drivers.get(driver_name)
    if claim.request and driver is not None and driver.storage_capacity:
        return any(c.storage_class == storage_class.name and c.node_topology is not None
                   and all(requirement_holds(r, node.labels.get(r.key)) for r in c.node_topology)
                   and (c.maximum_volume_size if c.maximum_volume_size is not None else c.capacity or 0)
                   >= claim.request for c in storage.capacities)
    return True


def _matching(needing: Sequence[tuple[_Placed, PersistentVolumeClaim]], storage: Storage) -> Iterator[Finding]:
    """Claims that need a static volume: a distinct one each (augmenting paths)."""
    by_class: dict[str, list[PersistentVolume]] = {}
    for volume in storage.volumes.values():
        by_class.setdefault(volume.storage_class, []).append(volume)
    candidates = [sorted(by_class.get(c.storage_class, []) + _prebound_to(c, storage), key=lambda v: v.name)
                  for _, c in needing]
    options = [[v.name for v in volumes if not _unusable(c, v, item.node, v.name)]
               for (item, c), volumes in zip(needing, candidates, strict=True)]
    owner: dict[str, int] = {}

    def assign(k: int, seen: set[str]) -> bool:
        for name in options[k]:
            if name not in seen:
                seen.add(name)
                if name not in owner or assign(owner[name], seen):
                    owner[name] = k
                    return True
        return False

    for k, (item, claim) in enumerate(needing):
        if not assign(k, set()):
            yield _at(item, f"no free volume left for unbound claim {claim.name} on the node "
                                             "and it cannot be provisioned there")


def _prebound_to(claim: PersistentVolumeClaim, storage: Storage) -> list[PersistentVolume]:
    """Volumes of another class whose claimRef names the claim (a pre-binding ignores the class)."""
    return [v for v in storage.volumes.values() if v.claim_ref is not None and v.storage_class != claim.storage_class
            and (v.claim_ref.namespace, v.claim_ref.name) == (claim.namespace, claim.name)]


def _affinity_admits(terms: tuple[SelectorTerm, ...] | None, labels: Mapping[str, str]) -> bool:
    """A volume's required node affinity, on the node's labels only (a field requirement sees no name)."""
    if terms is None:
        return True
    return any((t.match_expressions or t.match_fields) and all(requirement_holds(r, labels.get(r.key))
                                                               for r in t.match_expressions)
               and all(requirement_holds(r, "") for r in t.match_fields) for t in terms)
