"""The real Karpenter of ``kubeplace bench capacity``: its cached build, its kwok controller run
against the bench's control plane, and how kubeplace's consolidation is given the cluster
without Karpenter's own consolidation acting beside it.

kubeplace's consolidation honours what Karpenter's honours (a NodePool's ``consolidateAfter``,
``Never`` included, its budgets, ``karpenter.sh/do-not-disrupt``), so nothing in the cluster can
keep Karpenter's consolidation off while kubeplace's acts: a pool that Karpenter leaves alone
kubeplace leaves alone too. The bench therefore keeps the fragmented pools at ``consolidateAfter:
Never`` and, for kubeplace's turn (:func:`kubeplace_consolidates`), stops Karpenter's controller
and sets the pools to ``0s``, the pool as it should be consolidated; kubeplace reads and plans
on that. Once kubeplace has planned (it takes its ``kubeplace-rebalance`` Lease before its
first write) or has ended, the pools go back to ``Never`` and Karpenter is started again, to
launch kubeplace's new NodeClaims, terminate the nodes whose NodeClaims kubeplace deleted, and
launch nodes for the evicted pods that fit nowhere: it never sees the pools consolidatable.
"""

from __future__ import annotations

import contextlib
import re
import subprocess
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

from kubeplace_bench.capacity_workloads import NODE_CLASS
from kubeplace_bench.controlplane import (
    ApiHttp,
    ApiRefused,
    Component,
    ControlPlane,
    free_port,
    http_ok,
    wait_for,
    wait_ready,
)
from kubeplace_bench.controlplane_binaries import ControlPlaneError, ControlPlaneUnavailable, checkout_file

KARPENTER_API, KWOK_API = "/apis/karpenter.sh/v1", "/apis/karpenter.kwok.sh/v1alpha1"
LEASE_NAME = "kubeplace-rebalance"
"""The Lease ``rebalance --apply`` takes before its first write (kubeplace.rebalance.apply)."""
POLL_SECONDS = 0.2
"""How often the Lease is read while kubeplace plans."""


def karpenter_build(build: bool) -> Path:
    """The directory of the cached Karpenter build (bin/karpenter-kwok, crds/), built first when
    ``build``; ControlPlaneUnavailable saying how to build it otherwise."""
    script = checkout_file(".ci", "build-karpenter")
    result = subprocess.run(["bash", str(script), *([] if build else ["--cached-only"])], capture_output=True,
                            text=True, stdin=subprocess.DEVNULL, check=False)
    if result.returncode == 3 and not build:
        raise ControlPlaneUnavailable(f"Karpenter is not built: run bash {script} once (6-7 minutes), or pass --build")
    if result.returncode != 0:
        raise ControlPlaneError(f"{script} failed: {result.stderr.strip()[-1000:]}")
    return Path(result.stdout.strip().splitlines()[-1])


def karpenter_version() -> str:
    """The ``sigs.k8s.io/karpenter`` version tools/karpenter pins (what .ci/build-karpenter builds)."""
    match = re.search(r"^\s*sigs\.k8s\.io/karpenter (v\S+)", checkout_file("tools", "karpenter", "go.mod").read_text(),
                      re.MULTILINE)
    return match.group(1) if match else "unknown"


class Karpenter:
    """Karpenter's kwok controller against the bench's control plane; stopped and started again
    around kubeplace's consolidation (:func:`kubeplace_consolidates`)."""

    def __init__(self, plane: ControlPlane, build: Path, catalogue_file: Path) -> None:
        self.plane, self.health = plane, free_port()
        self.argv = [str(build / "bin" / "karpenter-kwok")]
        self.env = {"KUBECONFIG": str(plane.admin_kubeconfig), "INSTANCE_TYPES_FILE_PATH": str(catalogue_file),
                    "DISABLE_LEADER_ELECTION": "true", "METRICS_PORT": str(free_port()),
                    "HEALTH_PROBE_PORT": str(self.health), "BATCH_IDLE_DURATION": "1s", "BATCH_MAX_DURATION": "3s"}
        self.component: Component | None = None

    def start(self) -> None:
        self.component = self.plane.launch("karpenter", self.argv, self.env)
        wait_ready(self.component, lambda: http_ok(f"http://127.0.0.1:{self.health}/readyz"), 120)

    def stop(self) -> None:
        if self.component is not None:
            self.component.stop()
            self.component = None


def start_karpenter(plane: ControlPlane, api: ApiHttp, build: Path, catalogue_file: Path) -> Karpenter:
    """Karpenter's CRDs installed and its kwok controller running against ``plane`` (stopped with it)."""
    names = []
    for path in sorted((build / "crds").glob("*.yaml")):
        crd = yaml.safe_load(path.read_text())
        names.append(crd["metadata"]["name"])
        create(api, "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", crd)
    wait_for(lambda: all(_established(api, name) for name in names), 60, f"CRDs {', '.join(names)} established")
    create(api, f"{KWOK_API}/kwoknodeclasses", NODE_CLASS)
    karpenter = Karpenter(plane, build, catalogue_file)
    karpenter.start()
    return karpenter


def _established(api: ApiHttp, name: str) -> bool:
    crd = api.request("GET", f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{name}")
    return any(c.get("type") == "Established" and c.get("status") == "True"
               for c in (crd.get("status") or {}).get("conditions") or [])


def create(api: ApiHttp, path: str, body: Mapping[str, Any]) -> None:
    try:
        api.request("POST", path, body)
    except ApiRefused as refused:
        if refused.status != 409:
            raise


def set_consolidate_after(api: ApiHttp, pools: Sequence[str], value: str) -> None:
    for pool in pools:
        api.request("PATCH", f"{KARPENTER_API}/nodepools/{pool}", {"spec": {"disruption": {"consolidateAfter": value}}})


@contextlib.contextmanager
def kubeplace_consolidates(api: ApiHttp, karpenter: Karpenter, pools: Sequence[str], namespace: str,
                           ended: Callable[[], bool]) -> Iterator[Callable[[], None]]:
    """Karpenter stopped and ``pools`` consolidatable (``consolidateAfter: 0s``) for kubeplace's
    run, which the caller starts inside; the function yielded waits until that run has planned
    (the Lease in ``namespace`` held) or ``ended()``, then hands the cluster back: the pools at
    ``Never`` again and Karpenter running (done on leaving too, whatever happened)."""
    karpenter.stop()
    handed_back = False

    def hand_back() -> None:
        nonlocal handed_back
        if handed_back:
            return
        while not ended() and not _lease_held(api, namespace):
            time.sleep(POLL_SECONDS)
        set_consolidate_after(api, pools, "Never")
        karpenter.start()
        handed_back = True

    try:
        set_consolidate_after(api, pools, "0s")
        yield hand_back
    finally:
        if not handed_back:
            set_consolidate_after(api, pools, "Never")
            karpenter.start()


def _lease_held(api: ApiHttp, namespace: str) -> bool:
    try:
        lease = api.request("GET", f"/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases/{LEASE_NAME}")
    except ApiRefused as refused:
        if refused.status == 404:
            return False
        raise
    return bool((lease.get("spec") or {}).get("holderIdentity"))
