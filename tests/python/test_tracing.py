"""Traces across the services: a shortener node (PostgreSQL store) and an id-service exporting
to a real OTLP receiver here (opentelemetry-proto's messages; 127.0.0.1 only), the node over
OTLP/gRPC (a grpcio TraceService), the id-service over OTLP/HTTP with protobuf bodies. Requests carry a known W3C `traceparent`; the spans that come
back must continue those traces, be parented correctly, carry the conventional attributes,
and never record a code, a target URL, a key or a token. With the receiver stopped, or
answering slowly, the services keep answering at once and count the spans they drop.

The servers are this module's own (tests/python/run passes the binaries and the database
server): the node leases blocks of one ID, so a create regularly triggers a lease.
"""

import http.server
import json
import os
import secrets
import socket
import subprocess
import sys
import tempfile
import threading
import time
from concurrent import futures
from pathlib import Path

import grpc
import pytest
import requests
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2, trace_service_pb2_grpc

TIMEOUT = 20
API_KEY = "tracing-key-" + secrets.token_hex(8)
TARGET = "https://traced.example/secret-path?token=abc123"
NAMESPACE = "links"


def _env(name: str) -> str:
    value = os.environ.get(name)
    if not value:
        pytest.exit(f"{name} is not set: run these tests through tests/python/run", returncode=2)
    return value


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for(what: str, check, within: float = TIMEOUT):
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(0.05)
    pytest.fail(f"timed out after {within}s waiting for {what}")


class Receiver(trace_service_pb2_grpc.TraceServiceServicer):
    """Keeps every span exported to it, flattened with its resource's service name. `delay`
    makes it answer slowly."""

    def __init__(self):
        self.spans = []
        self.lock = threading.Lock()
        self.delay = 0.0

    def Export(self, request, context):
        if self.delay:
            time.sleep(self.delay)
        with self.lock:
            for resource_spans in request.resource_spans:
                service = attrs(resource_spans.resource.attributes).get("service.name")
                for scope in resource_spans.scope_spans:
                    for span in scope.spans:
                        self.spans.append((service, span))
        return trace_service_pb2.ExportTraceServiceResponse()

    def in_trace(self, trace_id: str):
        with self.lock:
            return [(s, span) for s, span in self.spans if span.trace_id.hex() == trace_id]


def attrs(attributes) -> dict:
    out = {}
    for kv in attributes:
        value = kv.value
        kind = value.WhichOneof("value")
        out[kv.key] = getattr(value, kind) if kind else None
    return out


class HttpReceiver(http.server.ThreadingHTTPServer):
    """OTLP/HTTP (`POST /v1/traces`, protobuf) into the same receiver."""

    def __init__(self, receiver: Receiver):
        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                if self.path != "/v1/traces" or \
                        self.headers.get("Content-Type") != "application/x-protobuf":
                    self.send_response(404)
                    self.end_headers()
                    return
                request = trace_service_pb2.ExportTraceServiceRequest.FromString(body)
                reply = receiver.Export(request, None).SerializeToString()
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", str(len(reply)))
                self.end_headers()
                try:
                    self.wfile.write(reply)
                except BrokenPipeError:
                    pass  # the service gave up on this export (its deadline passed)

            def log_message(self, *args):
                pass

        super().__init__(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.serve_forever, daemon=True).start()


def start_receiver(receiver: Receiver, port: int) -> grpc.Server:
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
    trace_service_pb2_grpc.add_TraceServiceServicer_to_server(receiver, server)
    server.add_insecure_port(f"127.0.0.1:{port}")
    server.start()
    return server


def ids_in_hand(admin: int) -> bool:
    """Whether the node is ready with nothing degraded: a node that was ready stays ready
    (`ready, degraded: ...`) when its IDs run out, so a 200 alone does not say one is in hand."""
    response = requests.get(f"http://127.0.0.1:{admin}/readyz", timeout=TIMEOUT)
    return response.ok and response.text.strip() == "ready"


def traceparent(sampled: bool = True) -> tuple[str, str, str]:
    trace_id, span_id = secrets.token_hex(16), secrets.token_hex(8)
    return trace_id, span_id, f"00-{trace_id}-{span_id}-{'01' if sampled else '00'}"


def psql(admin: str, sql: str):
    subprocess.run(["psql", admin, "-qXc", sql], check=True, capture_output=True, timeout=TIMEOUT)


