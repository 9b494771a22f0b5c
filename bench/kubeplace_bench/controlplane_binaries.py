"""Where the control-plane binaries come from: the cache that `.ci/build-controlplane`
fills (keyed by the tool modules' go.mod/go.sum and the Go version), never the repository."""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

#: The kubeplace checkout this package is in (bench/kubeplace_bench/ -> the checkout); the
#: benchmarks that start a control plane use its .ci/, tools/ and deploy/ (see checkout_file).
REPO_ROOT = Path(__file__).resolve().parents[2]
BUILD_SCRIPT = REPO_ROOT / ".ci" / "build-controlplane"
KUBE_TOOL_GO_MOD = REPO_ROOT / "tools" / "controlplane" / "kubernetes" / "go.mod"

#: Env var naming a ready bin dir, which skips the build script (and the need for Go).
BIN_DIR_ENV = "KUBEPLACE_CONTROLPLANE_BIN"
#: Env var that, when set to 1, keeps the work dir (logs, certs, kubeconfigs) after the run.
KEEP_WORKDIR_ENV = "KUBEPLACE_E2E_KEEP"

#: kwok only manages nodes carrying this annotation.
KWOK_NODE_ANNOTATION = "kwok.x-k8s.io/node"
KWOK_NODE_ANNOTATION_VALUE = "fake"
#: The identity kubeplace runs as; the name a ServiceAccount kubeplace/kubeplace-system has,
#: so RBAC bindings written for the in-cluster deployment apply to it unchanged.
KUBEPLACE_USER = "system:serviceaccount:kubeplace-system:kubeplace"
ADMIN_USER = "kubeplace-e2e-admin"

SERVICE_CLUSTER_IP_RANGE = "10.0.0.0/24"
BUILD_TIMEOUT_S = 45 * 60
LOG_TAIL_LINES = 40
_PR_SET_PDEATHSIG = 1  # from <linux/prctl.h>


class ControlPlaneError(RuntimeError):
    """The control plane could not be built or started."""


class ControlPlaneUnavailable(ControlPlaneError):
    """A prerequisite (Go, openssl) is missing on this machine: tests skip, or fail on CI."""


# --------------------------------------------------------------------------- binaries


def checkout_file(*parts: str) -> Path:
    """``REPO_ROOT/parts``, which exists only when kubeplace-bench runs from a kubeplace checkout
    (an editable install of bench/); ControlPlaneUnavailable saying so otherwise."""
    path = REPO_ROOT.joinpath(*parts)
    if not path.exists():
        raise ControlPlaneUnavailable(
            f"{'/'.join(parts)} is not here ({path}): this benchmark runs from a kubeplace checkout, "
            "with kubeplace-bench installed from it (pip install -e ./bench)")
    return path


def pinned_kube_version() -> str:
    """The k8s.io/kubernetes version the tool module pins, e.g. ``v1.36.3``."""
    match = re.search(r"^(?:require)?\s*k8s\.io/kubernetes (v\S+)", KUBE_TOOL_GO_MOD.read_text(), re.MULTILINE)
    if match is None:
        raise ControlPlaneError(f"{KUBE_TOOL_GO_MOD} does not require k8s.io/kubernetes")
    return match.group(1)


def locate_binaries(timeout: float = BUILD_TIMEOUT_S) -> Path:
    """Return the bin dir, building the control plane first if the cache is cold."""
    override = os.environ.get(BIN_DIR_ENV)
    if override:
        return _check_bin_dir(Path(override))
    checkout_file(".ci", "build-controlplane")
    go = os.environ.get("GO", "go")
    if shutil.which(go) is None:
        raise ControlPlaneUnavailable(f"the Go toolchain ({go!r}) is not on PATH, so the control plane can't be built")
    with tempfile.TemporaryFile(mode="w+") as log:
        try:
            proc = subprocess.run(
                ["bash", str(BUILD_SCRIPT)],
                stdout=subprocess.PIPE,
                stderr=log,
                stdin=subprocess.DEVNULL,
                text=True,
                timeout=timeout,
                check=False,
            )
        except subprocess.TimeoutExpired as exc:
            raise ControlPlaneError(f"{BUILD_SCRIPT} took more than {timeout:.0f}s") from exc
        if proc.returncode != 0:
            log.seek(0)
            raise ControlPlaneError(f"{BUILD_SCRIPT} failed with exit code {proc.returncode}:\n{_tail(log.read())}")
    lines = proc.stdout.strip().splitlines()
    if not lines:
        raise ControlPlaneError(f"{BUILD_SCRIPT} printed no bin dir")
    return _check_bin_dir(Path(lines[-1]))


def cache_root() -> Path:
    """Where `.ci/build-controlplane` keeps its builds (``$KUBEPLACE_CACHE``, else ``~/.cache/kubeplace``)."""
    return Path(os.environ.get("KUBEPLACE_CACHE") or Path.home() / ".cache" / "kubeplace") / "controlplane"


def cached_binaries() -> Path:
    """The bin dir without ever building: ``$KUBEPLACE_CONTROLPLANE_BIN``, else the newest complete
    build in the cache whose kube-scheduler is the pinned version. Raises ControlPlaneUnavailable
    saying how to build them when there is none (a cold build takes 10-25 minutes)."""
    override = os.environ.get(BIN_DIR_ENV)
    if override:
        return _check_bin_dir(Path(override))
    root = cache_root()
    builds = sorted(root.glob("*/.complete"), key=lambda p: p.stat().st_mtime, reverse=True) if root.is_dir() else []
    wanted = pinned_kube_version() if KUBE_TOOL_GO_MOD.is_file() else None
    for marker in builds:
        bin_dir = marker.parent / "bin"
        with contextlib.suppress(ControlPlaneError):
            _check_bin_dir(bin_dir)
            if wanted is None or _binary_version(bin_dir / "kube-scheduler") == wanted:
                return bin_dir
    raise ControlPlaneUnavailable(
        f"no control plane binaries{f' for Kubernetes {wanted}' if wanted else ''} in {root}: build them once "
        f"with `{BUILD_SCRIPT}` (needs Go >= 1.26, 10-25 minutes), or set {BIN_DIR_ENV} to a bin dir holding "
        "etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kwok and kwok-stages.yaml"
    )


def _binary_version(binary: Path) -> str:
    try:
        proc = subprocess.run([str(binary), "--version"], capture_output=True, text=True, timeout=30, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return ""
    match = re.search(r"v\d+\.\d+\.\S+", proc.stdout)
    return match.group(0) if match else ""


def _check_bin_dir(bin_dir: Path) -> Path:
    needed = [
        "etcd",
        "kube-apiserver",
        "kube-controller-manager",
        "kube-scheduler",
        "kwok",
        "kwok-stages.yaml",
    ]
    missing = [name for name in needed if not (bin_dir / name).is_file()]
    if missing:
        raise ControlPlaneError(f"control plane bin dir {bin_dir} lacks {', '.join(missing)}")
    return bin_dir

def _tail(text: str, lines: int = LOG_TAIL_LINES) -> str:
    return "\n".join(text.splitlines()[-lines:])
