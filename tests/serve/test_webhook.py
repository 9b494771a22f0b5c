"""The canary split: shares, precedence, group-consistent hashing, and the admission webhook
over HTTPS (certificates from `kubeplace webhook-certs`)."""

from __future__ import annotations

import base64
import json
import shutil
import ssl
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from kubeplace.cli.main import main
from kubeplace.cli.webhook import make_certs
from kubeplace.kube.canary import ANNOTATION, BASIS, ShareError, Split, bucket, group_key, parse_share
from kubeplace.serve.webhook import NamespaceCache, Webhook, WebhookServer

NEW, OLD = "kubeplace", "default-scheduler"


def raw_pod(name: str, ns: str = "default", share: str | None = None, labels: dict[str, str] | None = None,
            owner: tuple[str, str, str] | None = None, scheduler: str | None = OLD) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": ns, "labels": dict(labels or {}), "annotations": {}}
    if share is not None:
        meta["annotations"][ANNOTATION] = share
    if owner is not None:
        meta["ownerReferences"] = [{"apiVersion": "apps/v1", "kind": owner[0], "name": owner[1], "uid": owner[2],
                                    "controller": True}]
    spec: dict[str, Any] = {"containers": [{"name": "c", "image": "i"}]}
    if scheduler is not None:
        spec["schedulerName"] = scheduler
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec}


def review(pod: dict[str, Any], uid: str = "u-1", operation: str = "CREATE") -> dict[str, Any]:
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
            "request": {"uid": uid, "operation": operation, "resource": {"group": "", "version": "v1",
                                                                         "resource": "pods"},
                        "namespace": pod["metadata"]["namespace"], "object": pod}}


def patched_scheduler(answer: dict[str, Any], pod: dict[str, Any]) -> str:
    response = answer["response"]
    assert response["allowed"] is True
    if "patch" not in response:
        return str(pod["spec"].get("schedulerName", OLD))
    (op,) = json.loads(base64.b64decode(response["patch"]))
    assert op["path"] == "/spec/schedulerName" and op["op"] in ("add", "replace")
    return str(op["value"])


def webhook(namespaces: dict[str, dict[str, str]] | None = None, **split: Any) -> Webhook:
    known = namespaces or {}
    return Webhook(Split(NEW, OLD, **split), NamespaceCache(lambda name: known.get(name, {})))


@pytest.mark.parametrize(("text", "share"), [("30%", 3000), ("0%", 0), ("100%", BASIS), (" 12.5 %", 1250),
                                             ("99.99%", 9999)])
def test_shares_are_percentages(text: str, share: int) -> None:
    assert parse_share(text) == share


@pytest.mark.parametrize("text", ["30", "30 percent", "101%", "-5%", "1.234%", "", "%", "3O%", "1e1%",
                                  "\u0663\u0660%", "\uff13\uff10%", "3\u0660%", "1.\u0665%", "30%\u2003"])
def test_malformed_shares_are_refused_with_the_expected_form(text: str) -> None:
    with pytest.raises(ShareError, match="expected a percentage from 0% to 100%"):
        parse_share(text)


def test_the_pod_annotation_wins_over_the_namespace_and_the_namespace_over_the_default() -> None:
    split = Split(NEW, OLD, default_share=BASIS)
    assert split.decide(raw_pod("p", share="0%"), "default", {ANNOTATION: "100%"}).scheduler == OLD
    assert split.decide(raw_pod("p"), "default", {ANNOTATION: "0%"}).source == "namespace"
    assert split.decide(raw_pod("p"), "default", {ANNOTATION: "0%"}).scheduler == OLD
    assert split.decide(raw_pod("p"), "default", {}).scheduler == NEW
    assert split.decide(raw_pod("p"), "default", {}).source == "default"


def test_zero_and_hundred_percent_send_every_pod_one_way() -> None:
    split = Split(NEW, OLD)
    assert {split.decide(raw_pod(f"p{i}", share="100%"), "default", {}).scheduler for i in range(200)} == {NEW}
    assert {split.decide(raw_pod(f"p{i}", share="0%"), "default", {}).scheduler for i in range(200)} == {OLD}


def test_a_gang_and_a_workload_revision_go_to_one_side_and_recreated_pods_keep_it() -> None:
    gang = [raw_pod(f"w{i}", labels={"scheduling.x-k8s.io/pod-group": "train"}) for i in range(8)]
    assert len({group_key(p, "default") for p in gang}) == 1
    rs = [raw_pod(f"web-abc-{i}", labels={"pod-template-hash": "abc"}, owner=("ReplicaSet", "web-abc", "u1"))
          for i in range(5)]
    assert len({group_key(p, "default") for p in rs}) == 1
    next_revision = raw_pod("web-def-0", labels={"pod-template-hash": "def"}, owner=("ReplicaSet", "web-def", "u2"))
    assert group_key(next_revision, "default") != group_key(rs[0], "default")
    assert group_key(raw_pod("solo"), "default") == group_key(raw_pod("solo"), "default")  # re-created: same side
    split = Split(NEW, OLD)
    sides = {split.decide(p, "default", {ANNOTATION: "50%"}).scheduler for p in gang}
    assert len(sides) == 1


def test_thirty_percent_of_a_thousand_pods_is_thirty_percent_give_or_take_three_points() -> None:
    split = Split(NEW, OLD)
    chosen = [split.decide(raw_pod(f"pod-{i}", share="30%"), "canary", {}).scheduler for i in range(1000)]
    assert abs(chosen.count(NEW) / 1000 - 0.30) <= 0.03
    assert all(0 <= bucket(f"k{i}") < BASIS for i in range(100))


