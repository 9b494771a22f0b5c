"""``kubeplace webhook`` (the canary split's admission webhook) and ``kubeplace webhook-certs``
(its certificate authority and serving certificate, made with ``openssl``)."""

from __future__ import annotations

import base64
import logging
import shutil
import signal
import subprocess
import tempfile
from pathlib import Path
from types import FrameType

import click

from kubeplace.cli.options import exit_with
from kubeplace.cli.serve import configure_logging
from kubeplace.kube.errors import InputError, KubeplaceError

CA_DAYS = 3650
"""The CA outlives many serving certificates: rotating the serving certificate keeps the caBundle."""


@click.command("webhook")
@click.option("--kubeconfig", default=None, metavar="FILE",
              help="Kubeconfig file (default: $KUBECONFIG, then ~/.kube/config, then in-cluster).")
@click.option("--context", default=None, help="Kubeconfig context to use.")
@click.option("--tls-cert-file", type=click.Path(path_type=Path, dir_okay=False), required=True,
              help="Serving certificate (PEM); reloaded when the file changes.")
@click.option("--tls-key-file", type=click.Path(path_type=Path, dir_okay=False), required=True,
              help="Its private key (PEM).")
@click.option("--port", type=click.IntRange(0, 65535), default=8443, show_default=True, help="HTTPS port.")
@click.option("--address", default="0.0.0.0", show_default=True, help="Address to listen on.")
@click.option("--new-scheduler", default="kubeplace", show_default=True, help="The canary's schedulerName.")
@click.option("--old-scheduler", default="default-scheduler", show_default=True,
              help="The schedulerName of the pods that are split (the rest stay with it).")
@click.option("--default-share", default="0%", show_default=True,
              help="Share of pods for the new scheduler when neither pod nor namespace is annotated.")
@click.option("--on-malformed", type=click.Choice(["refuse", "ignore"]), default="refuse", show_default=True,
              help="A malformed share annotation refuses the pod (with the reason), or is ignored.")
@click.option("--log-level", type=click.Choice(["debug", "info", "warning", "error"]), default="info",
              show_default=True)
def webhook_command(kubeconfig: str | None, context: str | None, tls_cert_file: Path, tls_key_file: Path, port: int,
                    address: str, new_scheduler: str, old_scheduler: str, default_share: str, on_malformed: str,
                    log_level: str) -> None:
    """Serve the mutating admission webhook that sends a share of new pods to another scheduler.

    The share is the pod annotation scheduler.alpha.kubernetes.io/use-new-scheduler ("30%"), else
    the same annotation on its namespace, else --default-share; all pods of a gang or of a workload
    revision go to the same side (deploy/webhook.yaml registers it). A client gets 5 s for its TLS
    handshake and is closed after 10 s of silence; at most 64 connections are open at once.
    """
    from kubeplace.kube.canary import ShareError, Split, parse_share
    from kubeplace.kube.kubeconfig import connect
    from kubeplace.serve.webhook import NamespaceCache, Webhook, WebhookServer

    configure_logging(log_level)
    log = logging.getLogger("kubeplace.webhook")
    try:
        try:
            share = parse_share(default_share)
        except ShareError as error:
            raise InputError(str(error), field="--default-share") from None
        if new_scheduler == old_scheduler:
            raise InputError(f"--new-scheduler and --old-scheduler are both {new_scheduler!r}",
                             field="--new-scheduler", expected="two different scheduler names")
        cluster = connect(kubeconfig, context)
        split = Split(new_scheduler, old_scheduler, share, on_malformed == "refuse")
        webhook = Webhook(split, NamespaceCache(cluster.namespace_annotations))
        try:
            server = WebhookServer(webhook, tls_cert_file, tls_key_file, port, address)
        except (OSError, ValueError) as error:
            raise InputError(f"cannot serve HTTPS on {address}:{port} with {tls_cert_file}: {error}") from None
    except KubeplaceError as error:
        exit_with(error)

    def on_signal(signum: int, _frame: FrameType | None) -> None:
        log.info("stopping", extra={"fields": {"signal": signal.Signals(signum).name}})
        server.stop_event.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    log.info("starting", extra={"fields": {"port": server.port, "new": new_scheduler, "old": old_scheduler,
                                           "defaultShare": default_share, "onMalformed": on_malformed}})
    server.start()
    while not server.stop_event.wait(0.5):
        pass
    server.shutdown()
    log.info("stopped")


