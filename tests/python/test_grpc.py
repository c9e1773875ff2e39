"""The gRPC API (`shortener.v1.Links`, health, reflection) from Python stubs generated from
proto/ at run time: a client that shares no code with the server."""

import os
import re
import uuid
from datetime import datetime, timedelta, timezone

import grpc
import pytest
import requests
from google.protobuf import descriptor_pool
from google.protobuf.timestamp_pb2 import Timestamp
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc
from grpc_reflection.v1alpha.proto_reflection_descriptor_database import (
    ProtoReflectionDescriptorDatabase,
)

GENERATED = re.compile(r"[0-9A-Za-z]{7}")
PRIVATE = re.compile(r"[0-9A-Za-z]{16}")
TIMEOUT = 10


@pytest.fixture(scope="module")
def channel(server):
    with grpc.insecure_channel(server.grpc) as channel:
        grpc.channel_ready_future(channel).result(timeout=TIMEOUT)
        yield channel


@pytest.fixture(scope="module")
def links(pb, channel):
    return pb.services.LinksStub(channel)


@pytest.fixture(scope="module")
def auth(server):
    return (("authorization", f"Bearer {server.grpc_api_key}"),)


def unique_url() -> str:
    return f"https://example.com/g/{uuid.uuid4().hex}"


def alias() -> str:
    return f"g-{uuid.uuid4().hex[:12]}"


def timestamp(moment: datetime) -> Timestamp:
    ts = Timestamp()
    ts.FromDatetime(moment)
    return ts


def status_of(call) -> tuple[grpc.StatusCode, str | None, str | None]:
    """Runs `call` expecting an RpcError; returns its code and `error-code` / `retry-after`
    metadata."""
    with pytest.raises(grpc.RpcError) as caught:
        call()
    error = caught.value
    trailers = dict(error.trailing_metadata() or ())
    return error.code(), trailers.get("error-code"), trailers.get("retry-after")


# Health and reflection.


def test_health_check_reports_serving(channel):
    health = health_pb2_grpc.HealthStub(channel)
    reply = health.Check(health_pb2.HealthCheckRequest(service=""), timeout=TIMEOUT)
    assert reply.status == health_pb2.HealthCheckResponse.SERVING


def test_health_check_knows_the_links_service(channel):
    health = health_pb2_grpc.HealthStub(channel)
    reply = health.Check(health_pb2.HealthCheckRequest(service="shortener.v1.Links"), timeout=TIMEOUT)
    assert reply.status == health_pb2.HealthCheckResponse.SERVING


def test_reflection_v1alpha_lists_and_describes_the_links_service(channel):
    database = ProtoReflectionDescriptorDatabase(channel)
    services = set(database.get_services())
    assert {"shortener.v1.Links", "grpc.health.v1.Health"} <= services, services
    pool = descriptor_pool.DescriptorPool(database)
    service = pool.FindServiceByName("shortener.v1.Links")
    assert {m.name for m in service.methods} == {
        "CreateLink", "BatchCreateLinks", "GetLink", "DeleteLink", "ListLinks", "UpdateLink",
        "GetLinkHistory", "ImportLinks", "ExportLinks", "GetLinkQr", "GetLinkStats",
        "GetTenantStats", "ClaimDomain", "ListDomains", "GetDomain", "UpdateDomain", "DeleteDomain"}
    assert service.FindMethodByName("GetLink").output_type.full_name == "shortener.v1.Link"


def test_reflection_v1_lists_the_links_service(channel):
    # v1 is wire-compatible with v1alpha; only the method path differs.
    call = channel.stream_stream(
        "/grpc.reflection.v1.ServerReflection/ServerReflectionInfo",
        request_serializer=reflection_pb2.ServerReflectionRequest.SerializeToString,
        response_deserializer=reflection_pb2.ServerReflectionResponse.FromString,
    )
    replies = list(call(iter([reflection_pb2.ServerReflectionRequest(list_services="")]),
                        timeout=TIMEOUT))
    assert len(replies) == 1
    names = {s.name for s in replies[0].list_services_response.service}
    assert "shortener.v1.Links" in names, names


def test_reflection_v1alpha_raw_call_lists_the_links_service(channel):
    stub = reflection_pb2_grpc.ServerReflectionStub(channel)
    replies = list(stub.ServerReflectionInfo(
        iter([reflection_pb2.ServerReflectionRequest(list_services="")]), timeout=TIMEOUT))
    names = {s.name for s in replies[0].list_services_response.service}
    assert "shortener.v1.Links" in names, names


