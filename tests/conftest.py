"""Puts the checkout first on ``sys.path``.

Without it, ``tests/kube/`` (a folder without ``__init__.py``, like ``tests/``) can be imported
as a namespace package ``kube`` and shadow the real one once pytest has put ``tests/`` on the
path, and ``tests.builders`` is only importable when pytest is started from the checkout.
"""

from __future__ import annotations

import sys
from pathlib import Path

_CHECKOUT = str(Path(__file__).resolve().parent.parent)
if _CHECKOUT not in sys.path:
    sys.path.insert(0, _CHECKOUT)
