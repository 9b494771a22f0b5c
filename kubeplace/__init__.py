"""kubeplace: places pending Kubernetes pods by solving one optimisation problem over the batch.

The code lives in the repository's top-level folders (``kube/``, ``models/``, ``solver/``,
``plan/``, ``serve/``, ``rebalance/``, ``cli/``, ``report/``), in the order data flows through them; they are
installed and imported only under this package (``kubeplace.solver``, ...), so that no generic
name such as ``cli`` or ``models`` lands in site-packages. User plugins import
:mod:`kubeplace.plugins` and nothing else. The benchmarks and the control-plane launcher are the
separate package ``kubeplace_bench``, which the scheduler's runtime never imports.
"""
