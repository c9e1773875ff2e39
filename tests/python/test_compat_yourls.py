"""YOURLS's API (SHORTENER_COMPAT=yourls) from PyPI's own YOURLS client, `yourls` 1.2.3, unchanged:
shorten with and without a keyword, expand, url_stats, stats and db_stats; a taken keyword and a
bad URL raise the client's own exceptions, and write nothing. The key is of a tenant of its own
(tests/python/run makes it), so the counts are this module's links only.

The same client, extended as its base classes allow, signs each request with a timestamp and a
key's YOURLS token (`shortener keys yourls-token`) instead of sending a key: md5 and sha256,
acting as that key's tenant; a wrong token, a stale timestamp and an unknown hash are refused
with the client's HTTP error, and write nothing."""

import hashlib
import os
import time
import uuid
from datetime import datetime, timedelta

import pytest
import requests
from yourls import YOURLSAPIMixin, YOURLSClient, YOURLSClientBase
from yourls.exceptions import (
    YOURLSHTTPError,
    YOURLSKeywordExistsError,
    YOURLSNoURLError,
)

from conftest import client_address

BROWSER = "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/120.0 Safari/537.36"


@pytest.fixture(scope="module")
def api_url(server) -> str:
    return f"{server.http}/yourls-api.php"


@pytest.fixture(scope="module")
def yourls(api_url) -> YOURLSClient:
    key = os.environ.get("SHORTENER_TEST_YOURLS_API_KEY")
    if not key:
        pytest.exit("SHORTENER_TEST_YOURLS_API_KEY is not set: run through tests/python/run", returncode=2)
    return YOURLSClient(api_url, signature=key)


@pytest.fixture(scope="module")
def made(yourls, server):
    """Two links made through the client: one with a generated keyword, one with a chosen
    keyword and title."""
    tag = uuid.uuid4().hex[:10]
    plain = yourls.shorten(f"https://example.com/yourls/{tag}/plain")
    keyword = f"py-{tag}"
    chosen = yourls.shorten(f"https://example.com/yourls/{tag}/chosen", keyword=keyword, title="Chosen")
    return plain, chosen, keyword


def test_shorten_without_and_with_a_keyword(made, server):
    plain, chosen, keyword = made
    now = datetime.utcnow()
    assert plain.url.endswith("/plain")
    assert plain.keyword and plain.shorturl == f"{server.public_url}{plain.keyword}"
    assert plain.ip == "" and plain.title == ""
    # YOURLS's dates, parsed by the client: this node writes UTC.
    assert abs(plain.date - now) < timedelta(minutes=5)
    assert chosen.keyword == keyword
    assert chosen.shorturl == f"{server.public_url}{keyword}"
    assert chosen.title == "Chosen"


def test_expand_a_keyword_and_a_short_url(made, yourls):
    plain, chosen, keyword = made
    assert yourls.expand(keyword) == chosen.url
    assert yourls.expand(plain.shorturl) == plain.url


def test_url_stats_count_visits(made, yourls, server):
    plain, _, _ = made
    response = requests.get(
        f"{server.http}/{plain.keyword}",
        headers={"User-Agent": BROWSER, "X-Forwarded-For": client_address()},
        allow_redirects=False,
        timeout=10,
    )
    assert response.status_code == 302
    deadline = time.monotonic() + 10
    while True:
        stats = yourls.url_stats(plain.keyword)
        if stats.clicks == 1 or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    assert stats.clicks == 1
    assert stats.url == plain.url
    assert stats.shorturl == plain.shorturl
    assert stats.ip == ""


def test_stats_and_db_stats_count_only_the_tenant(made, yourls):
    plain, chosen, _ = made
    db = yourls.db_stats()
    links, stats = yourls.stats(filter="last", limit=2)
    assert stats == db
    assert db.total_links == 2
    assert [link.url for link in links] == [chosen.url, plain.url]
    links, _ = yourls.stats(filter="random", limit=2)
    assert sorted(link.url for link in links) == sorted([chosen.url, plain.url])
    top, _ = yourls.stats(filter="top", limit=1)
    bottom, _ = yourls.stats(filter="bottom", limit=1)
    assert top[0].clicks >= bottom[0].clicks


