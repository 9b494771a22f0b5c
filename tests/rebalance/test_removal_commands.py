"""The command printed to remove a drained node's machine from its group (rebalance/ownership.py):
everything the node's provider ID and labels say is filled in; ``<...>`` only for what they do not."""

from __future__ import annotations

import pytest

from kubeplace.kube.objects import Node
from kubeplace.rebalance.ownership import Owner, removal_command

GKE = "gke-prod-default-pool-3b0b2bd3-x1c2"
AKS_ID = ("azure:///subscriptions/1234-abcd/resourceGroups/MC_shop_prod-aks_westeurope/providers/"
          "Microsoft.Compute/virtualMachineScaleSets/aks-pool1-28993262-vmss/virtualMachines/3")


@pytest.mark.parametrize("node, owner, command", [
    (Node(GKE, provider_id=f"gce://my-project/europe-west1-b/{GKE}"), Owner("gke", "default-pool"),
     f"gcloud compute instance-groups managed delete-instances gke-prod-default-pool-3b0b2bd3-grp --instances {GKE} "
     "--project my-project --zone europe-west1-b"),
    (Node("custom-name", provider_id="gce://p/us-central1-a/custom-name"), Owner("gke", "pool"),
     "gcloud compute instance-groups managed delete-instances <the managed instance group of node pool pool> "
     "--instances custom-name --project p --zone us-central1-a"),
    (Node(GKE, labels={"topology.kubernetes.io/zone": "europe-west1-b"}), Owner("gke", "default-pool"),
     f"gcloud compute instance-groups managed delete-instances gke-prod-default-pool-3b0b2bd3-grp --instances {GKE} "
     "--project <project> --zone europe-west1-b"),
    (Node("aks-pool1-28993262-vmss000003", provider_id=AKS_ID), Owner("aks", "pool1"),
     "az aks nodepool delete-machines --nodepool-name pool1 --machine-names aks-pool1-28993262-vmss000003 "
     "--resource-group shop --cluster-name prod-aks --subscription 1234-abcd"),
    (Node("aks-x", labels={"kubernetes.azure.com/cluster": "my_custom_node_rg"}), Owner("aks", "x"),
     "az aks nodepool delete-machines --nodepool-name x --machine-names aks-x "
     "--resource-group <resource group> --cluster-name <cluster>"),
    (Node("ip-10-0-0-1", provider_id="aws:///us-west-2-lax-1a/i-0abc"), Owner("eks", "ng"),
     "aws autoscaling terminate-instance-in-auto-scaling-group --instance-id i-0abc "
     "--should-decrement-desired-capacity --region us-west-2"),
    (Node("ip-10-0-0-2", provider_id="aws:///eu-central-1b/i-0def"), Owner("eksctl", "ng"),
     "aws autoscaling terminate-instance-in-auto-scaling-group --instance-id i-0def "
     "--should-decrement-desired-capacity --region eu-central-1"),
    (Node("bare"), Owner("eks", "ng"),
     "aws autoscaling terminate-instance-in-auto-scaling-group --instance-id <the node's instance ID> "
     "--should-decrement-desired-capacity"),
])  # fmt: skip
def test_the_removal_command_says_what_the_node_says(node: Node, owner: Owner, command: str) -> None:
    assert removal_command(node, owner) == command