def wait_ready(url: str, process: subprocess.Popen, log: Path):
    def ready():
        if process.poll() is not None:
            pytest.fail(f"{log.name} exited:\n{log.read_text()[-3000:]}")
        try:
            return requests.get(url, timeout=2).status_code == 200
        except requests.RequestException:
            return False

    wait_for(f"{url} to be ready", ready, within=30)


class Stack:
    """The receiver, an id-service and a node pointed at it, on free loopback ports."""

    def __init__(self, work: Path):
        self.work = work
        self.receiver = Receiver()
        self.otlp_port = free_port()
        self.otlp = start_receiver(self.receiver, self.otlp_port)
        self.otlp_http = HttpReceiver(self.receiver)
        self.admin = _env("SHORTENER_TEST_PG_ADMIN")
        suffix = secrets.token_hex(5)
        self.dbs = [f"trace_ids_{suffix}", f"trace_links_{suffix}"]
        for db in self.dbs:
            psql(self.admin, f"CREATE DATABASE {db}")
        base = self.admin.rsplit("/", 1)[0]
        self.processes = []
        self.id_bin = _env("ID_SERVICE_TEST_BIN")
        self.token = subprocess.run(
            [self.id_bin, "tokens", "add", "--file", str(work / "tokens.toml"), "--name", "node",
             "--namespaces", NAMESPACE, "--scopes", "lease,allocate", "--unlimited"],
            check=True, capture_output=True, text=True, timeout=TIMEOUT,
        ).stdout.strip()
        otel = {
            "OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{self.otlp_port}",
            "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc",
            "OTEL_EXPORTER_OTLP_TIMEOUT": "1000",
            "OTEL_BSP_SCHEDULE_DELAY": "50",
            "OTEL_BSP_EXPORT_TIMEOUT": "500",
            "OTEL_BSP_MAX_QUEUE_SIZE": "256",
            # Requests without a trace context are not traced: only the test's own are.
            "OTEL_TRACES_SAMPLER": "parentbased_traceidratio",
            "OTEL_TRACES_SAMPLER_ARG": "0",
            "RUST_LOG": "info",
        }
        self.admin_key = subprocess.run(
            [_env("SHORTENER_TEST_BIN"), "keys", "add", "--file", str(work / "keys.toml"),
             "--tenant", "ops", "--name", "tracing", "--scopes", "admin"],
            check=True, capture_output=True, text=True, timeout=TIMEOUT,
        ).stdout.strip()
        self.id_grpc, id_http, self.id_admin = free_port(), free_port(), free_port()
        self.id_http = f"http://127.0.0.1:{id_http}"
        self.start("id-service", [self.id_bin], {
            **otel,
            "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf",
            "OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{self.otlp_http.server_port}",
            "OTEL_SERVICE_NAME": "ids-under-test",
            "DATABASE_URL": f"{base}/{self.dbs[0]}",
            "ID_SERVICE_TOKENS_FILE": str(work / "tokens.toml"),
            "ID_SERVICE_NAMESPACES": NAMESPACE,
            "ID_SERVICE_GRPC_ADDR": f"127.0.0.1:{self.id_grpc}",
            "ID_SERVICE_HTTP_ADDR": f"127.0.0.1:{id_http}",
            "ID_SERVICE_ADMIN_ADDR": f"127.0.0.1:{self.id_admin}",
            "ID_SERVICE_LOG_FORMAT": "json",
        }, f"http://127.0.0.1:{self.id_admin}/readyz")
        http, grpc_port, self.node_admin = free_port(), free_port(), free_port()
        self.grpc = f"127.0.0.1:{grpc_port}"
        self.http = f"http://127.0.0.1:{http}"
        self.node = self.start("shortener", [_env("SHORTENER_TEST_BIN"), "serve"], {
            **otel,
            "OTEL_RESOURCE_ATTRIBUTES": "deployment.environment=test",
            "DATABASE_URL": f"{base}/{self.dbs[1]}",
            "SHORTENER_ID_SERVICE": f"http://127.0.0.1:{self.id_grpc}",
            "SHORTENER_ID_SERVICE_TOKEN": self.token,
            "SHORTENER_KEY": secrets.token_hex(32),
            "SHORTENER_MIN_BLOCK": "1",
            "SHORTENER_MAX_BLOCK": "1",
            "SHORTENER_HTTP_ADDR": f"127.0.0.1:{http}",
            "SHORTENER_GRPC_ADDR": f"127.0.0.1:{grpc_port}",
            "SHORTENER_ADMIN_ADDR": f"127.0.0.1:{self.node_admin}",
            "SHORTENER_DATA_DIR": str(work / "node-data"),
            "SHORTENER_API_KEYS": API_KEY,
            "SHORTENER_API_KEYS_FILE": str(work / "keys.toml"),
            "SHORTENER_PUBLIC_URL": "https://sho.rt/",
            "SHORTENER_LOG_FORMAT": "json",
            # Webhooks go to the receiver on 127.0.0.1 here.
            "SHORTENER_WEBHOOK_ALLOW_PRIVATE": "true",
            "SHORTENER_WEBHOOK_RETRY_BASE_MS": "100",
        }, f"http://127.0.0.1:{self.node_admin}/readyz")

    def start(self, name, argv, env, ready_url):
        log = self.work / f"{name}.log"
        with open(log, "wb") as out:
            process = subprocess.Popen(argv, env={**os.environ, **env}, stdout=out, stderr=out)
        self.processes.append(process)
        wait_ready(ready_url, process, log)
        return process

    def log(self, name: str) -> str:
        return (self.work / f"{name}.log").read_text(errors="replace")

    def create(self, url: str, header: str | None = None, **extra) -> requests.Response:
        """A create, once the node has an ID in hand (blocks of one ID: waited for, untimed)."""
        wait_for("an ID in hand", lambda: ids_in_hand(self.node_admin))
        headers = {"Authorization": f"Bearer {API_KEY}"}
        if header:
            headers["traceparent"] = header
        return requests.post(f"{self.http}/api/v1/links", json={"url": url, **extra},
                             headers=headers, timeout=TIMEOUT)

    def metric(self, name: str) -> float:
        text = requests.get(f"http://127.0.0.1:{self.node_admin}/metrics", timeout=TIMEOUT).text
        return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
                   if line.startswith(name) and not line.startswith("#"))

    def close(self):
        for process in self.processes:
            process.terminate()
        for process in self.processes:
            try:
                process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        self.otlp.stop(grace=None)
        self.otlp_http.shutdown()
        for db in self.dbs:
            psql(self.admin, f"DROP DATABASE IF EXISTS {db} WITH (FORCE)")


