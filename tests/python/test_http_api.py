"""Every operation of the OpenAPI document, exercised against the running server; each response
is checked against the document (status documented, media type, headers, body schema)."""

import json
import re
import time
import uuid
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
import requests
from openapi_spec_validator import validate as validate_openapi

GENERATED = re.compile(r"[0-9A-Za-z]{7}")
PRIVATE = re.compile(r"[0-9A-Za-z]{16}")
REPO = Path(__file__).resolve().parents[2]


def rfc3339(moment: datetime) -> str:
    return moment.astimezone(timezone.utc).isoformat().replace("+00:00", "Z")


def parse_time(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def alias() -> str:
    return f"t-{uuid.uuid4().hex[:12]}"


def error_of(response: requests.Response) -> str:
    return response.json()["error"]


# The document itself.


def test_document_is_valid_openapi(openapi_doc):
    validate_openapi(openapi_doc)


def test_served_document_is_the_file_in_the_repository(openapi_doc):
    on_disk = json.loads((REPO / "shortener/src/http/openapi.json").read_text())
    assert openapi_doc == on_disk, "the binary serves a stale document: rebuild the shortener"


def test_document_needs_no_credentials_and_is_json(server):
    response = requests.get(f"{server.http}/api/v1/openapi.json", timeout=10)
    assert response.status_code == 200
    assert response.headers["Content-Type"].startswith("application/json")


# Create.


def test_create_generated_link_returns_201_with_the_link(api, server, unique_url):
    before = datetime.now(timezone.utc)
    response = api.create({"url": unique_url})
    link = response.json()
    assert GENERATED.fullmatch(link["code"]), link["code"]
    assert link["short_url"] == server.public_url + link["code"]
    assert link["url"] == unique_url
    assert response.headers["Location"] == f"/api/v1/links/{link['code']}"
    assert link["expires_at"] is None and link["deleted_at"] is None
    assert link["clicks"] == {"human": 0, "head": 0, "bot": 0}
    created = parse_time(link["created_at"])
    assert before - timedelta(seconds=5) <= created <= datetime.now(timezone.utc) + timedelta(seconds=5)


def test_create_stores_the_url_in_serialized_form(api):
    link = api.create({"url": f"https://Example.COM/{uuid.uuid4().hex}/a b?q=1"}).json()
    assert link["url"].startswith("https://example.com/")
    assert link["url"].endswith("/a%20b?q=1")


def test_create_with_explicit_defaults_and_nulls_is_accepted(api, unique_url):
    body = {"url": unique_url, "alias": None, "expires_at": None, "dedup": False, "private": False}
    assert GENERATED.fullmatch(api.create(body).json()["code"])


def test_create_with_alias_uses_the_alias(api, unique_url):
    name = alias()
    response = api.create({"url": unique_url, "alias": name})
    assert response.json()["code"] == name
    assert response.headers["Location"] == f"/api/v1/links/{name}"


def test_create_with_a_taken_alias_returns_409(api, unique_url):
    name = alias()
    api.create({"url": unique_url, "alias": name})
    response = api.create({"url": "https://example.org/other", "alias": name}, status=409)
    assert error_of(response) == "alias_taken"


@pytest.mark.parametrize("bad", ["api", "HealthZ", "abcdefg", "a/b", "a b", "caf\u00e9", "", "a-" * 33])
def test_create_with_an_alias_outside_the_namespace_returns_422(api, unique_url, bad):
    response = api.create({"url": unique_url, "alias": bad}, status=422)
    assert error_of(response) == "invalid_alias"


def test_create_with_dedup_returns_the_existing_link_with_200(api, unique_url):
    first = api.create({"url": unique_url, "dedup": True})
    again = api.create({"url": unique_url, "dedup": True}, status=200)
    assert again.json() == first.json()
    assert again.headers["Location"] == first.headers["Location"]


def test_dedup_after_the_link_was_deleted_creates_a_new_link(api, unique_url):
    first = api.create({"url": unique_url, "dedup": True}).json()
    api.delete(first["code"])
    second = api.create({"url": unique_url, "dedup": True}).json()
    assert second["code"] != first["code"]
    assert api.create({"url": unique_url, "dedup": True}, status=200).json()["code"] == second["code"]


def test_dedup_keys_on_the_expiry_too(api, unique_url):
    expiry = rfc3339(datetime.now(timezone.utc) + timedelta(days=1))
    plain = api.create({"url": unique_url, "dedup": True}).json()
    expiring = api.create({"url": unique_url, "dedup": True, "expires_at": expiry}).json()
    assert plain["code"] != expiring["code"]


def test_create_without_dedup_makes_a_new_code_each_time(api, unique_url):
    first = api.create({"url": unique_url}).json()
    second = api.create({"url": unique_url}).json()
    assert first["code"] != second["code"]


def test_create_private_link_gets_a_16_character_code(api, unique_url):
    link = api.create({"url": unique_url, "private": True}).json()
    assert PRIVATE.fullmatch(link["code"]), link["code"]


@pytest.mark.parametrize(
    "options",
    [{"alias": "combo-x", "private": True}, {"alias": "combo-y", "dedup": True},
     {"dedup": True, "private": True}],
)
def test_create_with_conflicting_options_returns_422(api, unique_url, options):
    response = api.create({"url": unique_url, **options}, status=422)
    assert error_of(response) == "conflicting_options"


def test_create_with_expiry_returns_it(api, unique_url):
    expiry = datetime.now(timezone.utc).replace(microsecond=0) + timedelta(hours=1)
    link = api.create({"url": unique_url, "expires_at": rfc3339(expiry)}).json()
    assert parse_time(link["expires_at"]) == expiry


def test_create_accepts_an_expiry_with_an_offset(api, unique_url):
    expiry = datetime.now(timezone(timedelta(hours=2))).replace(microsecond=0) + timedelta(hours=1)
    link = api.create({"url": unique_url, "expires_at": expiry.isoformat()}).json()
    assert parse_time(link["expires_at"]) == expiry
    assert link["expires_at"].endswith("Z")


@pytest.mark.parametrize("expiry", ["2001-01-01T00:00:00Z", "tomorrow", "2030-01-01", "2030-13-01T00:00:00Z"])
def test_create_with_a_past_or_malformed_expiry_returns_422(api, unique_url, expiry):
    response = api.create({"url": unique_url, "expires_at": expiry}, status=422)
    assert error_of(response) == "invalid_expiry"


def test_idempotent_retry_returns_the_first_link_with_200(api, unique_url):
    key = {"Idempotency-Key": f"k-{uuid.uuid4().hex}"}
    first = api.create({"url": unique_url}, headers=key)
    retry = api.create({"url": unique_url}, headers=key, status=200)
    assert retry.json() == first.json()


def test_idempotency_key_reused_for_another_request_returns_422(api, unique_url):
    key = {"Idempotency-Key": f"k-{uuid.uuid4().hex}"}
    api.create({"url": unique_url}, headers=key)
    response = api.create({"url": unique_url + "/other"}, headers=key, status=422)
    assert error_of(response) == "idempotency_key_reused"


def test_idempotency_keys_are_per_api_key(api, unique_url):
    # The same key from the same API key replays; this is the control for the case above.
    key = {"Idempotency-Key": f"k-{uuid.uuid4().hex}"}
    a = api.create({"url": unique_url, "private": True}, headers=key).json()
    b = api.create({"url": unique_url, "private": True}, headers=key, status=200).json()
    assert a["code"] == b["code"]


@pytest.mark.parametrize("bad_key", ["", "x" * 201, "has space", "tab\there"])
def test_create_with_a_malformed_idempotency_key_returns_400(api, unique_url, bad_key):
    response = api.create({"url": unique_url}, headers={"Idempotency-Key": bad_key}, status=400)
    assert error_of(response) == "invalid_idempotency_key"


def test_create_with_a_non_ascii_idempotency_key_returns_400(api, unique_url):
    response = api.create({"url": unique_url}, headers={"Idempotency-Key": "cl\u00e9".encode("latin-1")},
                          status=400)
    assert error_of(response) == "invalid_idempotency_key"


@pytest.mark.parametrize(
    "body",
    ['{"url": ', "[]", '"https://example.com/"', "{}", '{"url": 5}', '{"url": null}',
     '{"url": "https://example.com/", "dedup": "yes"}', '{"url": "https://example.com/", "dedup": null}',
     '{"url": "https://example.com/", "alias": 5}', '{"url": "https://example.com/", "headline": "x"}', ""],
)
def test_create_with_a_malformed_body_returns_400(api, body):
    response = api.create(None, data=body.encode(), headers={"Content-Type": "application/json"},
                          status=400)
    assert error_of(response) == "invalid_json"


@pytest.mark.parametrize(
    "url",
    ["javascript:alert(1)", "ftp://example.com/", "https://user:pw@example.com/", "example.com/path",
     "https://sho.rt/abc", "https://SHO.RT./abc", "https://example.com/%0d%0aSet-Cookie:a",
     " https://example.com/", "", "https://example.com/" + "a" * 2100],
)
def test_create_with_a_refused_url_returns_422(api, url):
    response = api.create({"url": url}, status=422)
    assert error_of(response) == "invalid_url"


def test_create_with_a_body_over_16_kib_returns_413(api):
    body = json.dumps({"url": "https://example.com/" + "a" * 17 * 1024}).encode()
    response = api.create(None, data=body, headers={"Content-Type": "application/json"}, status=413)
    assert error_of(response) == "payload_too_large"


@pytest.mark.parametrize("content_type", ["text/plain", "application/x-www-form-urlencoded", None])
def test_create_without_a_json_content_type_returns_415(api, content_type):
    headers = {"Content-Type": content_type} if content_type else {}
    response = api.create(None, data=b'{"url": "https://example.com/"}', headers=headers, status=415)
    assert error_of(response) == "unsupported_media_type"


def test_create_accepts_json_content_type_with_parameters(api, unique_url):
    api.create(None, data=json.dumps({"url": unique_url}).encode(),
               headers={"Content-Type": "application/json; charset=utf-8"})


@pytest.mark.parametrize("authorization", [None, "Bearer wrong-key-0123456789", "Basic dXNlcjpwYXNz", "Bearer"])
def test_every_api_operation_refuses_bad_credentials_with_401(api, unique_url, authorization):
    headers = {"Authorization": authorization} if authorization else {}
    code = api.create({"url": unique_url}).json()["code"]
    for response in (
        api.request("POST", "/api/v1/links", "/api/v1/links", 401, json={"url": unique_url},
                    headers=headers),
        api.get(code, status=401, headers=headers),
        api.delete(code, status=401, headers=headers),
    ):
        assert error_of(response) == "unauthorized"
        assert response.headers["WWW-Authenticate"] == "Bearer"
    api.get(code)  # not deleted by the refused call


def test_credentials_are_checked_before_the_body(api):
    response = api.request("POST", "/api/v1/links", "/api/v1/links", 401, data=b"not json",
                           headers={"Content-Type": "text/plain"})
    assert error_of(response) == "unauthorized"


def test_a_refused_create_stores_nothing(api, unique_url):
    name = alias()
    api.create({"url": "javascript:alert(1)", "alias": name}, status=422)
    api.get(name, status=404)
    api.follow(name, 404)


# Get.


def test_get_returns_the_link(api, unique_url):
    created = api.create({"url": unique_url}).json()
    assert api.get(created["code"]).json() == created


@pytest.mark.parametrize("code", ["zzzzzzz", "no-such-alias", "0000000000000000"])
def test_get_of_an_unknown_code_returns_404(api, code):
    assert error_of(api.get(code, status=404)) == "not_found"


@pytest.mark.parametrize("code", ["a.b", "%21%21", "x" * 65, "api"])
def test_get_of_an_impossible_code_returns_422_invalid_code(api, code):
    assert error_of(api.get(code, status=422)) == "invalid_code"


# Delete.


def test_delete_returns_204_and_the_link_shows_when(api, unique_url):
    code = api.create({"url": unique_url}).json()["code"]
    api.delete(code)
    link = api.get(code).json()
    assert link["deleted_at"] is not None
    parse_time(link["deleted_at"])


def test_delete_twice_is_not_an_error(api, unique_url):
    code = api.create({"url": unique_url}).json()["code"]
    api.delete(code)
    api.delete(code)


@pytest.mark.parametrize("code", ["zzzzzzz", "no-such-alias"])
def test_delete_of_an_unknown_code_returns_404(api, code):
    assert error_of(api.delete(code, status=404)) == "not_found"


@pytest.mark.parametrize("code", ["a.b", "x" * 65])
def test_delete_of_an_impossible_code_returns_422_invalid_code(api, code):
    assert error_of(api.delete(code, status=422)) == "invalid_code"


def test_a_deleted_alias_is_never_reused(api, unique_url):
    name = alias()
    api.create({"url": unique_url, "alias": name})
    api.delete(name)
    assert error_of(api.create({"url": unique_url, "alias": name}, status=409)) == "alias_taken"


# The redirect edge.


@pytest.mark.parametrize("method", ["GET", "HEAD"])
def test_redirect_sends_302_to_the_target(api, unique_url, method):
    code = api.create({"url": unique_url}).json()["code"]
    response = api.follow(code, 302, method=method)
    assert response.headers["Location"] == unique_url


def test_redirect_of_an_alias_and_a_private_code(api, unique_url):
    name = alias()
    api.create({"url": unique_url, "alias": name})
    private = api.create({"url": unique_url, "private": True}).json()["code"]
    assert api.follow(name, 302).headers["Location"] == unique_url
    assert api.follow(private, 302).headers["Location"] == unique_url


@pytest.mark.parametrize("method", ["GET", "HEAD"])
@pytest.mark.parametrize("code", ["zzzzzzz", "no-such-alias", "a.b", "x" * 65])
def test_redirect_of_an_unknown_code_returns_404_not_cached(api, method, code):
    api.follow(code, 404, method=method)


@pytest.mark.parametrize("method", ["GET", "HEAD"])
def test_redirect_of_a_deleted_link_returns_410(api, unique_url, method):
    code = api.create({"url": unique_url}).json()["code"]
    api.follow(code, 302, method=method)
    api.delete(code)
    api.follow(code, 410, method=method)


def test_redirect_of_an_expired_link_returns_410(api, unique_url):
    expiry = datetime.now(timezone.utc) + timedelta(seconds=1.5)
    link = api.create({"url": unique_url, "expires_at": rfc3339(expiry)}).json()
    api.follow(link["code"], 302)
    time.sleep(max(0.0, (expiry - datetime.now(timezone.utc)).total_seconds()) + 0.3)
    api.follow(link["code"], 410)
    api.follow(link["code"], 410, method="HEAD")
    # Still readable through the API, with its expiry.
    assert api.get(link["code"]).json()["expires_at"] == link["expires_at"]


def test_a_code_looked_up_before_it_existed_redirects_once_created(api, unique_url):
    name = alias()
    api.follow(name, 404)
    api.create({"url": unique_url, "alias": name})
    assert api.follow(name, 302).headers["Location"] == unique_url


def test_a_segment_that_is_not_utf8_is_not_found_at_the_edge_and_invalid_in_the_api(api):
    api.request("GET", "/%FF", "/{code}", 404)
    response = api.request("GET", "/api/v1/links/%FF", "/api/v1/links/{code}", 422, headers=api.auth())
    assert error_of(response) == "invalid_code"


def test_paths_that_cannot_be_codes_return_404(api, server):
    for path in ["/a/b", "/api", "/healthz"]:
        response = requests.get(f"{server.http}{path}", allow_redirects=False, timeout=10)
        assert response.status_code == 404, path
        assert response.headers.get("Cache-Control") == "no-store", path


def test_the_root_leads_to_the_console(server):
    response = requests.get(f"{server.http}/", allow_redirects=False, timeout=10)
    assert response.status_code == 303
    assert response.headers["Location"] == "/console/"


# Abuse limits and click counts, as the document describes them.


def test_a_client_probing_unknown_codes_gets_429_while_valid_codes_redirect(api, unique_url):
    from conftest import client_address

    code = api.create({"url": unique_url}).json()["code"]
    scanner = {"X-Forwarded-For": client_address()}
    limited = None
    for n in range(400):
        response = api.session.get(f"{api.server.http}/scan-{n}", headers=scanner,
                                   allow_redirects=False, timeout=10)
        if response.status_code == 429:
            limited = response
            break
        assert response.status_code == 404
    assert limited is not None, "400 unknown codes from one client were never limited"
    api.conformance.check(limited, "/{code}", "get", 429)
    # For the Retry-After it was told, the scanner is refused before any lookup, known codes
    # too; other clients still get redirects and 404s.
    wait = int(limited.headers["Retry-After"])
    assert wait >= 1
    api.follow(code, 429, headers=scanner)
    assert api.follow(code, 302).headers["Location"] == unique_url
    api.follow("zzzzzzz", 404)
    # After it, the known code redirects for the scanner again (refused requests meanwhile
    # spend nothing).
    deadline = time.monotonic() + wait + 5
    while True:
        again = api.session.get(f"{api.server.http}/{code}", headers=scanner,
                                allow_redirects=False, timeout=10)
        if again.status_code != 429 or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    assert again.status_code == 302, again.text
    assert again.headers["Location"] == unique_url


def test_clicks_are_counted_apart_for_people_bots_and_head(api, unique_url):
    code = api.create({"url": unique_url}).json()["code"]
    browser = {"User-Agent": "Mozilla/5.0 (X11; Linux x86_64) Firefox/128.0"}
    api.follow(code, 302, headers=browser)
    api.follow(code, 302, headers=browser)
    api.follow(code, 302, headers={"User-Agent": "Slackbot-LinkExpanding 1.0"})
    api.follow(code, 302, method="HEAD", headers=browser)
    want = {"human": 2, "head": 1, "bot": 1}
    deadline = time.monotonic() + 10
    while (clicks := api.get(code).json()["clicks"]) != want and time.monotonic() < deadline:
        time.sleep(0.1)
    assert clicks == want


def test_stats_count_a_links_visits_by_referrer_and_device(api, unique_url):
    tag = "s" + uuid.uuid4().hex[:12]
    code = api.create({"url": unique_url, "tags": [tag]}).json()["code"]
    browser = {"User-Agent": "Mozilla/5.0 (X11; Linux x86_64) Firefox/128.0",
               "Referer": "https://www.example.org/page"}
    api.follow(code, 302, headers=browser)
    api.follow(code, 302, headers=browser)
    api.follow(code, 302, headers={"User-Agent": "Slackbot-LinkExpanding 1.0"})
    path, template = f"/api/v1/links/{code}/stats", "/api/v1/links/{code}/stats"
    want = {"human": 2, "bot": 1, "head": 0}
    deadline = time.monotonic() + 10
    while True:
        stats = api.request("GET", path, template, 200, headers=api.auth(),
                            params={"granularity": "hour"}).json()
        if stats["totals"] == want or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    assert stats["totals"] == want
    assert {"host": "example.org", "visits": 2} in stats["referrers"]
    assert {"device": "desktop", "visits": 2} in stats["devices"]
    # The answer says up to when its counts are complete, and how often they catch up.
    assert datetime.fromisoformat(stats["as_of"]) <= datetime.now(timezone.utc)
    assert stats["flush_interval_ms"] > 0
    tagged = api.request("GET", "/api/v1/stats", "/api/v1/stats", 200, headers=api.auth(),
                         params={"tag": tag}).json()
    assert tagged["links"] == [{"code": code, "visits": 3}]
    csv = api.request("GET", path, template, 200, headers=api.auth(), params={"format": "csv"})
    assert csv.text.splitlines()[0] == "at,human,bot,head"


@pytest.mark.parametrize("params, code", [
    ({"from": "2026-02-01T00:00:00Z", "to": "2026-01-01T00:00:00Z"}, "invalid_range"),
    ({"from": "2001-01-01T00:00:00Z"}, "range_beyond_retention"),
    ({"granularity": "week"}, "invalid_granularity"),
    ({"to": "tomorrow"}, "invalid_time"),
])
def test_stats_refuse_a_bad_query_with_400(api, unique_url, params, code):
    link = api.create({"url": unique_url}).json()["code"]
    response = api.request("GET", f"/api/v1/links/{link}/stats", "/api/v1/links/{code}/stats",
                           400, headers=api.auth(), params=params)
    assert error_of(response) == code


# Link management: lists, edits, history, import, export.


def test_list_pages_newest_first_with_a_cursor(api, unique_url):
    tag = "t" + uuid.uuid4().hex[:12]
    made = [api.create({"url": f"{unique_url}/{i}", "tags": [tag]}).json()["code"] for i in range(5)]
    seen, cursor = [], None
    while True:
        params = {"tag": tag, "limit": 2, **({"cursor": cursor} if cursor else {})}
        page = api.request("GET", "/api/v1/links", "/api/v1/links", 200,
                           headers=api.auth(), params=params).json()
        seen += [link["code"] for link in page["links"]]
        assert all(link["tags"] == [tag] for link in page["links"])
        cursor = page["next_cursor"]
        if cursor is None:
            break
    assert seen == made[::-1]


@pytest.mark.parametrize("params,code", [
    ({"limit": 0}, "invalid_limit"),
    ({"limit": 1001}, "invalid_limit"),
    ({"state": "gone"}, "invalid_state"),
    ({"created_after": "yesterday"}, "invalid_date"),
    ({"tag": "Bad Tag"}, "invalid_tag"),
    ({"cursor": "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"}, "invalid_cursor"),
    ({"sort": "asc"}, "invalid_query_parameter"),
])
def test_list_refuses_a_bad_query_with_400(api, params, code):
    response = api.request("GET", "/api/v1/links", "/api/v1/links", 400,
                           headers=api.auth(), params=params)
    assert error_of(response) == code


def test_patch_changes_a_link_and_history_records_it(api, unique_url):
    code = api.create({"url": unique_url}).json()["code"]
    patch = {"url": unique_url + "/moved", "tags": ["moved"], "max_visits": 10, "disabled": True}
    link = api.request("PATCH", f"/api/v1/links/{code}", "/api/v1/links/{code}", 200,
                       headers={**api.auth(), "Content-Type": "application/merge-patch+json"},
                       data=json.dumps(patch)).json()
    assert (link["url"], link["tags"], link["max_visits"], link["state"]) == (
        unique_url + "/moved", ["moved"], 10, "disabled")
    api.follow(code, 410)
    history = api.request("GET", f"/api/v1/links/{code}/history", "/api/v1/links/{code}/history",
                          200, headers=api.auth()).json()
    assert [e["kind"] for e in history["events"]] == ["create", "update", "disable"]
    assert history["events"][1]["change"]["url"] == {"old": unique_url, "new": unique_url + "/moved"}


@pytest.mark.parametrize("patch,status,code", [
    ({"nope": 1}, 400, "unknown_field"),
    ({"code": "x"}, 422, "read_only_field"),
    ({"url": "ftp://example.com/"}, 422, "invalid_url"),
    ({"tags": ["Bad"]}, 422, "invalid_tag"),
    ({"max_visits": 0}, 422, "invalid_max_visits"),
])
def test_a_refused_patch_changes_nothing(api, unique_url, patch, status, code):
    created = api.create({"url": unique_url}).json()
    response = api.request("PATCH", f"/api/v1/links/{created['code']}", "/api/v1/links/{code}",
                           status, headers={**api.auth(), "Content-Type": "application/json"},
                           data=json.dumps(patch))
    assert error_of(response) == code
    assert api.get(created["code"]).json()["url"] == unique_url


def fresh_tag() -> str:
    return f"t{uuid.uuid4().hex[:12]}"


def test_a_tag_is_renamed_and_deleted_across_the_tenants_links(api, unique_url):
    old, new = fresh_tag(), fresh_tag()
    codes = [api.create({"url": f"{unique_url}/{i}", "tags": [old, "kept"]}).json()["code"]
             for i in range(2)]
    json_body = {**api.auth(), "Content-Type": "application/json"}
    renamed = api.request("PATCH", f"/api/v1/tags/{old}", "/api/v1/tags/{tag}", 200,
                          headers=json_body, data=json.dumps({"name": new})).json()
    assert renamed == {"tag": new, "links": 2}
    for code in codes:
        assert api.get(code).json()["tags"] == sorted(["kept", new])
    history = api.request("GET", f"/api/v1/links/{codes[0]}/history",
                          "/api/v1/links/{code}/history", 200, headers=api.auth()).json()
    assert history["events"][-1]["change"] == {
        "tags": {"old": sorted(["kept", old]), "new": sorted(["kept", new])}}
    deleted = api.request("DELETE", f"/api/v1/tags/{new}", "/api/v1/tags/{tag}", 200,
                          headers=api.auth()).json()
    assert deleted == {"tag": new, "links": 2}
    for code in codes:
        assert api.get(code).json()["tags"] == ["kept"]
    gone = api.request("DELETE", f"/api/v1/tags/{new}", "/api/v1/tags/{tag}", 404,
                       headers=api.auth())
    assert error_of(gone) == "not_found"


@pytest.mark.parametrize("body,status,code", [
    ("not json", 400, "invalid_json"),
    ("{}", 400, "invalid_json"),
    ('{"name": "x", "other": 1}', 400, "invalid_json"),
    ('{"name": "Bad Tag"}', 422, "invalid_tag"),
    (None, 409, "tag_conflict"),
])
def test_a_refused_tag_rename_changes_nothing(api, unique_url, body, status, code):
    tag, taken = fresh_tag(), fresh_tag()
    link = api.create({"url": unique_url, "tags": [tag]}).json()["code"]
    api.create({"url": unique_url + "/taken", "tags": [taken]})
    data = body if body is not None else json.dumps({"name": taken})
    response = api.request("PATCH", f"/api/v1/tags/{tag}", "/api/v1/tags/{tag}", status,
                           headers={**api.auth(), "Content-Type": "application/json"}, data=data)
    assert error_of(response) == code
    assert api.get(link).json()["tags"] == [tag]


def test_a_rename_of_a_tag_no_link_carries_is_404(api):
    response = api.request("PATCH", f"/api/v1/tags/{fresh_tag()}", "/api/v1/tags/{tag}", 404,
                           headers={**api.auth(), "Content-Type": "application/json"},
                           data=json.dumps({"name": fresh_tag()}))
    assert error_of(response) == "not_found"


def test_patch_of_a_deleted_link_is_410(api, unique_url):
    code = api.create({"url": unique_url}).json()["code"]
    api.delete(code)
    response = api.request("PATCH", f"/api/v1/links/{code}", "/api/v1/links/{code}", 410,
                           headers={**api.auth(), "Content-Type": "application/json"},
                           data=json.dumps({"disabled": False}))
    assert error_of(response) == "gone"


def test_import_streams_a_result_per_row_and_a_retry_creates_nothing(api, unique_url):
    legacy = "py-" + uuid.uuid4().hex[:10]
    body = "".join(json.dumps(row) + "\n" for row in [
        {"url": unique_url + "/a", "code": legacy, "created_at": "2020-02-03T04:05:06Z"},
        {"url": unique_url + "/b"},
        {"url": "not a url"},
    ])
    for expected in (["created", "created", "error"], ["exists", "exists", "error"]):
        response = api.request("POST", "/api/v1/links/import", "/api/v1/links/import", 200,
                               headers={**api.auth(), "Content-Type": "application/x-ndjson"},
                               data=body)
        lines = [json.loads(line) for line in response.text.splitlines()]
        assert [line["status"] for line in lines[:3]] == expected, lines
        assert lines[2]["error"] == "invalid_url"
        assert lines[3]["summary"]["rows"] == 3
    api.follow(legacy, 302)
    assert api.get(legacy).json()["created_at"] == "2020-02-03T04:05:06.000Z"


def test_import_of_a_csv_without_a_url_column_is_422(api):
    response = api.request("POST", "/api/v1/links/import", "/api/v1/links/import", 422,
                           headers={**api.auth(), "Content-Type": "text/csv"},
                           data="code,tags\nabc-1,x\n")
    assert error_of(response) == "missing_url_column"


def test_export_streams_every_link_of_the_list(api, unique_url):
    tag = "e" + uuid.uuid4().hex[:12]
    made = {api.create({"url": f"{unique_url}/{i}", "tags": [tag]}).json()["code"] for i in range(3)}
    response = api.request("GET", "/api/v1/links/export", "/api/v1/links/export", 200,
                           headers=api.auth(), params={"tag": tag})
    assert {json.loads(line)["code"] for line in response.text.splitlines()} == made
    response = api.request("GET", "/api/v1/links/export", "/api/v1/links/export", 200,
                           headers=api.auth(), params={"tag": tag, "format": "csv"})
    rows = response.text.splitlines()
    assert rows[0].startswith("code,url,tags") and len(rows) == 4
    api.request("GET", "/api/v1/links/export", "/api/v1/links/export", 400,
                headers=api.auth(), params={"format": "xml"})


def test_qr_code_images_with_their_validator(api, unique_url):
    code = api.create({"url": unique_url}).json()["code"]
    path, template = f"/api/v1/links/{code}/qr", "/api/v1/links/{code}/qr"
    svg = api.request("GET", path, template, 200, headers=api.auth())
    assert svg.text.startswith("<svg")
    png = api.request("GET", path, template, 200, headers=api.auth(), params={"format": "png", "size": 128})
    assert png.content[:8] == b"\x89PNG\r\n\x1a\n"
    api.request("GET", path, template, 304,
                headers={**api.auth(), "If-None-Match": svg.headers["ETag"]})
    api.request("GET", path, template, 400, headers=api.auth(), params={"size": 1})
    api.request("GET", "/api/v1/links/zzzzzzz/qr", template, 404, headers=api.auth())


def test_a_protected_link_answers_a_form_until_the_right_password(api, unique_url):
    link = api.create({"url": unique_url, "password": "s3cret pass"}).json()
    assert link["protected"] is True
    code = link["code"]
    page = api.follow(code, 200)
    assert "Location" not in page.headers and unique_url not in page.text
    api.follow(code, 200, method="HEAD")
    form = {"Content-Type": "application/x-www-form-urlencoded"}
    wrong = api.request("POST", f"/{code}", "/{code}", 403, headers=form, data="password=nope")
    assert unique_url not in wrong.text
    # The right password: a page that goes on to the target by a refresh of its own (a redirect
    # of the form's submission would break its form-action 'self' in browsers), or JSON.
    right = api.request("POST", f"/{code}", "/{code}", 200, headers=form, data="password=s3cret+pass")
    assert "Location" not in right.headers and right.headers["Cache-Control"] == "no-store"
    assert f'<meta http-equiv="refresh" content="0;url={unique_url}">' in right.text
    as_json = api.request("POST", f"/{code}", "/{code}", 200,
                          headers={**form, "Accept": "application/json"}, data="password=s3cret+pass")
    assert as_json.json() == {"url": unique_url}
    wrong_json = api.request("POST", f"/{code}", "/{code}", 403,
                             headers={**form, "Accept": "application/json"}, data="password=nope")
    assert wrong_json.json()["error"] == "wrong_password"
    api.request("PATCH", f"/api/v1/links/{code}", "/api/v1/links/{code}", 200,
                headers={**api.auth(), "Content-Type": "application/json"},
                data=json.dumps({"password": None}))
    api.request("POST", f"/{code}", "/{code}", 405, headers=form, data="password=x")
    api.request("POST", "/zzzzzzz", "/{code}", 404, headers=form, data="password=x")


def test_me_names_the_key_and_its_scopes(api, server):
    me = api.request("GET", "/api/v1/me", "/api/v1/me", 200, headers=api.auth()).json()
    assert me["tenant"] == "default" and "links:create" in me["scopes"]
    admin = api.request("GET", "/api/v1/me", "/api/v1/me", 200, headers=api.auth(server.admin_api_key)).json()
    assert (admin["tenant"], admin["key"], admin["scopes"]) == ("ops", "conformance", ["admin"])
    api.request("GET", "/api/v1/me", "/api/v1/me", 401, headers={"Authorization": "Bearer nope"})


def test_an_admin_blocks_and_unblocks_a_domain(api, server, unique_url):
    admin = api.auth(server.admin_api_key)
    domain = ".blocked-" + uuid.uuid4().hex[:10] + ".example"
    code = api.create({"url": "https://www" + domain + "/x"}).json()["code"]
    base, item = "/api/v1/admin/blocklist", "/api/v1/admin/blocklist/{domain}"
    api.request("POST", base, base, 403, headers=api.auth(), json={"domain": domain})
    api.request("POST", base, base, 201, headers=admin, json={"domain": domain})
    api.request("POST", base, base, 200, headers=admin, json={"domain": domain})
    api.request("POST", base, base, 422, headers=admin, json={"domain": "not a domain"})
    entries = api.request("GET", base, base, 200, headers=admin).json()["entries"]
    assert {"domain": domain, "source": "api"}.items() <= next(e for e in entries if e["domain"] == domain).items()
    api.follow(code, 410)
    api.request("DELETE", f"{base}/{domain}", item, 204, headers=admin)
    api.request("DELETE", f"{base}/{domain}", item, 404, headers=admin)
    api.follow(code, 302)


def test_webhooks_are_registered_listed_logged_and_removed_by_an_admin_key(api, server):
    admin = api.auth(server.admin_api_key)
    base = "/api/v1/webhooks"
    body = {"tenant": "default", "url": "https://hooks.example.com/in", "secret": "s" * 24}
    api.request("POST", base, base, 403, json=body, headers=api.auth())
    refused = dict(body, url="http://169.254.169.254/latest")
    response = api.request("POST", base, base, 422, json=refused, headers=admin)
    assert error_of(response) == "invalid_webhook_url"
    endpoint = api.request("POST", base, base, 201, json=body, headers=admin).json()
    assert "secret" not in endpoint and endpoint["disabled_at"] is None
    listed = api.request("GET", base, base, 200, headers=admin).json()["webhooks"]
    assert endpoint["id"] in [e["id"] for e in listed]
    item, log = f"{base}/{endpoint['id']}", f"{base}/{endpoint['id']}/deliveries"
    api.request("GET", log, base + "/{id}/deliveries", 200, headers=admin)
    retry, retry_doc = f"{log}/retry", base + "/{id}/deliveries/retry"
    # Nothing has failed yet: none is retried; an event it has no delivery of is refused.
    assert api.request("POST", retry, retry_doc, 200, json={}, headers=admin).json() == {"retried": 0}
    response = api.request("POST", retry, retry_doc, 409, json={"event_id": 999999999}, headers=admin)
    assert error_of(response) == "not_retryable"
    assert error_of(api.request("POST", retry, retry_doc, 422, json={"event_id": 0}, headers=admin)) == "invalid_event_id"
    assert error_of(api.request("POST", retry, retry_doc, 400, json={"ids": [1]}, headers=admin)) == "invalid_json"
    api.request("POST", retry, retry_doc, 403, json={}, headers=api.auth())
    off = api.request(
        "PATCH", item, base + "/{id}", 200, json={"enabled": False}, headers=admin
    ).json()
    assert off["disabled_at"] is not None
    response = api.request("POST", retry, retry_doc, 409, json={}, headers=admin)
    assert error_of(response) == "endpoint_disabled"
    on = api.request(
        "PATCH", item, base + "/{id}", 200, json={"enabled": True}, headers=admin
    ).json()
    assert on["disabled_at"] is None and on["failures"] == 0
    response = api.request(
        "PATCH", item, base + "/{id}", 400, json={"enabled": True, "url": "x"}, headers=admin
    )
    assert error_of(response) == "invalid_json"
    api.request("PATCH", item, base + "/{id}", 403, json={"enabled": True}, headers=api.auth())
    api.request("DELETE", item, base + "/{id}", 204, headers=admin)
    api.request("PATCH", item, base + "/{id}", 404, json={"enabled": True}, headers=admin)
    api.request("DELETE", item, base + "/{id}", 404, headers=admin)
    api.request("GET", log, base + "/{id}/deliveries", 404, headers=admin)
    api.request("POST", retry, retry_doc, 404, json={}, headers=admin)


def test_a_tenant_claims_lists_changes_and_removes_a_domain(api, server):
    admin, own = api.auth(server.admin_api_key), api.auth()
    base, item = "/api/v1/domains", "/api/v1/domains/{host}"
    host = "go-" + uuid.uuid4().hex[:10] + ".conformance.example"
    claimed = api.request("POST", base, base, 201, headers=own, json={"host": host.upper() + "."}).json()
    assert (claimed["host"], claimed["tenant"], claimed["robots"]) == (host, "default", "disallow")
    assert claimed["root_url"] is None and claimed["redirect_status"] is None
    assert error_of(api.request("POST", base, base, 409, headers=own, json={"host": host})) == "domain_taken"
    assert error_of(api.request("POST", base, base, 403, headers=own, json={"host": "elsewhere.example"})) == "host_not_allowed"
    assert error_of(api.request("POST", base, base, 422, headers=own, json={"host": "127.0.0.1"})) == "ip_host"
    assert error_of(api.request("POST", base, base, 422, headers=own, json={"host": "sho.rt"})) == "reserved_host"
    assert error_of(api.request("POST", base, base, 400, headers=own, json={"host": host, "x": 1})) == "invalid_json"
    other = api.request("POST", base, base, 201, headers=admin,
                        json={"host": "brand-" + uuid.uuid4().hex[:10] + ".example", "tenant": "someone"}).json()
    listed = api.request("GET", base + "?limit=1000", base, 200, headers=own).json()
    assert host in [d["host"] for d in listed["domains"]]
    assert other["host"] not in [d["host"] for d in listed["domains"]]
    assert error_of(api.request("GET", base + "?limit=0", base, 400, headers=own)) == "invalid_limit"
    api.request("GET", f"{base}/{other['host']}", item, 404, headers=own)
    api.request("GET", f"{base}/{host}", item, 200, headers=own)
    changed = api.request("PATCH", f"{base}/{host}", item, 200, headers=own,
                          json={"not_found_url": "https://www.example.com/", "redirect_status": 308, "robots": "allow"}).json()
    assert (changed["not_found_url"], changed["redirect_status"], changed["robots"]) == ("https://www.example.com/", 308, "allow")
    loop = api.request("PATCH", f"{base}/{host}", item, 422, headers=own, json={"root_url": f"https://{host}/"})
    assert error_of(loop) == "fallback_loop"
    assert error_of(api.request("PATCH", f"{base}/{host}", item, 400, headers=own, json={"host": "x"})) == "unknown_field"
    api.request("PATCH", f"{base}/{other['host']}", item, 404, headers=own, json={"robots": "allow"})
    api.request("DELETE", f"{base}/{other['host']}", item, 404, headers=own)
    api.request("DELETE", f"{base}/{host}", item, 204, headers=own)
    api.request("DELETE", f"{base}/{host}", item, 404, headers=own)
    api.request("DELETE", f"{base}/{other['host']}", item, 204, headers=admin)



def test_a_branded_domain_answers_its_root_robots_and_app_files_by_host(api, server):
    own = api.auth()
    base, item = "/api/v1/domains", "/api/v1/domains/{host}"
    aasa_path, links_path = "/.well-known/apple-app-site-association", "/.well-known/assetlinks.json"
    host = "files-" + uuid.uuid4().hex[:10] + ".conformance.example"
    api.request("POST", base, base, 201, headers=own, json={"host": host})
    aasa = {"applinks": {"details": [{"appIDs": ["TEAM.com.example.app"], "components": [{"/": "/*"}]}]}}
    links = [{"relation": ["delegate_permission/common.handle_all_urls"],
              "target": {"namespace": "android_app", "package_name": "com.example.app"}}]
    changed = api.request("PATCH", f"{base}/{host}", item, 200, headers=own,
                          json={"root_url": "https://www.example.com/home", "apple_app_site_association": aasa,
                                "assetlinks": links}).json()
    assert (changed["apple_app_site_association"], changed["assetlinks"]) == (aasa, links)
    for bad, code in [({"assetlinks": {}}, "invalid_app_file"),
                      ({"apple_app_site_association": []}, "invalid_app_file"),
                      ({"apple_app_site_association": {"k": "x" * 16384}}, "app_file_too_large")]:
        assert error_of(api.request("PATCH", f"{base}/{host}", item, 422, headers=own, json=bad)) == code
    on = {"Host": host.upper() + "."}
    root = api.request("GET", "/", "/", 302, headers=on)
    assert root.headers["Location"] == "https://www.example.com/home"
    assert api.request("HEAD", "/", "/", 302, headers=on).headers["Location"] == "https://www.example.com/home"
    robots = api.request("GET", "/robots.txt", "/robots.txt", 200, headers=on)
    assert robots.text == "User-agent: *\nDisallow: /\n"
    assert api.request("GET", aasa_path, aasa_path, 200, headers=on).json() == aasa
    assert api.request("GET", links_path, links_path, 200, headers=on).json() == links
    # The node's own host answers as it did before domains: the console, no robots.txt, no files.
    assert api.request("GET", "/", "/", 303).headers["Location"] == "/console/"
    api.request("HEAD", "/", "/", 303)
    for path in ("/robots.txt", aasa_path, links_path):
        api.request("GET", path, path, 404)
    api.request("DELETE", f"{base}/{host}", item, 204, headers=own)
    api.request("GET", "/robots.txt", "/robots.txt", 404, headers=on)

def test_api_keys_are_made_listed_used_and_revoked(api):
    admin = api.auth(api.server.admin_api_key)
    base, item = "/api/v1/keys", "/api/v1/keys/{name}"
    name = "py-" + uuid.uuid4().hex[:10]
    made = api.request("POST", base, base, 201, headers=admin,
                       json={"name": name, "scopes": ["links:read"]}).json()
    assert (made["name"], made["tenant"], made["scopes"]) == (name, "ops", ["links:read"])
    secret = made["secret"]
    listed = api.request("GET", base, base, 200, headers=admin).json()["keys"]
    mine = [k for k in listed if k["name"] == name]
    assert len(mine) == 1 and "secret" not in mine[0]
    # In force at once on the node that made it: it reads, and may do no more than it was given.
    api.request("GET", "/api/v1/links", "/api/v1/links", 200, headers=api.auth(secret))
    api.request("POST", "/api/v1/links", "/api/v1/links", 403, headers=api.auth(secret),
                json={"url": "https://example.com/keys"})
    for body, status, code in [
        ({"name": name, "scopes": ["links:read"]}, 409, "key_name_taken"),
        ({"name": "", "scopes": ["links:read"]}, 422, "invalid_name"),
        ({"name": "x\u0007y", "scopes": ["links:read"]}, 422, "invalid_name"),
        ({"name": "py-scope", "scopes": ["links:fly"]}, 422, "invalid_scopes"),
        ({"name": "py-past", "scopes": ["links:read"], "expires_at": "2001-01-01T00:00:00Z"}, 422, "invalid_expiry"),
    ]:
        assert error_of(api.request("POST", base, base, status, headers=admin, json=body)) == code, body
    # A key without keys:manage may not make one.
    api.request("POST", base, base, 403, headers=api.auth(secret),
                json={"name": "py-other", "scopes": ["links:read"]})
    api.request("DELETE", f"{base}/{name}", item, 204, headers=admin)
    api.request("DELETE", f"{base}/{name}", item, 404, headers=admin)
    api.request("GET", "/api/v1/links", "/api/v1/links", 401, headers=api.auth(secret))


def test_the_audit_log_names_who_changed_a_link(api, unique_url):
    admin = api.auth(api.server.admin_api_key)
    code = api.create({"url": unique_url}).json()["code"]
    api.delete(code)
    base = "/api/v1/audit"
    page = api.request("GET", base, base, 200, headers=admin, params={"object": code}).json()
    actions = [e["action"] for e in page["entries"]]
    assert actions == ["link.delete", "link.create"], actions
    created = page["entries"][-1]
    assert created["object"] == {"kind": "link", "id": code}
    assert created["actor"]["key"] and created["actor"].get("subject") is None
    assert created["change"]["url"] == unique_url
    ndjson = api.request("GET", base, base, 200, headers=admin,
                         params={"object": code, "format": "ndjson"})
    assert len([line for line in ndjson.text.splitlines() if line.strip()]) == 2
    for params in [{"limit": "0"}, {"since": "yesterday"}, {"cursor": "not-a-cursor"}, {"format": "xml"}]:
        api.request("GET", base, base, 400, headers=admin, params=params)
    # A key without audit:read reads nothing.
    api.request("GET", base, base, 403, headers=api.auth())


# Coverage of the document by the tests above.


def test_every_documented_operation_was_exercised(request, openapi_doc, conformance):
    if request.config.option.keyword or request.config.option.markexpr:
        pytest.skip("only meaningful for a full run")
    methods = {"get", "head", "post", "put", "delete", "patch", "options"}
    documented = {
        (path, method)
        for path, item in openapi_doc["paths"].items()
        for method in item
        if method in methods and path != "/api/v1/openapi.json"
    }
    exercised = {(path, method) for path, method, _ in conformance.seen}
    assert documented <= exercised, f"not exercised: {sorted(documented - exercised)}"
