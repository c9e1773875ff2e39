"""YOURLS's API (SHORTENER_COMPAT=yourls) from PyPI's own YOURLS client, `yourls` 1.2.3, unchanged:
shorten with and without a keyword, expand, url_stats, stats and db_stats; a taken keyword and a
bad URL raise the client's own exceptions, and write nothing. The key is of a tenant of its own
(tests/python/run makes it), so the counts are this module's links only."""

import os
import time
import uuid
from datetime import datetime, timedelta

import pytest
import requests
from yourls import YOURLSClient
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