@pytest.fixture(scope="module")
def stack():
    with tempfile.TemporaryDirectory(prefix="shortener-tracing-") as work:
        stack = Stack(Path(work))
        try:
            yield stack
        finally:
            stack.close()


def assert_nothing_secret(spans, *secrets_):
    for service, span in spans:
        values = [span.name] + [str(v) for v in attrs(span.attributes).values()]
        for value in values:
            for secret in secrets_:
                assert secret not in value, f"{service} span {span.name!r} records {secret!r}"


def test_a_create_is_one_trace_from_the_edge_through_the_id_service(stack):
    # Blocks of one ID: each create after the first empties the spare slot, and the lease it
    # triggers continues the create's trace. A few creates, each its own trace.
    created = []
    for _ in range(4):
        trace_id, parent_span, header = traceparent()
        response = stack.create(TARGET, header)
        assert response.status_code == 201, response.text
        created.append((trace_id, parent_span, response.json()["code"]))

    # Each service exports on its own schedule: wait for every span the trace should hold.
    expected = {("shortener", "POST /api/v1/links"), ("shortener", "refill ID pool"),
                ("shortener", "idalloc.v1.IdAllocator/LeaseBlock"),
                ("ids-under-test", "idalloc.v1.IdAllocator/LeaseBlock"),
                ("ids-under-test", "id_grant")}

    def lease_traced():
        for trace_id, parent_span, code in created:
            spans = stack.receiver.in_trace(trace_id)
            if expected <= {(s, span.name) for s, span in spans}:
                return trace_id, parent_span, code, spans
        return None

    trace_id, parent_span, code, spans = wait_for("a create's trace to reach the id-service",
                                                  lease_traced)
    by_name = {(s, span.name): span for s, span in spans}
    server = by_name[("shortener", "POST /api/v1/links")]
    assert server.parent_span_id.hex() == parent_span, "the caller's span is the parent"
    assert server.kind == server.SPAN_KIND_SERVER
    a = attrs(server.attributes)
    assert a["http.request.method"] == "POST"
    assert a["http.route"] == "/api/v1/links"
    assert a["http.response.status_code"] == 201
    refill = by_name[("shortener", "refill ID pool")]
    assert refill.parent_span_id == server.span_id
    client = by_name[("shortener", "idalloc.v1.IdAllocator/LeaseBlock")]
    assert client.kind == client.SPAN_KIND_CLIENT
    assert client.parent_span_id == refill.span_id
    c = attrs(client.attributes)
    assert (c["rpc.system"], c["rpc.service"], c["rpc.method"]) == (
        "grpc", "idalloc.v1.IdAllocator", "LeaseBlock")
    assert c["rpc.grpc.status_code"] == 0
    remote = by_name[("ids-under-test", "idalloc.v1.IdAllocator/LeaseBlock")]
    assert remote.kind == remote.SPAN_KIND_SERVER
    assert remote.parent_span_id == client.span_id, "the id-service continues the node's span"
    r = attrs(remote.attributes)
    assert (r["rpc.system"], r["rpc.method"], r["rpc.grpc.status_code"]) == (
        "grpc", "LeaseBlock", 0)
    grant = by_name[("ids-under-test", "id_grant")]
    assert grant.parent_span_id == remote.span_id and grant.kind == grant.SPAN_KIND_CLIENT
    assert attrs(grant.attributes) == {"db.system": "postgresql",
                                       "db.stored_procedure.name": "id_grant"}
    # The database statement of the create, under the server span.
    db = [span for s, span in spans if s == "shortener" and "db.system" in attrs(span.attributes)]
    assert db, [span.name for _, span in spans]
    for span in db:
        d = attrs(span.attributes)
        assert d["db.system"] == "postgresql"
        assert span.name == f"{d['db.operation.name']} {d['db.collection.name']}"
    everything = [pair for t, _, _ in created for pair in stack.receiver.in_trace(t)]
    assert_nothing_secret(everything, code, "traced.example", "secret-path", "abc123", API_KEY,
                          stack.token, stack.admin_key)


