"""Rebalancing: which running pods may move, where they should go, and evicting them safely.

``movable`` decides which pods may move (each exclusion with its reason), ``state`` reads the
cluster (files or API) with PodDisruptionBudgets, ``model`` builds and solves the move-aware
model, ``makeroom`` finds the fewest moves after which a pending pod or gang fits, ``apply``
evicts through the Eviction API, and ``baselines`` emulates the descheduler for comparison.
"""
