"""Shared pytest configuration.

The product is imported only as ``kubeplace.*`` (and the benchmarks as ``kubeplace_bench``), so
the test folders (``tests/kube/`` ...) can no longer shadow a product package; ``tests.*`` helpers
are importable because pytest puts the checkout on ``sys.path`` (``pythonpath`` in pyproject).
"""