def test_edits_lists_and_id_lookups_have_database_spans_without_values(stack):
    code = stack.create(TARGET).json()["code"]
    auth = {"Authorization": f"Bearer {API_KEY}"}
    calls = [
        ("PATCH", f"{stack.http}/api/v1/links/{code}", {"json": {"tags": ["traced"]},
         "headers": {"Content-Type": "application/merge-patch+json"}},
         "PATCH /api/v1/links/{code}", "UPDATE links"),
        ("GET", f"{stack.http}/api/v1/links?tag=traced", {}, "GET /api/v1/links", "SELECT links"),
    ]
    traces = []
    for method, url, extra, server_name, db_name in calls:
        trace_id, _, header = traceparent()
        headers = {**auth, **extra.pop("headers", {}), "traceparent": header}
        answer = requests.request(method, url, headers=headers, timeout=TIMEOUT, **extra)
        assert answer.ok, answer.text
        traces.append((trace_id, server_name, db_name))
    for trace_id, server_name, db_name in traces:
        spans = wait_for(f"{db_name} under {server_name}", lambda: (lambda found: found if {
            server_name, db_name} <= {span.name for _, span in found} else None)(
                stack.receiver.in_trace(trace_id)))
        by_name = {span.name: span for _, span in spans}
        db = by_name[db_name]
        assert db.kind == db.SPAN_KIND_CLIENT
        a = attrs(db.attributes)
        assert (a["db.operation.name"], a["db.collection.name"]) == tuple(db_name.split())
        assert a["db.system"] == "postgresql"
        assert_nothing_secret(spans, code, "traced.example", "secret-path", API_KEY)


def test_resources_name_the_services(stack):
    trace_id, _, header = traceparent()
    assert stack.create(TARGET, header).status_code == 201
    # The node's span, whichever arrives first: a create that takes the last ID of a block
    # also traces the lease, and the id-service may export its span sooner.
    spans = wait_for("the node's span of the create", lambda: [
        (service, span) for service, span in stack.receiver.in_trace(trace_id)
        if service == "shortener"])
    assert any(span.name == "POST /api/v1/links" for _, span in spans)
    services = {service for service, _ in stack.receiver.in_trace(trace_id)}
    assert services <= {"shortener", "ids-under-test"}, services


