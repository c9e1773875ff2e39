"""Fixtures shared by the conformance tests: the running server (started by tests/python/run),
its OpenAPI document, and a checker that holds every response to that document."""

import os
import random
import re
import sys
import uuid
from dataclasses import dataclass

import pytest
import requests
import schemathesis


def _env(name: str) -> str:
    value = os.environ.get(name)
    if not value:
        pytest.exit(f"{name} is not set: run these tests through tests/python/run", returncode=2)
    return value


@dataclass(frozen=True)
class Server:
    """Where the shortener under test listens, and the credentials it accepts."""

    http: str
    grpc: str
    api_key: str
    admin_api_key: str
    grpc_api_key: str
    public_url: str
    proto_dir: str


@pytest.fixture(scope="session")
def server() -> Server:
    return Server(
        http=_env("SHORTENER_TEST_HTTP").rstrip("/"),
        grpc=_env("SHORTENER_TEST_GRPC"),
        api_key=_env("SHORTENER_TEST_API_KEY"),
        admin_api_key=_env("SHORTENER_TEST_ADMIN_API_KEY"),
        grpc_api_key=_env("SHORTENER_TEST_GRPC_API_KEY"),
        public_url=_env("SHORTENER_TEST_PUBLIC_URL"),
        proto_dir=_env("SHORTENER_TEST_PROTO_DIR"),
    )


@pytest.fixture(scope="session")
def openapi_doc(server: Server) -> dict:
    """The document as the server serves it (not the file), so what clients see is what is
    tested."""
    response = requests.get(f"{server.http}/api/v1/openapi.json", timeout=10)
    assert response.status_code == 200, response.text
    return response.json()


def _media_type(response: requests.Response) -> str | None:
    value = response.headers.get("Content-Type")
    return value.split(";")[0].strip().lower() if value else None


class Conformance:
    """Checks one response against the operation the document declares for it: the status is
    documented, the media type is a documented one, the required headers are present and
    match their schemas, and the body validates against the response schema."""

    def __init__(self, doc: dict):
        self.doc = doc
        self.schema = schemathesis.openapi.from_dict(doc)
        self.seen: set[tuple[str, str, str]] = set()

    def _resolve(self, node: dict) -> dict:
        while "$ref" in node:
            target = self.doc
            for part in node["$ref"].removeprefix("#/").split("/"):
                target = target[part]
            node = target
        return node

    def check(self, response: requests.Response, path: str, method: str, status: int) -> None:
        method = method.lower()
        assert response.status_code == status, (
            f"{method.upper()} {response.request.url}: expected {status}, got "
            f"{response.status_code}: {response.text[:500]}"
        )
        operation = self.doc["paths"][path][method]
        responses = operation["responses"]
        assert str(status) in responses, f"{method.upper()} {path}: {status} is not documented"
        definition = self._resolve(responses[str(status)])
        content = definition.get("content", {})
        media_type = _media_type(response)
        if method == "head":
            assert response.content == b""
        elif content:
            assert media_type in content, (
                f"{method.upper()} {path} {status}: Content-Type {media_type!r} is not one of "
                f"{sorted(content)}"
            )
        else:
            assert response.content == b"", f"{method.upper()} {path} {status} has a body"
        for name, header in definition.get("headers", {}).items():
            header = self._resolve(header)
            value = response.headers.get(name)
            if header.get("required"):
                assert value is not None, f"{method.upper()} {path} {status}: no {name} header"
            if value is None:
                continue
            spec = header["schema"]
            if spec.get("type") == "integer":
                assert re.fullmatch(r"[0-9]+", value), f"{name}: {value!r} is not an integer"
                assert int(value) >= spec.get("minimum", 0), f"{name}: {value!r}"
            if "enum" in spec:
                assert value in spec["enum"], f"{name}: {value!r} not in {spec['enum']}"
        # The body against the response schema, with schemathesis' own validator.
        self.schema[path][method.upper()].validate_response(response)
        self.seen.add((path, method, str(status)))


@pytest.fixture(scope="session")
def conformance(openapi_doc: dict) -> Conformance:
    return Conformance(openapi_doc)


def client_address() -> str:
    """A random address from the documentation prefix 2001:db8::/32, in a /64 of its own (the
    node counts IPv6 clients by /64): a header value only."""
    return "2001:db8:%x:%x::1" % (random.getrandbits(16), random.getrandbits(16))


class Api:
    """A thin JSON API client that never follows redirects (targets are made-up hosts) and
    checks every response it gets against the document."""

    def __init__(self, server: Server, conformance: Conformance):
        self.server = server
        self.conformance = conformance
        self.session = requests.Session()

    def auth(self, key: str | None = None) -> dict:
        return {"Authorization": f"Bearer {key or self.server.api_key}"}

    def request(self, method: str, path: str, template: str, status: int, **kwargs):
        kwargs.setdefault("timeout", 10)
        kwargs.setdefault("allow_redirects", False)
        # The runner trusts X-Forwarded-For from loopback, so each request can stand for its own
        # client and the per-address 404 limit never couples one test to another.
        kwargs["headers"] = {"X-Forwarded-For": client_address(), **(kwargs.get("headers") or {})}
        response = self.session.request(method, f"{self.server.http}{path}", **kwargs)
        self.conformance.check(response, template, method, status)
        return response

    def create(self, body, status: int = 201, headers: dict | None = None, **kwargs):
        all_headers = {**self.auth(), **(headers or {})}
        if "data" not in kwargs:
            kwargs["json"] = body
        return self.request("POST", "/api/v1/links", "/api/v1/links", status,
                            headers=all_headers, **kwargs)

    def get(self, code: str, status: int = 200, headers: dict | None = None):
        return self.request("GET", f"/api/v1/links/{code}", "/api/v1/links/{code}", status,
                            headers=headers if headers is not None else self.auth())

    def delete(self, code: str, status: int = 204, headers: dict | None = None):
        return self.request("DELETE", f"/api/v1/links/{code}", "/api/v1/links/{code}", status,
                            headers=headers if headers is not None else self.auth())

    def follow(self, code: str, status: int, method: str = "GET", **kwargs):
        return self.request(method, f"/{code}", "/{code}", status, **kwargs)


@pytest.fixture(scope="session")
def api(server: Server, conformance: Conformance) -> Api:
    return Api(server, conformance)


@pytest.fixture
def unique_url() -> str:
    """A target URL no other test uses (so dedup and aliases do not collide across tests)."""
    return f"https://example.com/t/{uuid.uuid4().hex}"


@pytest.fixture(scope="session")
def pb(server, tmp_path_factory):
    """`shortener_pb2` and `shortener_pb2_grpc`, generated from proto/ into a temp dir."""
    import grpc_tools
    from grpc_tools import protoc

    out = tmp_path_factory.mktemp("stubs")
    well_known = os.path.join(os.path.dirname(grpc_tools.__file__), "_proto")
    rc = protoc.main([
        "protoc", f"-I{server.proto_dir}", f"-I{well_known}", f"--python_out={out}",
        f"--grpc_python_out={out}", "shortener/v1/shortener.proto",
    ])
    assert rc == 0, "protoc failed on proto/proto/shortener/v1/shortener.proto"
    sys.path.insert(0, str(out))
    try:
        from shortener.v1 import shortener_pb2, shortener_pb2_grpc
    finally:
        sys.path.remove(str(out))

    class Stubs:
        messages = shortener_pb2
        services = shortener_pb2_grpc

    return Stubs
