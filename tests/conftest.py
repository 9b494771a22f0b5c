"""Shared pytest configuration.

The product is imported only as ``kubeplace.*`` (and the benchmarks as ``kubeplace_bench``), so
the test folders (``tests/kube/`` ...) can no longer shadow a product package; ``tests.*`` helpers
are importable because pytest puts the checkout on ``sys.path``, and ``kubeplace_bench`` because it
puts bench/ there (``pythonpath`` in pyproject).
"""

from __future__ import annotations

import time

import pytest

from tests.install.helm import build_helm


def pytest_collection_finish(session: pytest.Session) -> None:
    """Build helm before any test runs when a selected test needs it (marker ``helm``): a cold
    build takes minutes, more than an e2e test's own timeout, and must not count against one."""
    if session.config.option.collectonly or not any(item.get_closest_marker("helm") for item in session.items):
        return
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    say = reporter.write_line if reporter is not None else print
    say("kubeplace: locating helm (.ci/build-helm; a cold build takes a few minutes)")
    started = time.monotonic()
    result = build_helm()
    say(f"kubeplace: helm: {result} ({time.monotonic() - started:.0f}s)")


def _bench_commands_from_this_checkout() -> None:
    """`kubeplace bench`/`openb` in tests, whether or not the kubeplace-bench distribution (which
    adds them through an entry point) is installed: README's test command does not install it,
    and bench/ is on ``sys.path`` anyway. tests/test_packaging.py checks the entry-point lookup."""
    from kubeplace.cli.main import main
    from kubeplace_bench.commands import bench, openb

    main.add_command(bench)
    main.add_command(openb)


_bench_commands_from_this_checkout()