def test_the_webhook_patches_the_scheduler_name_and_leaves_others_alone() -> None:
    hook = webhook()
    to_new = raw_pod("p", share="100%")
    assert patched_scheduler(hook.review(review(to_new)), to_new) == NEW
    unset = raw_pod("q", share="100%", scheduler=None)
    answer = hook.review(review(unset))
    assert json.loads(base64.b64decode(answer["response"]["patch"]))[0]["op"] == "add"
    stays = raw_pod("r", share="0%")
    assert "patch" not in hook.review(review(stays))["response"]
    other = raw_pod("s", share="100%", scheduler="volcano")
    assert "patch" not in hook.review(review(other))["response"]  # it names another scheduler
    assert "patch" not in hook.review(review(to_new, operation="UPDATE"))["response"]
    assert hook.metrics.value("kubeplace_webhook_pods_routed_total", {"scheduler": NEW, "source": "pod"}) == 2
    assert hook.metrics.value("kubeplace_webhook_pods_routed_total", {"scheduler": OLD, "source": "pod"}) == 1
    assert hook.review(review(to_new, uid="abc"))["response"]["uid"] == "abc"


def test_a_malformed_share_is_refused_with_a_message_or_ignored_when_configured() -> None:
    bad = raw_pod("p", share="thirty")
    refused = webhook().review(review(bad))["response"]
    assert refused["allowed"] is False
    assert refused["status"]["message"].startswith(f"pod annotation {ANNOTATION}: 'thirty' is not a share")
    in_bad_namespace = raw_pod("q", ns="team")
    message = webhook({"team": {ANNOTATION: "lots"}}).review(review(in_bad_namespace))["response"]["status"]["message"]
    assert message.startswith("namespace annotation")
    lenient = webhook({"default": {ANNOTATION: "100%"}}, refuse_malformed=False)
    assert patched_scheduler(lenient.review(review(bad)), bad) == NEW  # the namespace's share applies


def test_the_webhook_never_crashes_and_admits_what_it_cannot_read() -> None:
    def broken(_name: str) -> dict[str, str]:
        raise TimeoutError("API server too slow")

    hook = Webhook(Split(NEW, OLD, default_share=BASIS), NamespaceCache(broken))
    pod = raw_pod("p")
    assert patched_scheduler(hook.review(review(pod)), pod) == NEW  # namespace unreadable: unannotated
    for nonsense in [None, [], {"request": None}, {"request": {"uid": "x", "object": "pod"}},
                     {"request": {"uid": "y", "operation": "CREATE", "resource": {"resource": "pods"},
                                  "object": {"metadata": "m", "spec": 7}}}]:
        answer = hook.review(nonsense)
        assert answer["response"]["allowed"] is True


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if shutil.which("openssl") is None:
        pytest.skip("openssl is needed to make certificates")
    out = tmp_path_factory.mktemp("certs")
    make_certs(out, "kubeplace-webhook", "kubeplace-system", hosts=("localhost", "127.0.0.1"))
    return out


@pytest.fixture
def server(certs: Path) -> Iterator[WebhookServer]:
    served = WebhookServer(webhook(), certs / "tls.crt", certs / "tls.key", 0, "127.0.0.1", reload_seconds=0.1)
    served.start()
    try:
        yield served
    finally:
        served.shutdown()


def call(server: WebhookServer, certs: Path, path: str, body: Any = None) -> tuple[int, bytes]:
    context = ssl.create_default_context(cafile=str(certs / "ca.crt"))
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(f"https://localhost:{server.port}{path}", data=data,
                                     headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, context=context, timeout=5) as response:
        return response.status, response.read()


def test_the_webhook_serves_https_with_its_generated_certificate(server: WebhookServer, certs: Path) -> None:
    assert call(server, certs, "/readyz") == (200, b"ok")
    pod = raw_pod("p", share="100%")
    status, body = call(server, certs, "/mutate", review(pod))
    assert status == 200 and patched_scheduler(json.loads(body), pod) == NEW
    _, metrics = call(server, certs, "/metrics")
    assert b'kubeplace_webhook_pods_routed_total{scheduler="kubeplace",source="pod"} 1.0' in metrics


def test_a_rotated_certificate_is_served_without_a_restart(server: WebhookServer, certs: Path) -> None:
    before = server.certs.loaded
    time.sleep(0.05)
    bundle = make_certs(certs, "kubeplace-webhook", "kubeplace-system", hosts=("localhost",))
    assert base64.b64decode(bundle) == (certs / "ca.crt").read_bytes()  # the CA is kept: the caBundle holds
    deadline = time.monotonic() + 5
    while server.certs.loaded == before and time.monotonic() < deadline:
        time.sleep(0.05)
    assert server.certs.loaded != before
    assert call(server, certs, "/healthz") == (200, b"ok")


def test_webhook_cli_refuses_a_bad_default_share_in_one_line(tmp_path: Path) -> None:
    result = CliRunner().invoke(main, ["webhook", "--tls-cert-file", str(tmp_path / "c"), "--tls-key-file",
                                       str(tmp_path / "k"), "--default-share", "half"])
    assert result.exit_code == 2
    assert result.stderr.count("\n") == 1 and "--default-share" in result.stderr
