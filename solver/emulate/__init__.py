"""The kube-scheduler, one pod at a time: its queue and filter/score cycle (``scheduler``), its
scores (``scores``) and the per-node state it keeps (``node_state``)."""
