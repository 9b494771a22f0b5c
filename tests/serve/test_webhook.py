"""The canary split: shares, precedence, group-consistent hashing, and the admission webhook
over HTTPS (certificates from `kubeplace webhook-certs`): a real server on 127.0.0.1, whose
clients cannot freeze it (idle, silent, too many, oversized, too deep, garbage) and whose every
log line is one JSON object."""

from __future__ import annotations

import base64
import http.client
import io
import json
import logging
import shutil
import socket
import ssl
import time
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kubeplace.cli.main import main
from kubeplace.cli.serve import JsonFormatter
from kubeplace.cli.webhook import make_certs
from kubeplace.kube.canary import ANNOTATION, BASIS, ShareError, Split, bucket, group_key, parse_share
from kubeplace.serve.webhook import ConnectionLimits, NamespaceCache, Webhook, WebhookServer, json_depth

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


def test_every_gang_source_sends_its_pods_to_one_side() -> None:
    """The regression: the webhook built its pod from labels and annotations alone, so the members
    of a Workload API gang (``spec.schedulingGroup``) were each their own group, split between the
    two schedulers; every source ``kube.gangs.gang_of`` reads now keeps a gang on one side."""
    workload_api = [raw_pod(f"w{i}") for i in range(8)]
    for pod in workload_api:
        pod["spec"]["schedulingGroup"] = {"podGroupName": "train"}
    kai = [raw_pod(f"k{i}") for i in range(8)]
    for pod in kai:
        pod["metadata"]["annotations"]["pod-group-name"] = "train"
    assert {group_key(p, "default") for p in workload_api} == {"gang/default/train"}
    assert {group_key(p, "default") for p in kai} == {"gang/default/train"}
    odd = raw_pod("odd")
    odd["spec"]["schedulingGroup"] = {"podGroupName": 7}  # malformed: the API server refuses it, not the webhook
    assert group_key(odd, "default") == "pod/default/odd"


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


QUICK = ConnectionLimits(handshake_seconds=0.5, read_seconds=0.5, max_connections=3)
"""Small limits, so that the tests see them act within a second."""


@pytest.fixture
def json_log(capfd: pytest.CaptureFixture[str]) -> Iterator[Callable[[], list[dict[str, Any]]]]:
    """The webhook's log lines as ``kubeplace webhook`` writes them (its JsonFormatter, debug
    level); yields a function that returns them, each checked to be one JSON object, after
    checking that nothing else reached stderr (a traceback socketserver prints, a warning)."""
    logger = logging.getLogger("kubeplace")
    saved = (list(logger.handlers), logger.level, logger.propagate)
    written = io.StringIO()
    handler = logging.StreamHandler(written)
    handler.setFormatter(JsonFormatter())
    logger.handlers[:], logger.level, logger.propagate = [handler], logging.DEBUG, False

    def lines() -> list[dict[str, Any]]:
        assert capfd.readouterr().err == ""
        entries = [json.loads(line) for line in written.getvalue().splitlines()]
        assert all(isinstance(entry, dict) and entry["logger"] == "kubeplace.webhook" for entry in entries)
        assert not any("Traceback" in line for line in written.getvalue().splitlines())
        return entries

    try:
        yield lines
    finally:
        logger.handlers[:], logger.level, logger.propagate = saved


@contextmanager
def serving(certs: Path, limits: ConnectionLimits = QUICK) -> Iterator[WebhookServer]:
    served = WebhookServer(webhook(), certs / "tls.crt", certs / "tls.key", 0, "127.0.0.1", limits=limits)
    served.start()
    try:
        yield served
    finally:
        served.shutdown()


def tcp(server: WebhookServer) -> socket.socket:
    return socket.create_connection(("127.0.0.1", server.port), timeout=5)


def tls(server: WebhookServer, certs: Path) -> ssl.SSLSocket:
    context = ssl.create_default_context(cafile=str(certs / "ca.crt"))
    return context.wrap_socket(tcp(server), server_hostname="localhost")


def closed_within(sock: socket.socket, seconds: float) -> bool:
    """True when the server closes ``sock`` within ``seconds`` (what it sends first is read)."""
    deadline = time.monotonic() + seconds
    sock.settimeout(seconds)
    try:
        while time.monotonic() < deadline:
            if not sock.recv(65536):
                return True
    except (ConnectionError, ssl.SSLError):
        return True
    except TimeoutError:
        return False
    return False


