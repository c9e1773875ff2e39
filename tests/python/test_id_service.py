"""The id-service from outside: the documented Python (grpcio) and curl examples, and the JSON
endpoint held to its OpenAPI document, against a real id-service with a tokens file (started
by tests/python/run)."""

import json
import os
import shutil
import subprocess
import sys

import jsonschema
import pytest
import requests
from openapi_spec_validator import validate as validate_spec

TIMEOUT = 20
NAMESPACE = "py_orders"


def _env(name: str) -> str:
    value = os.environ.get(name)
    if not value:
        pytest.exit(f"{name} is not set: run these tests through tests/python/run", returncode=2)
    return value


@pytest.fixture(scope="module")
def ids():
    return {
        "grpc": _env("ID_SERVICE_TEST_GRPC"),
        "http": _env("ID_SERVICE_TEST_HTTP"),
        "token": _env("ID_SERVICE_TEST_TOKEN"),
        "limited": _env("ID_SERVICE_TEST_LIMITED_TOKEN"),
        "examples": _env("ID_SERVICE_TEST_EXAMPLES"),
        "proto": _env("SHORTENER_TEST_PROTO_DIR"),
    }


@pytest.fixture(scope="module")
def stubs(ids, tmp_path_factory):
    """idalloc stubs generated from proto/ the way the example's docstring says."""
    out = tmp_path_factory.mktemp("idalloc-stubs")
    subprocess.run(
        [sys.executable, "-m", "grpc_tools.protoc", f"-I{ids['proto']}", f"--python_out={out}",
         f"--grpc_python_out={out}", "idalloc/v1/idalloc.proto"],
        check=True, timeout=TIMEOUT,
    )
    return str(out)


def run_example(ids, stubs, token, namespace=NAMESPACE, count=1, attempts=3):
    env = {**os.environ, "PYTHONPATH": stubs, "ID_SERVICE_CALLER_TOKEN": token}
    return subprocess.run(
        [sys.executable, os.path.join(ids["examples"], "allocate_ids.py"), "--target", ids["grpc"],
         "--namespace", namespace, "--count", str(count), "--attempts", str(attempts)],
        env=env, capture_output=True, text=True, timeout=TIMEOUT,
    )


def ranges_of(output: str) -> list[tuple[int, int]]:
    return [tuple(r) for r in json.loads(output)["ranges"]]


def assert_disjoint(ranges):
    ordered = sorted(ranges)
    for start, end in ordered:
        assert start < end, ordered
    for a, b in zip(ordered, ordered[1:]):
        assert a[1] <= b[0], f"{a} and {b} overlap"


def test_the_python_example_allocates_exactly_the_ids_asked_for(ids, stubs):
    seen = []
    for count in (1, 100, 1000, 7):
        done = run_example(ids, stubs, ids["token"], count=count)
        assert done.returncode == 0, done.stderr
        ranges = ranges_of(done.stdout)
        assert sum(end - start for start, end in ranges) == count
        seen.extend(ranges)
    assert_disjoint(seen)


@pytest.mark.parametrize(
    ("case", "token", "namespace", "count", "code"),
    [
        ("wrong token", "idsvc_not-a-token-anyone-was-given-00000000", NAMESPACE, 1, "UNAUTHENTICATED"),
        ("no token", "", NAMESPACE, 1, "UNAUTHENTICATED"),
        ("namespace not allowed", None, "py_other", 1, "PERMISSION_DENIED"),
        ("count 0", None, NAMESPACE, 0, "INVALID_ARGUMENT"),
        ("count too big", None, NAMESPACE, 10_001, "INVALID_ARGUMENT"),
    ],
)
def test_the_python_example_reports_a_refusal_and_exits_1(ids, stubs, case, token, namespace, count, code):
    done = run_example(ids, stubs, ids["token"] if token is None else token, namespace, count)
    assert done.returncode == 1, f"{case}: {done.stdout}"
    assert code in done.stderr, f"{case}: {done.stderr}"
    assert done.stdout == "", case


def test_the_python_example_waits_out_a_quota_refusal_as_the_server_advises(ids, stubs):
    first = run_example(ids, stubs, ids["limited"], count=20)
    assert first.returncode == 0, first.stderr
    refused = run_example(ids, stubs, ids["limited"], count=20, attempts=1)
    assert refused.returncode == 1 and "RESOURCE_EXHAUSTED" in refused.stderr, refused.stderr
    waited = run_example(ids, stubs, ids["limited"], count=20, attempts=5)
    assert waited.returncode == 0, waited.stderr
    assert sum(e - s for s, e in ranges_of(waited.stdout)) == 20


@pytest.fixture(scope="module")
def openapi(ids):
    doc = requests.get(f"{ids['http']}/v1/openapi.json", timeout=TIMEOUT).json()
    validate_spec(doc)
    return doc


def schema(doc, name):
    """A component schema with its references resolvable by jsonschema."""
    return {**doc["components"]["schemas"][name], "components": doc["components"]}


def test_the_json_endpoint_answers_as_its_openapi_document_says(ids, openapi):
    url = f"{ids['http']}/v1/namespaces/{NAMESPACE}/ids:allocate"
    ok = requests.post(url, json={"count": 250}, headers={"Authorization": f"Bearer {ids['token']}"},
                       timeout=TIMEOUT)
    assert ok.status_code == 200, ok.text
    assert ok.headers["Cache-Control"] == "no-store"
    body = ok.json()
    jsonschema.validate(body, schema(openapi, "AllocateResponse"))
    assert sum(end - start for start, end in body["ranges"]) == 250
    documented = openapi["paths"]["/v1/namespaces/{namespace}/ids:allocate"]["post"]["responses"]
    for case, kwargs, status, code in [
        ("no token", {"json": {"count": 1}}, 401, "unauthenticated"),
        ("count 0", {"json": {"count": 0}, "auth": True}, 400, "invalid_argument"),
        ("not JSON", {"data": "count=1", "auth": True}, 400, "invalid_argument"),
        ("other namespace", {"json": {"count": 1}, "auth": True, "ns": "py_other"}, 403, "permission_denied"),
    ]:
        headers = {"Authorization": f"Bearer {ids['token']}"} if kwargs.pop("auth", False) else {}
        target = url.replace(NAMESPACE, kwargs.pop("ns", NAMESPACE))
        refused = requests.post(target, headers=headers, timeout=TIMEOUT, **kwargs)
        assert refused.status_code == status, f"{case}: {refused.text}"
        assert str(status) in documented, f"{case}: {status} is not documented"
        error = refused.json()
        jsonschema.validate(error, schema(openapi, "Error"))
        assert error["error"] == code, case


@pytest.mark.skipif(shutil.which("curl") is None, reason="curl is not installed")
def test_the_curl_example_allocates_ids(ids):
    done = subprocess.run(
        [os.path.join(ids["examples"], "allocate_ids.sh"), ids["http"], NAMESPACE, "42"],
        env={**os.environ, "ID_SERVICE_CALLER_TOKEN": ids["token"]},
        capture_output=True, text=True, timeout=TIMEOUT,
    )
    assert done.returncode == 0, done.stderr
    assert sum(end - start for start, end in ranges_of(done.stdout)) == 42
    refused = subprocess.run(
        [os.path.join(ids["examples"], "allocate_ids.sh"), ids["http"], "py_other", "1"],
        env={**os.environ, "ID_SERVICE_CALLER_TOKEN": ids["token"]},
        capture_output=True, text=True, timeout=TIMEOUT,
    )
    assert refused.returncode != 0
    assert json.loads(refused.stdout.strip())["error"] == "permission_denied"