# CreateLink.


def test_create_link_returns_the_committed_link(pb, links, auth, server):
    url = unique_url()
    before = datetime.now(timezone.utc) - timedelta(seconds=5)
    link = links.CreateLink(pb.messages.CreateLinkRequest(url=url), metadata=auth, timeout=TIMEOUT)
    assert GENERATED.fullmatch(link.code), link.code
    assert link.short_url == server.public_url + link.code
    assert link.url == url
    assert link.HasField("created_at")
    assert before <= link.created_at.ToDatetime(tzinfo=timezone.utc) <= datetime.now(timezone.utc) + timedelta(seconds=5)
    assert not link.HasField("expires_at") and not link.HasField("deleted_at")
    assert (link.clicks.human, link.clicks.head, link.clicks.bot) == (0, 0, 0)


def test_a_link_created_over_grpc_is_the_same_over_http(pb, links, auth, server):
    expiry = datetime.now(timezone.utc).replace(microsecond=0) + timedelta(hours=1)
    link = links.CreateLink(pb.messages.CreateLinkRequest(url=unique_url(), expires_at=timestamp(expiry)),
                            metadata=auth, timeout=TIMEOUT)
    assert link.expires_at.ToDatetime(tzinfo=timezone.utc) == expiry
    response = requests.get(f"{server.http}/api/v1/links/{link.code}", timeout=TIMEOUT,
                            headers={"Authorization": f"Bearer {server.api_key}"})
    assert response.status_code == 200
    body = response.json()
    assert (body["code"], body["short_url"], body["url"]) == (link.code, link.short_url, link.url)
    assert datetime.fromisoformat(body["expires_at"].replace("Z", "+00:00")) == expiry
    created = datetime.fromisoformat(body["created_at"].replace("Z", "+00:00"))
    assert abs(created - link.created_at.ToDatetime(tzinfo=timezone.utc)) < timedelta(milliseconds=1)
    edge = requests.get(f"{server.http}/{link.code}", allow_redirects=False, timeout=TIMEOUT)
    assert edge.status_code == 302 and edge.headers["Location"] == link.url


def test_create_link_with_alias_then_taken_alias_is_already_exists(pb, links, auth):
    name = alias()
    link = links.CreateLink(pb.messages.CreateLinkRequest(url=unique_url(), alias=name),
                            metadata=auth, timeout=TIMEOUT)
    assert link.code == name
    code, error, _ = status_of(lambda: links.CreateLink(
        pb.messages.CreateLinkRequest(url=unique_url(), alias=name), metadata=auth, timeout=TIMEOUT))
    assert (code, error) == (grpc.StatusCode.ALREADY_EXISTS, "alias_taken")


@pytest.mark.parametrize(
    "fields, error",
    [
        ({"url": "javascript:alert(1)"}, "invalid_url"),
        ({"url": ""}, "invalid_url"),
        ({"url": "https://user:pw@example.com/"}, "invalid_url"),
        ({"url": "https://sho.rt/x"}, "invalid_url"),
        ({"url": "https://example.com/", "alias": "api"}, "invalid_alias"),
        ({"url": "https://example.com/", "alias": "abcdefg"}, "invalid_alias"),
        ({"url": "https://example.com/", "alias": ""}, "invalid_alias"),
        ({"url": "https://example.com/", "alias": "g-x", "private": True}, "conflicting_options"),
        ({"url": "https://example.com/", "dedup": True, "private": True}, "conflicting_options"),
        ({"url": "https://example.com/", "idempotency_key": ""}, "invalid_idempotency_key"),
        ({"url": "https://example.com/", "idempotency_key": "x" * 201}, "invalid_idempotency_key"),
    ],
)
def test_create_link_with_a_bad_field_is_invalid_argument(pb, links, auth, fields, error):
    request = pb.messages.CreateLinkRequest(**fields)
    code, got, _ = status_of(lambda: links.CreateLink(request, metadata=auth, timeout=TIMEOUT))
    assert (code, got) == (grpc.StatusCode.INVALID_ARGUMENT, error)