def test_a_taken_keyword_and_a_bad_url_raise_the_clients_errors(made, yourls):
    _, _, keyword = made
    before = yourls.db_stats()
    with pytest.raises(YOURLSKeywordExistsError) as taken:
        yourls.shorten("https://example.com/yourls/again", keyword=keyword)
    assert taken.value.keyword == keyword
    with pytest.raises(YOURLSNoURLError) as bad:
        yourls.shorten("not a url")
    assert isinstance(bad.value, YOURLSHTTPError)
    assert bad.value.response.status_code == 400
    with pytest.raises(YOURLSNoURLError):
        yourls.shorten("")
    assert yourls.db_stats() == before


def test_keys_the_json_api_refuses_are_refused(api_url, yourls):
    before = yourls.db_stats()
    for client in (
        YOURLSClient(api_url, signature="not-a-key-of-this-node"),
        YOURLSClient(api_url, username="admin", password="secret"),
    ):
        with pytest.raises(YOURLSHTTPError) as refused:
            client.shorten("https://example.com/yourls/refused")
        assert refused.value.response.status_code == 403
    assert yourls.db_stats() == before


class SignedClient(YOURLSAPIMixin, YOURLSClientBase):
    """The `yourls` client signing each request as YOURLS's passwordless API has it:
    `timestamp` and `signature` = hash(timestamp . token), the hash named by `hash` unless md5;
    `skew` moves the client's clock."""

    def __init__(self, apiurl, token, hash_name="md5", skew=0):
        super().__init__(apiurl)
        self.token, self.hash_name, self.skew = token, hash_name, skew

    def _api_request(self, params):
        stamp = str(int(time.time()) + self.skew)
        signature = hashlib.new(self.hash_name, (stamp + self.token).encode()).hexdigest()
        signed = dict(params, timestamp=stamp, signature=signature)
        if self.hash_name != "md5":
            signed["hash"] = self.hash_name
        return super()._api_request(signed)


@pytest.fixture(scope="module")
def token() -> str:
    value = os.environ.get("SHORTENER_TEST_YOURLS_TOKEN")
    if not value:
        pytest.exit("SHORTENER_TEST_YOURLS_TOKEN is not set: run through tests/python/run", returncode=2)
    return value


def test_timestamp_signatures_act_as_the_tokens_key(api_url, token, yourls):
    signed = SignedClient(api_url, token)
    before = signed.db_stats()
    tag = uuid.uuid4().hex[:10]
    made = signed.shorten(f"https://example.com/yourls/{tag}/signed", keyword=f"sig-{tag}")
    assert made.keyword == f"sig-{tag}"
    assert signed.expand(made.shorturl) == made.url
    by_sha256 = SignedClient(api_url, token, hash_name="sha256")
    assert by_sha256.url_stats(made.keyword).url == made.url
    # The token's tenant is its key's: its count grew by one, and the key-signed client's tenant
    # does not see the link.
    assert by_sha256.db_stats().total_links == before.total_links + 1
    with pytest.raises(YOURLSHTTPError) as unseen:
        yourls.expand(made.keyword)
    assert unseen.value.response.status_code == 404


def test_bad_timestamp_signatures_are_refused_and_write_nothing(api_url, token):
    signed = SignedClient(api_url, token)
    before = signed.db_stats()
    for client, says in (
        (SignedClient(api_url, "0" * len(token)), "Invalid signature"),
        (SignedClient(api_url, token, skew=-3600), "has expired"),
        (SignedClient(api_url, token, skew=3600), "in the future"),
        (SignedClient(api_url, token, hash_name="sha1"), "is not accepted"),
    ):
        with pytest.raises(YOURLSHTTPError) as refused:
            client.shorten("https://example.com/yourls/refused-signed")
        assert refused.value.response.status_code == 403
        assert says in refused.value.response.json()["message"]
    assert signed.db_stats() == before
