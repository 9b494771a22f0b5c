"""A throwaway PKI, static tokens and kubeconfigs for the local control plane."""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

import yaml

from kubeplace_bench.controlplane_binaries import ADMIN_USER, KUBEPLACE_USER, ControlPlaneError, ControlPlaneUnavailable

FRONT_PROXY_CLIENT = "front-proxy-client"


@dataclass(frozen=True)
class Pki:
    """A throwaway CA, the apiserver's serving cert, and the service-account signing key pair."""

    ca_cert: Path
    ca_key: Path
    serving_cert: Path
    serving_key: Path
    sa_key: Path
    sa_pub: Path
    proxy_cert: Path
    """The aggregator's client certificate (CN front-proxy-client), for APIServices such as metrics.k8s.io."""
    proxy_key: Path

    @classmethod
    def in_dir(cls, directory: Path) -> Pki:
        return cls(
            ca_cert=directory / "ca.crt",
            ca_key=directory / "ca.key",
            serving_cert=directory / "apiserver.crt",
            serving_key=directory / "apiserver.key",
            sa_key=directory / "sa.key",
            sa_pub=directory / "sa.pub",
            proxy_cert=directory / "front-proxy-client.crt",
            proxy_key=directory / "front-proxy-client.key",
        )


def _openssl(*args: str, cwd: Path) -> None:
    proc = subprocess.run(["openssl", *args], cwd=cwd, capture_output=True, text=True, timeout=60, check=False)
    if proc.returncode != 0:
        raise ControlPlaneError(f"openssl {' '.join(args)} failed:\n{proc.stderr}")


def generate_pki(directory: Path) -> Pki:
    """Make the certificates and keys with the openssl CLI (no Python crypto package needed)."""
    if shutil.which("openssl") is None:
        raise ControlPlaneUnavailable("the openssl command is not on PATH; it makes the throwaway CA")
    directory.mkdir(parents=True, exist_ok=True)
    _openssl(
        "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2",
        "-keyout", "ca.key", "-out", "ca.crt", "-subj", "/CN=kubeplace-e2e-ca",
        "-addext", "basicConstraints=critical,CA:TRUE",
        "-addext", "keyUsage=critical,keyCertSign,cRLSign",
        cwd=directory,
    )  # fmt: skip
    _openssl(
        "req", "-newkey", "rsa:2048", "-nodes", "-keyout", "apiserver.key",
        "-out", "apiserver.csr", "-subj", "/CN=kube-apiserver",
        cwd=directory,
    )  # fmt: skip
    (directory / "apiserver.ext").write_text(
        "basicConstraints=CA:FALSE\n"
        "keyUsage=critical,digitalSignature,keyEncipherment\n"
        "extendedKeyUsage=serverAuth\n"
        "subjectKeyIdentifier=hash\n"
        "authorityKeyIdentifier=keyid,issuer\n"
        "subjectAltName=IP:127.0.0.1,IP:10.0.0.1,DNS:localhost,DNS:kubernetes,"
        "DNS:kubernetes.default,DNS:kubernetes.default.svc\n"
    )
    _openssl(
        "x509", "-req", "-in", "apiserver.csr", "-CA", "ca.crt", "-CAkey", "ca.key",
        "-CAcreateserial", "-days", "2", "-extfile", "apiserver.ext", "-out", "apiserver.crt",
        cwd=directory,
    )  # fmt: skip
    _openssl(
        "req", "-newkey", "rsa:2048", "-nodes", "-keyout", "front-proxy-client.key",
        "-out", "front-proxy-client.csr", "-subj", f"/CN={FRONT_PROXY_CLIENT}",
        cwd=directory,
    )  # fmt: skip
    (directory / "front-proxy-client.ext").write_text("extendedKeyUsage=clientAuth\n")
    _openssl(
        "x509", "-req", "-in", "front-proxy-client.csr", "-CA", "ca.crt", "-CAkey", "ca.key",
        "-CAcreateserial", "-days", "2", "-extfile", "front-proxy-client.ext", "-out", "front-proxy-client.crt",
        cwd=directory,
    )  # fmt: skip
    _openssl("genpkey", "-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:2048", "-out", "sa.key", cwd=directory)
    _openssl("pkey", "-in", "sa.key", "-pubout", "-out", "sa.pub", cwd=directory)
    return Pki.in_dir(directory)


def write_token_file(path: Path, admin_token: str, kubeplace_token: str) -> None:
    """The apiserver's --token-auth-file: ``token,user,uid[,"groups"]``."""
    path.write_text(
        f'{admin_token},{ADMIN_USER},uid-e2e-admin,"system:masters"\n'
        f"{kubeplace_token},{KUBEPLACE_USER},uid-e2e-kubeplace\n"
    )
    path.chmod(0o600)


def write_kubeconfig(path: Path, *, server: str, ca_cert: Path, user: str, token: str) -> Path:
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "e2e", "cluster": {"server": server, "certificate-authority": str(ca_cert)}}],
        "users": [{"name": user, "user": {"token": token}}],
        "contexts": [{"name": "e2e", "context": {"cluster": "e2e", "user": user}}],
        "current-context": "e2e",
    }
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    path.chmod(0o600)
    return path



# --------------------------------------------------------------------------- the control plane