def wait_for(condition: Callable[[], bool], seconds: float = 5.0) -> bool:
    deadline = time.monotonic() + seconds
    while not condition() and time.monotonic() < deadline:
        time.sleep(0.02)
    return condition()


def post(server: WebhookServer, certs: Path, body: bytes, headers: dict[str, str] | None = None) -> tuple[int, bytes]:
    """A POST to /mutate with exactly these headers (Content-Length: the body's unless given)."""
    context = ssl.create_default_context(cafile=str(certs / "ca.crt"))
    connection = http.client.HTTPSConnection("localhost", server.port, context=context, timeout=5)
    try:
        connection.putrequest("POST", "/mutate", skip_accept_encoding=True)
        for name, value in (headers if headers is not None else {"Content-Length": str(len(body))}).items():
            connection.putheader(name, value)
        connection.endheaders(body)
        response = connection.getresponse()
        return response.status, response.read()
    finally:
        connection.close()


def test_an_idle_connection_that_never_handshakes_does_not_block_a_review(
        certs: Path, json_log: Callable[[], list[dict[str, Any]]]) -> None:
    with serving(certs) as server:
        idle = tcp(server)  # connected, never says a word
        started = time.monotonic()
        pod = raw_pod("p", share="100%")
        status, body = call(server, certs, "/mutate", review(pod))
        assert status == 200 and patched_scheduler(json.loads(body), pod) == NEW
        assert time.monotonic() - started < 2
        assert closed_within(idle, 3)  # dropped at the handshake deadline
        idle.close()
    assert any(e["msg"] == "connection dropped" and "TimeoutError" in e["why"] for e in json_log())


def test_a_handshaken_client_that_sends_nothing_is_dropped_after_the_read_timeout(
        certs: Path, json_log: Callable[[], list[dict[str, Any]]]) -> None:
    with serving(certs) as server:
        silent = tls(server, certs)
        started = time.monotonic()
        assert closed_within(silent, 3)
        assert 0.4 <= time.monotonic() - started < 3
        silent.close()
        assert wait_for(lambda: server.open_connections == 0)
    assert any("timed out" in e["msg"] for e in json_log())


def test_connections_beyond_the_cap_are_closed_at_once_and_served_again_below_it(
        certs: Path, json_log: Callable[[], list[dict[str, Any]]]) -> None:
    patient = ConnectionLimits(handshake_seconds=30, read_seconds=30, max_connections=3)
    with serving(certs, patient) as server:
        held = [tcp(server) for _ in range(patient.max_connections)]
        assert wait_for(lambda: server.open_connections == patient.max_connections)
        one_more = tcp(server)
        started = time.monotonic()
        assert closed_within(one_more, 2) and time.monotonic() - started < 1
        for sock in [*held, one_more]:
            sock.close()
        assert wait_for(lambda: server.open_connections == 0)
        assert call(server, certs, "/readyz") == (200, b"ok")
    refused = [e for e in json_log() if e["msg"] == "connection refused: too many open"]
    assert len(refused) == 1 and refused[0]["maxConnections"] == 3 and refused[0]["client"].startswith("127.0.0.1:")


def test_bodies_that_are_too_large_too_deep_or_not_json_are_refused_with_4xx(
        certs: Path, json_log: Callable[[], list[dict[str, Any]]]) -> None:
    deep = b'{"request": ' * 20_000 + b"{}" + b"}" * 20_000
    with serving(certs, ConnectionLimits(handshake_seconds=0.5, read_seconds=0.5, max_connections=16)) as server:
        status, body = post(server, certs, deep)
        assert status == 400 and json.loads(body) == {"error": "JSON nested deeper than 100 levels"}
        assert post(server, certs, b"[" * 200_000)[0] == 400
        assert post(server, certs, b"not json")[0] == 400
        assert post(server, certs, b"", {})[0] == 400  # no Content-Length
        assert post(server, certs, b"{}", {"Content-Length": "-2"})[0] == 400
        started = time.monotonic()
        status, body = post(server, certs, b"", {"Content-Length": str(9 << 20)})  # nothing more is sent
        assert status == 413 and b"over the limit" in body and time.monotonic() - started < 2
        started = time.monotonic()
        status, _ = post(server, certs, b"{", {"Content-Length": "100"})  # the rest never comes
        assert status == 408 and time.monotonic() - started < 2
        status, body = post(server, certs, b'{"request": 5}')  # the review fails: admitted unchanged
        assert status == 200 and json.loads(body)["response"]["allowed"] is True
        pod = raw_pod("p", share="100%")
        assert post(server, certs, json.dumps(review(pod)).encode())[0] == 200
    entries = json_log()
    (failed,) = [e for e in entries if e["msg"] == "review failed; pod admitted unchanged"]
    assert failed["why"].startswith("AssertionError") and "error" not in failed  # no traceback in the line
    assert {e["code"] for e in entries if e["msg"] == "request refused"} == {400, 408, 413}