def test_create_link_with_a_past_expiry_is_invalid_argument(pb, links, auth):
    past = timestamp(datetime.now(timezone.utc) - timedelta(minutes=1))
    request = pb.messages.CreateLinkRequest(url=unique_url(), expires_at=past)
    code, error, _ = status_of(lambda: links.CreateLink(request, metadata=auth, timeout=TIMEOUT))
    assert (code, error) == (grpc.StatusCode.INVALID_ARGUMENT, "invalid_expiry")


def test_create_link_with_an_out_of_range_timestamp_is_invalid_argument(pb, links, auth):
    bad = Timestamp(seconds=2**62, nanos=0)
    request = pb.messages.CreateLinkRequest(url=unique_url(), expires_at=bad)
    code, error, _ = status_of(lambda: links.CreateLink(request, metadata=auth, timeout=TIMEOUT))
    assert (code, error) == (grpc.StatusCode.INVALID_ARGUMENT, "invalid_expiry")


def test_create_link_dedup_returns_the_same_code(pb, links, auth):
    url = unique_url()
    first = links.CreateLink(pb.messages.CreateLinkRequest(url=url, dedup=True), metadata=auth, timeout=TIMEOUT)
    again = links.CreateLink(pb.messages.CreateLinkRequest(url=url, dedup=True), metadata=auth, timeout=TIMEOUT)
    assert again.code == first.code


def test_create_link_private_gets_a_16_character_code(pb, links, auth):
    link = links.CreateLink(pb.messages.CreateLinkRequest(url=unique_url(), private=True),
                            metadata=auth, timeout=TIMEOUT)
    assert PRIVATE.fullmatch(link.code), link.code


def test_create_link_idempotency_key_replays_and_refuses_reuse(pb, links, auth):
    key, url = f"k-{uuid.uuid4().hex}", unique_url()
    first = links.CreateLink(pb.messages.CreateLinkRequest(url=url, idempotency_key=key),
                             metadata=auth, timeout=TIMEOUT)
    retry = links.CreateLink(pb.messages.CreateLinkRequest(url=url, idempotency_key=key),
                             metadata=auth, timeout=TIMEOUT)
    assert retry.code == first.code
    other = pb.messages.CreateLinkRequest(url=url + "/other", idempotency_key=key)
    code, error, _ = status_of(lambda: links.CreateLink(other, metadata=auth, timeout=TIMEOUT))
    assert error == "idempotency_key_reused"
    assert code == grpc.StatusCode.FAILED_PRECONDITION


# Branded domains.


def test_a_domain_is_claimed_changed_and_removed_over_grpc(pb, links, auth):
    m = pb.messages
    host = "g-" + uuid.uuid4().hex[:10] + ".conformance.example"
    claimed = links.ClaimDomain(m.ClaimDomainRequest(host=host.upper()), metadata=auth, timeout=TIMEOUT)
    assert (claimed.host, claimed.tenant, claimed.robots) == (host, "default", "disallow")
    assert not claimed.HasField("root_url") and not claimed.HasField("redirect_status")
    code, error, _ = status_of(lambda: links.ClaimDomain(m.ClaimDomainRequest(host=host), metadata=auth, timeout=TIMEOUT))
    assert (code, error) == (grpc.StatusCode.ALREADY_EXISTS, "domain_taken")
    code, error, _ = status_of(lambda: links.ClaimDomain(m.ClaimDomainRequest(host="elsewhere.example"), metadata=auth, timeout=TIMEOUT))
    assert (code, error) == (grpc.StatusCode.PERMISSION_DENIED, "host_not_allowed")
    code, error, _ = status_of(lambda: links.ClaimDomain(m.ClaimDomainRequest(host="[::1]"), metadata=auth, timeout=TIMEOUT))
    assert (code, error) == (grpc.StatusCode.INVALID_ARGUMENT, "ip_host")
    changed = links.UpdateDomain(m.UpdateDomainRequest(host=host, expired_url="https://www.example.com/gone", redirect_status=301),
                                 metadata=auth, timeout=TIMEOUT)
    assert (changed.expired_url, changed.redirect_status) == ("https://www.example.com/gone", 301)
    code, error, _ = status_of(lambda: links.UpdateDomain(m.UpdateDomainRequest(host=host, root_url=f"https://{host}/"),
                                                          metadata=auth, timeout=TIMEOUT))
    assert (code, error) == (grpc.StatusCode.INVALID_ARGUMENT, "fallback_loop")
    changed = links.UpdateDomain(m.UpdateDomainRequest(host=host, assetlinks='[ {"relation": []} ]'),
                                 metadata=auth, timeout=TIMEOUT)
    assert changed.assetlinks == '[{"relation":[]}]' and not changed.HasField("apple_app_site_association")
    for bad, want in ((m.UpdateDomainRequest(host=host, apple_app_site_association="not json"), "invalid_app_file"),
                      (m.UpdateDomainRequest(host=host, apple_app_site_association="[]"), "invalid_app_file"),
                      (m.UpdateDomainRequest(host=host, assetlinks='["' + "x" * 16384 + '"]'), "app_file_too_large")):
        code, error, _ = status_of(lambda: links.UpdateDomain(bad, metadata=auth, timeout=TIMEOUT))
        assert (code, error) == (grpc.StatusCode.INVALID_ARGUMENT, want)
    assert links.GetDomain(m.GetDomainRequest(host=host), metadata=auth, timeout=TIMEOUT) == changed
    assert host in [d.host for d in links.ListDomains(m.ListDomainsRequest(limit=1000), metadata=auth, timeout=TIMEOUT).domains]
    assert links.GetDomain(m.GetDomainRequest(host=host), metadata=auth, timeout=TIMEOUT) == changed
    links.DeleteDomain(m.DeleteDomainRequest(host=host), metadata=auth, timeout=TIMEOUT)
    code, error, _ = status_of(lambda: links.GetDomain(m.GetDomainRequest(host=host), metadata=auth, timeout=TIMEOUT))
    assert (code, error) == (grpc.StatusCode.NOT_FOUND, "not_found")


