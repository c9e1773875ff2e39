"""Bitly's API v4 (SHORTENER_COMPAT=bitly) from PyPI's pyshorteners 1.0.1, unchanged, its Bitly
backend pointed at the node through its `api_url` setting: shorten, expand and total_clicks; a
URL the node refuses raises the client's own exception and writes nothing, as does one the client
refuses itself. The key is of a tenant of its own (tests/python/run makes it), so the links
counted are this module's only."""

import os
import time
import uuid

import pyshorteners
import pytest
import requests
from pyshorteners.exceptions import (
    BadAPIResponseException,
    BadURLException,
    ExpandingErrorException,
    ShorteningErrorException,
)

from conftest import client_address

BROWSER = "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/120.0 Safari/537.36"


@pytest.fixture(scope="module")
def key() -> str:
    key = os.environ.get("SHORTENER_TEST_BITLY_API_KEY")
    if not key:
        pytest.exit("SHORTENER_TEST_BITLY_API_KEY is not set: run through tests/python/run", returncode=2)
    return key


@pytest.fixture(scope="module")
def bitly(server, key):
    """pyshorteners' Bitly backend, its API URL the node's `/v4`."""
    return pyshorteners.Shortener(api_key=key, api_url=f"{server.http}/v4", timeout=10).bitly


def stored(server, key) -> int:
    """How many links the tenant has, through the JSON API."""
    response = requests.get(
        f"{server.http}/api/v1/links", params={"limit": 100}, headers={"Authorization": f"Bearer {key}"}, timeout=10
    )
    assert response.status_code == 200, response.text
    return len(response.json()["links"])


@pytest.fixture(scope="module")
def made(bitly):
    long_url = f"https://example.com/bitly/{uuid.uuid4().hex[:10]}"
    return long_url, bitly.short(long_url)


def test_shorten_and_shorten_again(made, bitly, server, key):
    long_url, short = made
    assert short.startswith(server.public_url) and len(short) > len(server.public_url)
    # Bitly answers a long URL it already shortened with the same bitlink.
    before = stored(server, key)
    assert bitly.short(long_url) == short
    assert stored(server, key) == before


def test_expand(made, bitly):
    long_url, short = made
    assert bitly.expand(short) == long_url


def test_total_clicks_count_visits(made, bitly, server):
    _, short = made
    assert bitly.total_clicks(short) == 0
    code = short[len(server.public_url):]
    for _ in range(2):
        response = requests.get(
            f"{server.http}/{code}",
            headers={"User-Agent": BROWSER, "X-Forwarded-For": client_address()},
            allow_redirects=False,
            timeout=10,
        )
        assert response.status_code == 302
    deadline = time.monotonic() + 10
    while bitly.total_clicks(short) != 2 and time.monotonic() < deadline:
        time.sleep(0.1)
    assert bitly.total_clicks(short) == 2


def test_the_bitlink_in_bitlys_shape(made, server, key):
    long_url, short = made
    bitlink_id = short.split("://", 1)[1]
    response = requests.get(
        f"{server.http}/v4/bitlinks/{bitlink_id}", headers={"Authorization": f"Bearer {key}"}, timeout=10
    )
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["id"] == bitlink_id and body["link"] == short and body["long_url"] == long_url
    assert body["archived"] is False and body["tags"] == [] and body["title"] is None


def test_bad_urls_raise_the_clients_errors(bitly, server, key):
    before = stored(server, key)
    # Refused by the node, in Bitly's error shape.
    for url in ("not a url", "ftp://example.com/bitly"):
        with pytest.raises(ShorteningErrorException) as refused:
            bitly.short(url)
        assert "INVALID_ARG_LONG_URL" in str(refused.value)
    # Refused by the client before it calls.
    with pytest.raises(BadURLException):
        bitly.short("")
    assert stored(server, key) == before


def test_unknown_bitlinks_and_refused_keys_raise_the_clients_errors(server, bitly):
    with pytest.raises(ExpandingErrorException) as unknown:
        bitly.expand(f"{server.public_url}no-such-bitlink")
    assert "NOT_FOUND" in str(unknown.value)
    refused = pyshorteners.Shortener(api_key="not-a-key-of-this-node", api_url=f"{server.http}/v4").bitly
    with pytest.raises(ShorteningErrorException) as bad_key:
        refused.short("https://example.com/bitly/refused")
    assert "UNAUTHORIZED" in str(bad_key.value)
    with pytest.raises(BadAPIResponseException):
        refused.total_clicks(f"{server.public_url}abc")