def test_json_depth_counts_brackets_outside_strings_only() -> None:
    assert json_depth(b"") == 0 and json_depth(b'"[[["') == 0 and json_depth(b'{"a": [1, {"b": "]]"}]}') == 3
    assert json_depth(b'["\\"', ) == 1 and json_depth(b'["\\\"[["]') == 1
    assert json_depth(b"[" * 5000) == 5000


WIRE = settings(max_examples=30, derandomize=True, deadline=None, database=None,
                suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
VALID = json.dumps(review(raw_pod("p", share="100%"))).encode()


@st.composite
def request_bytes(draw: st.DrawFn) -> tuple[str, bytes]:
    """(how the bytes go: over TLS or as plain TCP, where a TLS handshake is expected) and the
    bytes: a POST whose body is cut, grown, nested, replaced or whose Content-Length lies."""
    body = VALID
    damage = draw(st.sampled_from(["none", "cut", "nest", "bytes", "json"]))
    if damage == "cut":
        body = body[:draw(st.integers(0, len(body)))]
    elif damage == "nest":
        at = draw(st.integers(0, len(body)))
        depth = draw(st.sampled_from([50, 101, 5000]))
        body = body[:at] + b"[" * depth + b"]" * depth + body[at:]
    elif damage == "bytes":
        body = draw(st.binary(max_size=200))
    elif damage == "json":
        body = json.dumps(draw(st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=10),
                                            lambda inner: st.lists(inner, max_size=4)
                                            | st.dictionaries(st.text(max_size=8), inner, max_size=4),
                                            max_leaves=20))).encode()
    exact = str(len(body))
    length = draw(st.sampled_from([exact, exact, str(len(body) + 7), "0", "-1", "x", str(1 << 40), ""]))
    head = f"POST /mutate HTTP/1.1\r\nHost: localhost\r\nContent-Length: {length}\r\n\r\n".encode()
    data = head + body
    stop = draw(st.sampled_from([len(data)] * 3 + [draw(st.integers(0, len(data)))]))
    return draw(st.sampled_from(["tls", "tls", "tls", "tcp"])), data[:stop]


@pytest.fixture(scope="module")
def wire_server(certs: Path) -> Iterator[WebhookServer]:
    with serving(certs) as server:
        yield server


@WIRE
@given(sent=request_bytes())
def test_whatever_a_client_sends_the_server_answers_or_drops_it_and_keeps_serving(
        certs: Path, wire_server: WebhookServer, json_log: Callable[[], list[dict[str, Any]]],
        sent: tuple[str, bytes]) -> None:
    how, data = sent
    sock: socket.socket = tls(wire_server, certs) if how == "tls" else tcp(wire_server)
    with sock:
        try:
            sock.sendall(data)
            sock.settimeout(3)
            answer = sock.recv(65536)
        except (ConnectionError, ssl.SSLError):
            answer = b""
    if answer:
        status = int(answer.split(b" ", 2)[1])
        assert status in (200, 400, 408, 413), answer[:300]
    assert post(wire_server, certs, VALID)[0] == 200  # still serving
    json_log()  # every line so far is one JSON object


def test_the_namespace_cache_keeps_the_last_ttl_seconds_of_namespaces_only() -> None:
    """Namespaces come and go (one per CI run, per tenant): each one ever read stayed cached."""
    now = [0.0]
    cache = NamespaceCache(lambda name: {"seen": name}, ttl=10.0, clock=lambda: now[0])
    for i in range(1000):
        now[0] = float(i)
        assert cache.annotations(f"ns-{i}") == {"seen": f"ns-{i}"}
    assert len(cache) == 10
    assert cache.annotations("ns-995") == {"seen": "ns-995"}  # still cached and fresh