def test_a_redirect_is_traced_only_when_its_caller_samples_it(stack):
    code = stack.create("https://traced.example/r").json()["code"]
    # Unsampled and untraced redirects first: they must leave no span.
    for header in [None, traceparent(sampled=False)[2]]:
        for _ in range(5):
            headers = {"traceparent": header} if header else {}
            response = requests.get(f"{stack.http}/{code}", headers=headers,
                                    allow_redirects=False, timeout=TIMEOUT)
            assert response.status_code in (301, 302, 307, 308)
    trace_id, parent_span, header = traceparent()
    response = requests.get(f"{stack.http}/{code}", headers={"traceparent": header},
                            allow_redirects=False, timeout=TIMEOUT)
    assert response.status_code in (301, 302, 307, 308)
    spans = wait_for("the sampled redirect's span", lambda: stack.receiver.in_trace(trace_id))
    (service, span), = spans
    assert span.name == "GET /{code}"
    assert span.parent_span_id.hex() == parent_span
    a = attrs(span.attributes)
    assert a["http.route"] == "/{code}"
    assert a["http.response.status_code"] == response.status_code
    assert_nothing_secret(spans, code, "traced.example")
    # Spans leave in the order they end: the sampled one arrived, so would the others have.
    with stack.receiver.lock:
        redirects = [span for _, span in stack.receiver.spans if span.name == "GET /{code}"]
    assert len(redirects) == 1, "only the sampled redirect was recorded"


def test_an_allocate_ids_call_from_grpcio_continues_its_trace(stack, tmp_path):
    proto = _env("SHORTENER_TEST_PROTO_DIR")
    subprocess.run(
        [sys.executable, "-m", "grpc_tools.protoc", f"-I{proto}", f"--python_out={tmp_path}",
         f"--grpc_python_out={tmp_path}", "idalloc/v1/idalloc.proto"],
        check=True, timeout=TIMEOUT,
    )
    sys.path.insert(0, str(tmp_path))
    try:
        from idalloc.v1 import idalloc_pb2, idalloc_pb2_grpc
    finally:
        sys.path.remove(str(tmp_path))
    trace_id, parent_span, header = traceparent()
    with grpc.insecure_channel(f"127.0.0.1:{stack.id_grpc}") as channel:
        stub = idalloc_pb2_grpc.IdAllocatorStub(channel)
        reply = stub.AllocateIds(
            idalloc_pb2.AllocateIdsRequest(namespace=NAMESPACE, count=3),
            metadata=[("authorization", f"Bearer {stack.token}"), ("traceparent", header),
                      ("tracestate", "vendor=1")],
            timeout=TIMEOUT,
        )
    assert sum(r.end - r.start for r in reply.ranges) == 3
    spans = wait_for("the id-service's span", lambda: stack.receiver.in_trace(trace_id))
    server = next(span for s, span in spans if span.name == "idalloc.v1.IdAllocator/AllocateIds")
    assert server.parent_span_id.hex() == parent_span
    assert server.trace_state == "vendor=1"
    a = attrs(server.attributes)
    assert (a["rpc.system"], a["rpc.service"], a["rpc.method"], a["rpc.grpc.status_code"]) == (
        "grpc", "idalloc.v1.IdAllocator", "AllocateIds", 0)
    assert_nothing_secret(spans, stack.token)

    def exported():
        text = requests.get(f"http://127.0.0.1:{stack.id_admin}/metrics", timeout=TIMEOUT).text
        values = {line.rsplit(" ", 1)[0]: float(line.rsplit(" ", 1)[1])
                  for line in text.splitlines() if line.startswith("idservice_trace_spans")}
        return values if values.get("idservice_trace_spans_exported_total", 0) > 0 else None

    counted = wait_for("the id-service to count its exported spans", exported)
    assert counted['idservice_trace_spans_dropped_total{reason="queue_full"}'] == 0
    assert counted['idservice_trace_spans_dropped_total{reason="export_failed"}'] == 0


