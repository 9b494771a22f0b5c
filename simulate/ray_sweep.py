"""Sweeps on a Ray cluster (``--ray auto|ADDRESS``): one Ray task per case, the results streamed
back as they finish and returned in the sweep's order.

The only module of kubeplace that imports Ray (the optional extra ``kubeplace[ray]``). The
driver reads every input file once (bad input fails before Ray is even reached) and puts each
distinct cluster, trace and setup in Ray's object store, so a worker reads no file: a sweep on a
remote cluster needs its files on the driver only. Every case runs the solver with one worker
(``sweep.setup_of``), so a case gives the same result on Ray as in a local process.

A worker lost mid-case (its process killed, its node gone) is a system failure: Ray runs the
task again, up to ``RETRIES`` times, and only the run that returns counts. Ctrl-C returns the
tasks that finished; the others end with the Ray connection when kubeplace made it, or are
cancelled when the connection is the caller's. (Cancelling by force while the tasks' workers
take the terminal's SIGINT too can abort the driver inside Ray: the same task completed twice.)
"""

from __future__ import annotations

import logging
import socket
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import ray
import ray.exceptions

from kubeplace.kube.errors import InputError, KubeplaceError
from kubeplace.simulate.engine import Case
from kubeplace.simulate.sweep import CaseSpec, read_inputs, simulate_case

AUTO = "auto"
"""Attach to the Ray started on this machine (``ray start``, ``RAY_ADDRESS``), else start one."""
CONNECT_TIMEOUT = 5.0
"""Seconds to reach a Ray address before giving up with one line."""
RETRIES = 3
"""Runs of a case again after its worker was lost (Ray's task retries)."""

_simulate_task = ray.remote(num_cpus=1, max_retries=RETRIES, retry_exceptions=False)(simulate_case)


def run_cases_on_ray(specs: Sequence[CaseSpec], address: str, workers: int | None = None,
                     on_done: Callable[[int, Case], None] | None = None) -> list[Case | None]:
    """The cases' results in ``specs`` order, one Ray task each on the cluster at ``address``
    (``auto``: this machine's, started with ``workers`` CPUs when there is none). On Ctrl-C the
    cases finished by then are returned, the others None (left to the connection's shutdown,
    or cancelled when the connection is the caller's)."""
    inputs = read_inputs(specs)
    results: list[Case | None] = [None] * len(specs)
    with connected(address, workers) as owned:
        stored: dict[int, Any] = {}

        def ref(value: object) -> Any:
            if id(value) not in stored:
                stored[id(value)] = ray.put(value)
            return stored[id(value)]

        pending = {_simulate_task.remote(spec, *(ref(v) for v in case_inputs)): k
                   for k, (spec, case_inputs) in enumerate(zip(specs, inputs, strict=True))}
        try:
            while pending:
                (ready,), _ = ray.wait(list(pending), num_returns=1)
                k = pending.pop(ready)
                case = results[k] = _result(ready, specs[k])
                if on_done is not None:
                    on_done(k, case)
        except KeyboardInterrupt:
            if not owned:
                _cancel(pending)
        except BaseException:
            if not owned:
                _cancel(pending)
            raise
    return results


def _cancel(pending: Iterable[Any]) -> None:
    for left in pending:
        ray.cancel(left, force=True)


def _result(ready: Any, spec: CaseSpec) -> Case:
    try:
        case: Case = ray.get(ready)
    except (ray.exceptions.WorkerCrashedError, ray.exceptions.NodeDiedError, ray.exceptions.RaySystemError) as e:
        raise KubeplaceError(f"Ray lost case {spec.label or spec.scheduler!r} {RETRIES + 1} times: "
                             f"{str(e).splitlines()[0]}") from None
    return case


@contextmanager
def connected(address: str, workers: int | None) -> Iterator[bool]:
    """Connected to Ray for the block: the connection already made in this process (a test's,
    an application's) if there is one (yields False), else ``address``'s, shut down after the
    block with the tasks it left (yields True). An address that does not answer fails first,
    with one line."""
    if address != AUTO:
        _check_reachable(address)
    if ray.is_initialized():
        yield False
        return
    quiet: dict[str, Any] = {"logging_level": logging.ERROR, "log_to_driver": False}
    if address == AUTO:
        try:
            ray.init(address=AUTO, **quiet)
        except ConnectionError:
            ray.init(address="local", num_cpus=workers, include_dashboard=False,
                     _system_config={"worker_niceness": 0}, **quiet)
    else:
        try:
            ray.init(address=address, **quiet)
        except (ConnectionError, TimeoutError, ValueError, ray.exceptions.RayError) as e:
            raise InputError(f"cannot connect to Ray at {address}: {str(e).splitlines()[0] if str(e) else e!r}",
                             field="--ray") from None
    try:
        yield True
    finally:
        ray.shutdown()


def _check_reachable(address: str) -> None:
    """One line (an :class:`InputError`) unless ``host:port`` (or ``ray://host:port``) accepts a
    TCP connection within ``CONNECT_TIMEOUT`` seconds."""
    host, _, port = address.removeprefix("ray://").rpartition(":")
    if not host or not port.isdigit():
        raise InputError(f"bad address {address!r}", field="--ray", expected="auto, ray://HOST:PORT or HOST:PORT")
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=CONNECT_TIMEOUT).close()
    except OSError as e:
        raise InputError(f"cannot reach Ray at {address} within {CONNECT_TIMEOUT:g} s: {e.strerror or e}",
                         field="--ray") from None
