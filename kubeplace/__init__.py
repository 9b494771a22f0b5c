"""kubeplace: places pending Kubernetes pods by solving one optimisation problem over the batch.

The code lives in the repository's top-level folders (``kube/``, ``models/``, ``solver/``,
``plan/``, ``serve/``, ``rebalance/``, ``report/``, ``simulate/``, ``cli/``), in the order data
flows through them; they are installed and imported only under this package
(``kubeplace.solver``, ...), so that no generic name such as ``cli`` or ``models`` lands in
site-packages: the build maps each folder into the package, and in a checkout
:mod:`kubeplace._checkout` finds them. User plugins import :mod:`kubeplace.plugins` and nothing
else. The benchmarks are the separate distribution
``kubeplace-bench`` (``bench/``), which the scheduler's runtime never imports.
"""

import os as _os

from kubeplace import _checkout

_checkout.install(_os.path.dirname(_os.path.abspath(__file__)), __name__)
