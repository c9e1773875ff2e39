"""Rate limits as the contracts describe them, against a second server started with tight limits
(1 create per second per API key, burst 5, batch limit 5): HTTP 429 `rate_limited` with
Retry-After, gRPC RESOURCE_EXHAUSTED with `retry-after` metadata."""

import dataclasses
import os
import uuid

import grpc
import pytest

from conftest import Api

TIMEOUT = 10


@pytest.fixture(scope="module")
def limited(server):
    return dataclasses.replace(
        server,
        http=os.environ["SHORTENER_TEST_LIMITED_HTTP"],
        grpc=os.environ["SHORTENER_TEST_LIMITED_GRPC"],
        api_key=os.environ["SHORTENER_TEST_LIMITED_API_KEY"],
        grpc_api_key=os.environ["SHORTENER_TEST_LIMITED_API_KEY"],
    )


@pytest.fixture(scope="module")
def limited_api(limited, conformance):
    return Api(limited, conformance)


@pytest.fixture(scope="module")
def limited_links(limited, pb):
    with grpc.insecure_channel(limited.grpc) as channel:
        yield pb.services.LinksStub(channel)


def burst() -> int:
    return int(os.environ.get("SHORTENER_TEST_LIMITED_BURST", "5"))


def test_http_create_over_the_key_rate_returns_429_with_retry_after(limited_api):
    seen = []
    for _ in range(burst() + 10):
        response = limited_api.session.post(
            f"{limited_api.server.http}/api/v1/links", headers=limited_api.auth(), timeout=TIMEOUT,
            json={"url": f"https://example.com/l/{uuid.uuid4().hex}"})
        seen.append(response.status_code)
        if response.status_code == 429:
            break
        assert response.status_code == 201, response.text
    assert seen[-1] == 429, f"never limited: {seen}"
    assert seen.count(201) >= burst() - 1
    limited_api.conformance.check(response, "/api/v1/links", "post", 429)
    assert response.json()["error"] == "rate_limited"
    assert 1 <= int(response.headers["Retry-After"]) <= 5


def test_grpc_create_over_the_key_rate_is_resource_exhausted_with_retry_after(pb, limited, limited_links):
    auth = (("authorization", f"Bearer {limited.grpc_api_key}"),)
    for _ in range(burst() + 10):
        try:
            limited_links.CreateLink(pb.messages.CreateLinkRequest(url=f"https://example.com/l/{uuid.uuid4().hex}"),
                                     metadata=auth, timeout=TIMEOUT)
        except grpc.RpcError as error:
            trailers = dict(error.trailing_metadata() or ())
            assert error.code() == grpc.StatusCode.RESOURCE_EXHAUSTED, error
            assert trailers.get("error-code") == "rate_limited"
            assert 1 <= int(trailers["retry-after"]) <= 5
            return
    pytest.fail("CreateLink was never limited")


def test_grpc_batch_over_the_limit_is_invalid_argument(pb, limited, limited_links):
    auth = (("authorization", f"Bearer {limited.grpc_api_key}"),)
    items = [pb.messages.CreateLinkRequest(url="https://example.com/") for _ in range(burst() + 1)]
    with pytest.raises(grpc.RpcError) as caught:
        limited_links.BatchCreateLinks(pb.messages.BatchCreateLinksRequest(items=items), metadata=auth,
                                       timeout=TIMEOUT)
    assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