# Credentials.


@pytest.mark.parametrize("metadata", [(), (("authorization", "Bearer not-a-key-0123456789"),),
                                      (("authorization", "Basic dXNlcjpwYXNz"),)])
def test_every_rpc_refuses_bad_credentials_with_unauthenticated(pb, links, metadata):
    m = pb.messages
    calls = [
        lambda: links.CreateLink(m.CreateLinkRequest(url=unique_url()), metadata=metadata, timeout=TIMEOUT),
        lambda: links.BatchCreateLinks(m.BatchCreateLinksRequest(items=[m.CreateLinkRequest(url=unique_url())]),
                                       metadata=metadata, timeout=TIMEOUT),
        lambda: links.GetLink(m.GetLinkRequest(code="zzzzzzz"), metadata=metadata, timeout=TIMEOUT),
        lambda: links.DeleteLink(m.DeleteLinkRequest(code="zzzzzzz"), metadata=metadata, timeout=TIMEOUT),
    ]
    for call in calls:
        code, error, _ = status_of(call)
        assert (code, error) == (grpc.StatusCode.UNAUTHENTICATED, "unauthorized")


# GetLink and DeleteLink.


def test_get_link_returns_the_created_link(pb, links, auth):
    created = links.CreateLink(pb.messages.CreateLinkRequest(url=unique_url()), metadata=auth, timeout=TIMEOUT)
    got = links.GetLink(pb.messages.GetLinkRequest(code=created.code), metadata=auth, timeout=TIMEOUT)
    assert got == created


@pytest.mark.parametrize("code", ["zzzzzzz", "no-such-alias", "0000000000000000"])
def test_get_and_delete_of_an_unknown_code_are_not_found(pb, links, auth, code):
    for call in (
        lambda: links.GetLink(pb.messages.GetLinkRequest(code=code), metadata=auth, timeout=TIMEOUT),
        lambda: links.DeleteLink(pb.messages.DeleteLinkRequest(code=code), metadata=auth, timeout=TIMEOUT),
    ):
        status, error, _ = status_of(call)
        assert (status, error) == (grpc.StatusCode.NOT_FOUND, "not_found")


@pytest.mark.parametrize("code", ["", "a.b", "x" * 65])
def test_get_of_a_malformed_code_is_invalid_argument(pb, links, auth, code):
    status, error, _ = status_of(lambda: links.GetLink(pb.messages.GetLinkRequest(code=code),
                                                       metadata=auth, timeout=TIMEOUT))
    assert (status, error) == (grpc.StatusCode.INVALID_ARGUMENT, "invalid_code")


