"""Shared pytest configuration.

The product is imported only as ``kubeplace.*`` (and the benchmarks as ``kubeplace_bench``), so
the test folders (``tests/kube/`` ...) can no longer shadow a product package; ``tests.*`` helpers
are importable because pytest puts the checkout on ``sys.path``, and ``kubeplace_bench`` because it
puts bench/ there (``pythonpath`` in pyproject).
"""


def _bench_commands_from_this_checkout() -> None:
    """`kubeplace bench`/`openb` in tests, whether or not the kubeplace-bench distribution (which
    adds them through an entry point) is installed: README's test command does not install it,
    and bench/ is on ``sys.path`` anyway. tests/test_packaging.py checks the entry-point lookup."""
    from kubeplace.cli.main import main
    from kubeplace_bench.commands import bench, openb

    main.add_command(bench)
    main.add_command(openb)


_bench_commands_from_this_checkout()
