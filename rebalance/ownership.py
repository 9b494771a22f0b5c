"""Which controller owns a node, and so whether ``rebalance --consolidate`` may remove it and how.

Deleting a Node object does not stop its machine: the machine keeps running (and billed) and
the controller that launched it is left with a machine it no longer sees. So a node is removed
only through the controller that owns it:

- Karpenter: a node labelled ``karpenter.sh/nodepool`` that a NodeClaim owns (its
  ``status.providerID`` is the node's ``spec.providerID``, or, without one, its
  ``status.nodeName`` is the node): kubeplace deletes the NodeClaim and Karpenter drains and
  terminates the machine. These are the only nodes Karpenter's own disruption considers
  (``StateNode.ValidateNodeDisruptable``: "node isn't managed by karpenter" without a NodeClaim).
- Another controller's group (an EKS managed node group, a GKE node pool, an AKS agent pool, an
  eksctl node group, a Cluster API MachineDeployment) only when the user opts the
  group in (``--node-group KIND/NAME``): for Cluster API the Machine is annotated
  ``cluster.x-k8s.io/delete-machine`` and its MachineDeployment scaled down, so that its
  MachineSet deletes that Machine; for the others the node is drained, left cordoned, and the
  command that removes its machine from its group is printed.
- Control-plane nodes (label or taint ``node-role.kubernetes.io/control-plane``, or the legacy
  ``master``) never; nor a node no controller is known to own.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from kubeplace.kube.errors import InputError
from kubeplace.kube.karpenter import NODEPOOL_LABEL
from kubeplace.kube.objects import Node, NodeClaim

CONTROL_PLANE_KEYS = ("node-role.kubernetes.io/control-plane", "node-role.kubernetes.io/master")
"""Labels and taint keys of a control-plane node (kubeadm's, and the legacy one)."""
KARPENTER = "karpenter"
CAPI = "capi"
CAPI_GROUP = "cluster.x-k8s.io"
CAPI_MACHINE_ANNOTATION = f"{CAPI_GROUP}/machine"
CAPI_NAMESPACE_ANNOTATION = f"{CAPI_GROUP}/cluster-namespace"
CAPI_DEPLOYMENT_LABEL = f"{CAPI_GROUP}/deployment-name"
CAPI_DELETE_ANNOTATION = f"{CAPI_GROUP}/delete-machine"
"""On a Machine: its MachineSet deletes it first when scaled down."""
SCALE_DOWN_DISABLED = "cluster-autoscaler.kubernetes.io/scale-down-disabled"
"""The cluster-autoscaler's annotation: this node is never scaled down; kubeplace keeps it too."""


@dataclass(frozen=True)
class GroupKind:
    """A kind of node group another controller manages, found by a label naming the group."""

    kind: str
    label: str
    what: str


GROUP_KINDS = (
    GroupKind("eks", "eks.amazonaws.com/nodegroup", "EKS managed node group"),
    GroupKind("eksctl", "alpha.eksctl.io/nodegroup-name", "eksctl node group"),
    GroupKind("gke", "cloud.google.com/gke-nodepool", "GKE node pool"),
    GroupKind("aks", "kubernetes.azure.com/agentpool", "AKS agent pool"),
)
KINDS = (KARPENTER, CAPI, *(g.kind for g in GROUP_KINDS))
OPT_IN_KINDS = (CAPI, *(g.kind for g in GROUP_KINDS))


@dataclass(frozen=True)
class Owner:
    """The controller a node belongs to: ``kind`` (``karpenter``, ``capi``, ``eks``...) and the
    group's ``name`` (NodePool, MachineDeployment, node group); ``claim`` the Karpenter
    NodeClaim, ``machine`` the Cluster API Machine (``NAMESPACE/NAME``)."""

    kind: str
    name: str
    claim: str = ""
    machine: str = ""

    @property
    def group(self) -> str:
        """As ``--node-group`` names it: ``KIND/NAME``."""
        return f"{self.kind}/{self.name}"

    @property
    def what(self) -> str:
        if self.kind == KARPENTER:
            return f"Karpenter NodePool {self.name}"
        if self.kind == CAPI:
            return f"Cluster API MachineDeployment {self.machine.split('/')[0]}/{self.name}"
        return f"{next(g.what for g in GROUP_KINDS if g.kind == self.kind)} {self.name}"


def control_plane(node: Node) -> bool:
    """Labelled or tainted as a control-plane node (any value, any effect)."""
    return any(key in node.labels for key in CONTROL_PLANE_KEYS) or any(
        taint.key in CONTROL_PLANE_KEYS for taint in node.taints)


def owner_of(node: Node, annotations: Mapping[str, str], claims: Sequence[NodeClaim],
             machines: Mapping[str, Mapping[str, str]]) -> Owner | str:
    """The node's owner, or why none is known (a reason line without the node's name).
    ``machines``: Cluster API Machines, ``NAMESPACE/NAME`` -> labels."""
    pool = node.labels.get(NODEPOOL_LABEL, "")
    claim = _claim_of(node, claims)
    if pool:
        if claim is None:
            return (f"labelled {NODEPOOL_LABEL} {pool} but no NodeClaim owns it (Karpenter does not disrupt it "
                    "either); kubeplace never deletes a Node")
        return Owner(KARPENTER, pool, claim=claim.name)
    if claim is not None:
        return f"its NodeClaim {claim.name} has no label {NODEPOOL_LABEL} (Karpenter does not disrupt it either)"
    machine = annotations.get(CAPI_MACHINE_ANNOTATION, "")
    if machine:
        key = f"{annotations.get(CAPI_NAMESPACE_ANNOTATION) or 'default'}/{machine}"
        if key not in machines:
            return f"Cluster API Machine {key} is not in the input: its MachineDeployment is unknown"
        deployment = machines[key].get(CAPI_DEPLOYMENT_LABEL, "")
        if not deployment:
            return f"Cluster API Machine {key} belongs to no MachineDeployment"
        return Owner(CAPI, deployment, machine=key)
    for group in GROUP_KINDS:
        if node.labels.get(group.label):
            return Owner(group.kind, node.labels[group.label])
    return ("no provisioner is known to own it (no NodeClaim, node group label or Cluster API Machine); "
            "deleting its Node would leave its machine running")


def _claim_of(node: Node, claims: Sequence[NodeClaim]) -> NodeClaim | None:
    """The NodeClaim of the node, matched as Karpenter's cluster state matches them: by provider
    ID; by name when the node or the claim has none (a claim read from files)."""
    for claim in claims:
        if node.provider_id and claim.provider_id:
            if claim.provider_id == node.provider_id:
                return claim
        elif claim.node_name == node.name:
            return claim
    return None


def skip_reason(node: Node, annotations: Mapping[str, str], owner: Owner | str, opted_in: frozenset[str]) -> str:
    """Why consolidation may not remove the node whatever its pods, or "" when it may."""
    if control_plane(node):
        return "control-plane node, never removed"
    if isinstance(owner, str):
        return owner
    if owner.kind == KARPENTER:
        return ""
    if owner.group not in opted_in:
        return f"managed by {owner.what}; pass --node-group {owner.group} to consider it"
    if annotations.get(SCALE_DOWN_DISABLED, "").lower() == "true":
        return f'annotated {SCALE_DOWN_DISABLED}: "true"'
    return ""


def removal_command(node: Node, owner: Owner) -> str:
    """What removes the machine of a drained node of an opted-in group other than Cluster API
    (printed, never run): everything the node's provider ID and labels say filled in, ``<...>``
    only for what they do not."""
    if owner.kind == "gke":
        return _gke_command(node, owner.name)
    if owner.kind == "aks":
        return _aks_command(node, owner.name)
    return _aws_command(node)


AWS_ZONE = re.compile(r"^([a-z]{2}(?:-[a-z]+)+-\d+)(?:-[a-z0-9-]+)?[a-z]$")
"""An AWS availability zone (``us-east-1a``, a Local Zone ``us-west-2-lax-1a``): its region first."""


def _aws_command(node: Node) -> str:
    """EKS and eksctl: the instance from ``aws:///ZONE/INSTANCE``, the region from its zone."""
    parts = node.provider_id.removeprefix("aws://").strip("/").split("/") if node.provider_id else []
    instance = parts[-1] if parts and parts[-1] else "<the node's instance ID>"
    zone = parts[0] if len(parts) == 2 else node.labels.get("topology.kubernetes.io/zone", "")
    region = match.group(1) if (match := AWS_ZONE.match(zone)) else ""
    return (f"aws autoscaling terminate-instance-in-auto-scaling-group --instance-id {instance} "
            f"--should-decrement-desired-capacity{f' --region {region}' if region else ''}")


GKE_INSTANCE = re.compile(r"^(gke-.+-[0-9a-f]{8})-[a-z0-9]{4}$")
"""A GKE node pool's instance: ``gke-CLUSTER-POOL-HASH-XXXX``, of the managed instance group
``gke-CLUSTER-POOL-HASH-grp`` (GKE names both so)."""


def _gke_command(node: Node, pool: str) -> str:
    """GKE: project, zone and instance from ``gce://PROJECT/ZONE/INSTANCE``, the managed instance
    group from the instance's name."""
    parts = node.provider_id.removeprefix("gce://").split("/") if node.provider_id.startswith("gce://") else []
    project, zone, instance = parts if len(parts) == 3 else (
        "<project>", node.labels.get("topology.kubernetes.io/zone") or "<zone>", node.name)
    group = f"{match.group(1)}-grp" if (match := GKE_INSTANCE.match(instance)) else (
        f"<the managed instance group of node pool {pool}>")
    return (f"gcloud compute instance-groups managed delete-instances {group} --instances {instance} "
            f"--project {project} --zone {zone}")


AZURE_SCALE_SET = re.compile(r"^azure:///subscriptions/([^/]+)/resourceGroups/([^/]+)/providers/"
                             r"Microsoft\.Compute/virtualMachineScaleSets/", re.IGNORECASE)
AKS_NODE_GROUP = re.compile(r"^MC_([^_]+)_([^_]+)_([^_]+)$", re.IGNORECASE)
"""AKS's default node resource group, ``MC_<resource group>_<cluster>_<location>``: read only when
no part holds an underscore (otherwise the split is ambiguous)."""


def _aks_command(node: Node, pool: str) -> str:
    """AKS: the subscription and node resource group from the scale set's provider ID (or the
    ``kubernetes.azure.com/cluster`` label), the cluster's resource group and name from the node
    resource group's default name."""
    scale_set = AZURE_SCALE_SET.match(node.provider_id)
    node_group = scale_set.group(2) if scale_set else node.labels.get("kubernetes.azure.com/cluster", "")
    named = AKS_NODE_GROUP.match(node_group)
    group, cluster = (named.group(1), named.group(2)) if named else ("<resource group>", "<cluster>")
    subscription = f" --subscription {scale_set.group(1)}" if scale_set else ""
    return (f"az aks nodepool delete-machines --nodepool-name {pool} --machine-names {node.name} "
            f"--resource-group {group} --cluster-name {cluster}{subscription}")


def parse_node_groups(values: Sequence[str]) -> frozenset[str]:
    """``--node-group KIND/NAME`` values; InputError naming the flag."""
    out = set()
    for value in values:
        kind, _, name = value.partition("/")
        if kind not in OPT_IN_KINDS or not name or "/" in name:
            raise InputError(f"{value!r} is not a node group", field="--node-group",
                             expected=f"KIND/NAME, KIND one of {', '.join(OPT_IN_KINDS)} (Karpenter's nodes "
                                      "need no opt-in)")
        out.add(value)
    return frozenset(out)