def test_delete_link_then_get_shows_deleted_and_the_edge_answers_410(pb, links, auth, server):
    created = links.CreateLink(pb.messages.CreateLinkRequest(url=unique_url()), metadata=auth, timeout=TIMEOUT)
    links.DeleteLink(pb.messages.DeleteLinkRequest(code=created.code), metadata=auth, timeout=TIMEOUT)
    links.DeleteLink(pb.messages.DeleteLinkRequest(code=created.code), metadata=auth, timeout=TIMEOUT)
    got = links.GetLink(pb.messages.GetLinkRequest(code=created.code), metadata=auth, timeout=TIMEOUT)
    assert got.HasField("deleted_at")
    assert got.deleted_at.ToDatetime(tzinfo=timezone.utc) >= created.created_at.ToDatetime(tzinfo=timezone.utc)
    edge = requests.get(f"{server.http}/{created.code}", allow_redirects=False, timeout=TIMEOUT)
    assert edge.status_code == 410


# BatchCreateLinks.


def test_batch_create_one_bad_item_does_not_fail_the_others(pb, links, auth):
    m = pb.messages
    taken = alias()
    links.CreateLink(m.CreateLinkRequest(url=unique_url(), alias=taken), metadata=auth, timeout=TIMEOUT)
    fresh = alias()
    items = [
        m.CreateLinkRequest(url=unique_url()),
        m.CreateLinkRequest(url="javascript:alert(1)"),
        m.CreateLinkRequest(url=unique_url(), alias=fresh),
        m.CreateLinkRequest(url=unique_url(), alias=taken),
        m.CreateLinkRequest(url=unique_url(), private=True),
    ]
    reply = links.BatchCreateLinks(m.BatchCreateLinksRequest(items=items), metadata=auth, timeout=TIMEOUT)
    outcomes = [r.WhichOneof("outcome") for r in reply.results]
    assert outcomes == ["link", "error", "link", "error", "link"]
    r = reply.results
    assert GENERATED.fullmatch(r[0].link.code) and r[0].link.url == items[0].url
    assert (r[1].error.status, r[1].error.error) == (grpc.StatusCode.INVALID_ARGUMENT.value[0], "invalid_url")
    assert r[1].error.message
    assert r[2].link.code == fresh
    assert (r[3].error.status, r[3].error.error) == (grpc.StatusCode.ALREADY_EXISTS.value[0], "alias_taken")
    assert PRIVATE.fullmatch(r[4].link.code)
    # The successful items are committed.
    for result in (r[0], r[2], r[4]):
        got = links.GetLink(m.GetLinkRequest(code=result.link.code), metadata=auth, timeout=TIMEOUT)
        assert got.url == result.link.url


def test_batch_create_dedups_within_and_across_batches(pb, links, auth):
    m = pb.messages
    url = unique_url()
    first = links.CreateLink(m.CreateLinkRequest(url=url, dedup=True), metadata=auth, timeout=TIMEOUT)
    items = [m.CreateLinkRequest(url=url, dedup=True) for _ in range(3)]
    reply = links.BatchCreateLinks(m.BatchCreateLinksRequest(items=items), metadata=auth, timeout=TIMEOUT)
    assert {r.link.code for r in reply.results} == {first.code}


def test_batch_create_at_the_limit_succeeds_and_over_it_is_invalid_argument(pb, links, auth):
    m = pb.messages
    limit = int(os.environ.get("SHORTENER_TEST_BATCH_LIMIT", "1000"))
    full = [m.CreateLinkRequest(url=unique_url()) for _ in range(limit)]
    reply = links.BatchCreateLinks(m.BatchCreateLinksRequest(items=full), metadata=auth, timeout=60)
    assert len(reply.results) == limit
    assert all(r.WhichOneof("outcome") == "link" for r in reply.results)
    assert [r.link.url for r in reply.results] == [i.url for i in full]  # request order
    assert len({r.link.code for r in reply.results}) == limit
    over = full + [m.CreateLinkRequest(url=unique_url())]
    code, _, _ = status_of(lambda: links.BatchCreateLinks(m.BatchCreateLinksRequest(items=over),
                                                          metadata=auth, timeout=TIMEOUT))
    assert code == grpc.StatusCode.INVALID_ARGUMENT


def test_batch_create_of_nothing_is_invalid_argument(pb, links, auth):
    code, _, _ = status_of(lambda: links.BatchCreateLinks(pb.messages.BatchCreateLinksRequest(),
                                                          metadata=auth, timeout=TIMEOUT))
    assert code == grpc.StatusCode.INVALID_ARGUMENT