class HookReceiver(http.server.ThreadingHTTPServer):
    """A webhook endpoint that keeps the headers of each delivery."""

    def __init__(self):
        self.deliveries = []
        outer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                outer.deliveries.append((dict(self.headers), json.loads(body)))
                self.send_response(204)
                self.end_headers()

            def log_message(self, *args):
                pass

        super().__init__(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.serve_forever, daemon=True).start()


def test_a_webhook_delivery_continues_the_trace_of_the_create_that_caused_it(stack):
    hooks = HookReceiver()
    admin = {"Authorization": f"Bearer {stack.admin_key}"}
    registered = requests.post(
        f"{stack.http}/api/v1/webhooks", headers=admin, timeout=TIMEOUT,
        json={"tenant": "default", "url": f"http://127.0.0.1:{hooks.server_port}/hook",
              "secret": "s" * 24})
    assert registered.status_code == 201, registered.text
    try:
        trace_id, _, header = traceparent()
        code = stack.create(TARGET, header).json()["code"]
        headers, event = wait_for("the delivery", lambda: next(
            (d for d in hooks.deliveries if d[1]["data"]["code"] == code), None))
        version, delivered_trace, parent_id, flags = headers["traceparent"].split("-")
        assert (version, delivered_trace, flags) == ("00", trace_id, "01")
        spans = wait_for("the delivery's span", lambda: (lambda found: found if any(
            span.span_id.hex() == parent_id for _, span in found) else None)(
                stack.receiver.in_trace(trace_id)))
        by_id = {span.span_id: span for _, span in spans}
        client = next(span for span in by_id.values() if span.span_id.hex() == parent_id)
        assert client.kind == client.SPAN_KIND_CLIENT and client.name == "POST"
        a = attrs(client.attributes)
        assert (a["http.request.method"], a["http.response.status_code"]) == ("POST", 204)
        assert by_id[client.parent_span_id].name == "POST /api/v1/links"
        assert_nothing_secret(spans, code, "traced.example", "secret-path", stack.admin_key)
    finally:
        requests.delete(f"{stack.http}/api/v1/webhooks/{registered.json()['id']}",
                        headers=admin, timeout=TIMEOUT)
        hooks.shutdown()


def test_grpc_calls_to_the_node_continue_their_trace_and_record_their_status(stack, pb):
    trace_id, parent_span, header = traceparent()
    missing_trace, _, missing_header = traceparent()
    auth = ("authorization", f"Bearer {API_KEY}")
    wait_for("an ID in hand", lambda: ids_in_hand(stack.node_admin))
    with grpc.insecure_channel(stack.grpc) as channel:
        links = pb.services.LinksStub(channel)
        link = links.CreateLink(pb.messages.CreateLinkRequest(url=TARGET),
                                metadata=[auth, ("traceparent", header)], timeout=TIMEOUT)
        with pytest.raises(grpc.RpcError) as missing:
            links.GetLink(pb.messages.GetLinkRequest(code="zzzzzzz"),
                          metadata=[auth, ("traceparent", missing_header)], timeout=TIMEOUT)
    assert missing.value.code() == grpc.StatusCode.NOT_FOUND

    def server_span(trace, name):
        return next((span for s, span in stack.receiver.in_trace(trace)
                     if s == "shortener" and span.name == name), None)

    created = wait_for("the CreateLink span",
                       lambda: server_span(trace_id, "shortener.v1.Links/CreateLink"))
    assert created.kind == created.SPAN_KIND_SERVER
    assert created.parent_span_id.hex() == parent_span
    a = attrs(created.attributes)
    assert (a["rpc.system"], a["rpc.service"], a["rpc.method"], a["rpc.grpc.status_code"]) == (
        "grpc", "shortener.v1.Links", "CreateLink", 0)
    refused = wait_for("the GetLink span",
                       lambda: server_span(missing_trace, "shortener.v1.Links/GetLink"))
    assert attrs(refused.attributes)["rpc.grpc.status_code"] == 5
    assert refused.status.code != refused.status.STATUS_CODE_ERROR, "NOT_FOUND is no server error"
    assert_nothing_secret(stack.receiver.in_trace(trace_id) + stack.receiver.in_trace(missing_trace),
                          link.code, "traced.example", "zzzzzzz", API_KEY)