@click.command("webhook-certs")
@click.option("--service", default="kubeplace-webhook", show_default=True, help="The webhook's Service name.")
@click.option("--namespace", default="kubeplace-system", show_default=True, help="The Service's namespace.")
@click.option("--out", "out_dir", type=click.Path(path_type=Path, file_okay=False), required=True,
              help="Directory for ca.crt, ca.key, tls.crt, tls.key.")
@click.option("--days", type=click.IntRange(1, 3650), default=90, show_default=True,
              help="Validity of the serving certificate.")
@click.option("--host", "hosts", multiple=True, help="Another DNS name or IP for the certificate (repeatable).")
def webhook_certs_command(service: str, namespace: str, out_dir: Path, days: int, hosts: tuple[str, ...]) -> None:
    """Make (or renew) the webhook's serving certificate with openssl; prints the caBundle.

    An existing ca.crt/ca.key in --out is kept, so a renewed serving certificate is trusted by the
    caBundle already registered: rotate by running this again and updating the Secret.
    """
    try:
        bundle = make_certs(out_dir, service, namespace, days, hosts)
    except KubeplaceError as error:
        exit_with(error)
    click.echo(bundle)


def make_certs(out_dir: Path, service: str, namespace: str, days: int = 90, hosts: tuple[str, ...] = ()) -> str:
    """CA (kept if present) and a serving certificate for the Service's DNS names; the CA's
    certificate base64-encoded, as a webhook's ``caBundle`` takes it."""
    openssl = shutil.which("openssl")
    if openssl is None:
        raise InputError("openssl is not on PATH", expected="openssl, to make the certificates")
    out_dir.mkdir(parents=True, exist_ok=True)
    ca_crt, ca_key = out_dir / "ca.crt", out_dir / "ca.key"

    def run(*args: str) -> None:
        done = subprocess.run([openssl, *args], capture_output=True, text=True, check=False)
        if done.returncode != 0:
            raise InputError(f"openssl {args[0]} failed: {done.stderr.strip().splitlines()[-1:]}")

    if not (ca_crt.exists() and ca_key.exists()):
        run("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(ca_key), "-out", str(ca_crt),
            "-days", str(CA_DAYS), "-subj", f"/CN={service}-ca")
    names = [service, f"{service}.{namespace}", f"{service}.{namespace}.svc", *hosts]
    alt = ",".join(f"IP:{h}" if h.replace(".", "").isdigit() or ":" in h else f"DNS:{h}" for h in names)
    with tempfile.TemporaryDirectory() as tmp:
        csr, ext = Path(tmp) / "tls.csr", Path(tmp) / "ext.cnf"
        ext.write_text(f"subjectAltName={alt}\nextendedKeyUsage=serverAuth\nkeyUsage=digitalSignature,keyEncipherment\n")
        run("req", "-newkey", "rsa:2048", "-nodes", "-keyout", str(out_dir / "tls.key"), "-out", str(csr),
            "-subj", f"/CN={service}.{namespace}.svc")
        run("x509", "-req", "-in", str(csr), "-CA", str(ca_crt), "-CAkey", str(ca_key), "-CAcreateserial",
            "-out", str(out_dir / "tls.crt"), "-days", str(days), "-extfile", str(ext))
    (out_dir / "tls.key").chmod(0o600)
    ca_key.chmod(0o600)
    return base64.b64encode(ca_crt.read_bytes()).decode()


