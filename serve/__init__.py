"""``kubeplace serve``: a long-running scheduler over the batch planner.

:mod:`serve.informer` keeps a copy of the cluster current (list + watch), :mod:`serve.queue`
batches pending pods and backs off the unplaceable ones, :mod:`serve.loop` plans, verifies and
binds each batch, :mod:`serve.leader` makes sure only one replica binds, :mod:`serve.events` and
:mod:`serve.metrics` tell the cluster and Prometheus what happened.
"""