def test_a_json_allocate_call_to_the_id_service_continues_its_trace(stack):
    trace_id, parent_span, header = traceparent()
    response = requests.post(f"{stack.id_http}/v1/namespaces/{NAMESPACE}/ids:allocate",
                             json={"count": 2}, timeout=TIMEOUT,
                             headers={"Authorization": f"Bearer {stack.token}",
                                      "traceparent": header})
    assert response.status_code == 200, response.text
    spans = wait_for("the JSON call's span", lambda: stack.receiver.in_trace(trace_id))
    (service, span), = spans
    assert service == "ids-under-test"
    assert span.name == "POST /v1/namespaces/{namespace}/ids:allocate"
    assert span.parent_span_id.hex() == parent_span
    a = attrs(span.attributes)
    assert a["http.route"] == "/v1/namespaces/{namespace}/ids:allocate"
    assert a["http.response.status_code"] == 200
    assert_nothing_secret(spans, stack.token, f"/{NAMESPACE}/")


def test_json_log_lines_of_a_traced_request_carry_its_ids(stack):
    trace_id, _, header = traceparent()
    # Registering a webhook logs a line within the request (to a receiver that is not there:
    # nothing is delivered before the test ends).
    response = requests.post(
        f"{stack.http}/api/v1/webhooks",
        json={"tenant": "default", "url": f"http://127.0.0.1:{free_port()}/hook",
              "secret": "s" * 24},
        headers={"Authorization": f"Bearer {stack.admin_key}", "traceparent": header},
        timeout=TIMEOUT)
    assert response.status_code == 201, response.text
    requests.delete(f"{stack.http}/api/v1/webhooks/{response.json()['id']}",
                    headers={"Authorization": f"Bearer {stack.admin_key}"}, timeout=TIMEOUT)
    # The request's server span (its database statements have spans of their own beside it).
    span = wait_for("the registration's span", lambda: next(
        (span for _, span in stack.receiver.in_trace(trace_id)
         if span.name == "POST /api/v1/webhooks"), None))
    lines = [json.loads(line) for line in stack.log("shortener").splitlines()
             if line.startswith("{") and trace_id in line]
    assert lines, "no log line carries the trace"
    assert all(line["span"]["trace_id"] == trace_id for line in lines)
    assert any(line["span"]["span_id"] == span.span_id.hex() for line in lines)
    # Both services write one shape: the event's fields beside its timestamp, level and
    # target, not nested, so one log pipeline rule reads either.
    for name in ("shortener", "id-service"):
        logged = [json.loads(line) for line in stack.log(name).splitlines() if line.startswith("{")]
        assert logged, f"{name} wrote no JSON line"
        for line in logged:
            assert {"timestamp", "level", "message", "target"} <= line.keys(), (name, line)
            assert "fields" not in line, (name, line)


def test_without_a_collector_requests_stay_fast_and_dropped_spans_are_counted(stack):
    code = stack.create("https://traced.example/down").json()["code"]
    dropped = stack.metric("shortener_trace_spans_dropped_total")
    rss_before = rss_kib(stack.node.pid)
    stack.otlp.stop(grace=None)
    for phase in ("stopped", "slow"):
        if phase == "slow":
            # Back, but answering each export only after the export deadline.
            stack.receiver.delay = 2.0
            stack.otlp = start_receiver(stack.receiver, stack.otlp_port)
        slowest = 0.0
        for i in range(300):
            header = traceparent()[2]
            started = time.monotonic()
            if i % 10 == 0:
                response = stack.create(f"https://traced.example/{phase}/{i}", header)
                assert response.status_code == 201, response.text
                slowest = max(slowest, response.elapsed.total_seconds())
                continue
            r = requests.get(f"{stack.http}/{code}", headers={"traceparent": header},
                             allow_redirects=False, timeout=TIMEOUT)
            assert r.status_code in (301, 302, 307, 308)
            slowest = max(slowest, time.monotonic() - started)
        assert slowest < 1.0, f"a request took {slowest:.3f}s with the collector {phase}"
        dropped = wait_for(
            f"dropped spans to be counted with the collector {phase}",
            lambda: (lambda now: now if now > dropped else None)(
                stack.metric("shortener_trace_spans_dropped_total")),
        )
    # The queue is bounded (256 spans here): 600 traced requests leave no lasting growth.
    growth = rss_kib(stack.node.pid) - rss_before
    assert growth < 64 * 1024, f"the node grew by {growth} KiB"
    stack.receiver.delay = 0.0


def rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0
