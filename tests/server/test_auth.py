"""`check_api_key` and `APIKeyMiddleware` on their own, driven as ASGI is: scope, receive, send.

The end-to-end tests (test_security.py, test_auth_reply.py) use real servers and clients; these
check the exact messages the middleware sends for each kind of connection, and what it logs.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import pytest

from vla_client.server.edge import auth
from vla_client.server.edge.auth import APIKeyMiddleware, check_api_key
from vla_client.server.edge.quiet_logs import RateLimitedLog

KEY = "s3cret"
REFUSAL_BODY = b'{"detail":"missing or invalid API key"}'
REFUSAL_HEADERS = [
    (b"content-type", b"application/json"),
    (b"content-length", str(len(REFUSAL_BODY)).encode()),
    (b"www-authenticate", b"Bearer"),
    (b"connection", b"close"),
]


@pytest.mark.parametrize(
    ("header", "accepted"),
    [
        (f"Bearer {KEY}", True),
        (f"bearer {KEY}", True),
        (f"Api-Key {KEY}", True),
        (f"Bearer  {KEY} ", True),  # spaces around the key are not part of it
        (f"  Bearer {KEY}", True),
        (f"Bearer {KEY}x", False),
        (f"Basic {KEY}", False),
        (f"Bearer {KEY} {KEY}", False),
        ("Bearer", False),
        ("Bearer ", False),
        (KEY, False),
    ],
)
def test_the_accepted_header_forms(header: str, accepted: bool) -> None:
    assert check_api_key({"authorization": header}, KEY) is accepted


def test_the_header_is_found_in_either_spelling_and_no_key_turns_the_check_off() -> None:
    assert check_api_key({"Authorization": f"Bearer {KEY}"}, KEY)
    assert not check_api_key({}, KEY)
    assert check_api_key({}, None)


def test_an_empty_expected_key_matches_nothing() -> None:
    assert not check_api_key({"authorization": "Bearer "}, "")
    assert not check_api_key({"authorization": "Bearer x"}, "")


def test_a_middleware_needs_a_usable_key() -> None:
    with pytest.raises(ValueError) as caught:
        APIKeyMiddleware(app_called([]), None)  # type: ignore[arg-type]
    assert str(caught.value) == "APIKeyMiddleware needs a key; leave the middleware out for none"
    with pytest.raises(ValueError) as caught:
        APIKeyMiddleware(app_called([]), "")
    assert str(caught.value) == "api_key must not be empty (None means no key)"


def app_called(calls: list[str], channels: list[tuple[Any, Any]] | None = None) -> Any:
    """An ASGI app that notes each path it serves, and the receive and send it was given."""

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        calls.append(scope["path"])
        if channels is not None:
            channels.append((receive, send))

    return app


def refuse(scope: dict[str, Any]) -> tuple[list[str], list[dict[str, Any]]]:
    """What reaches the app, and what the middleware sends, for one connection."""
    calls: list[str] = []
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        raise AssertionError("the middleware must not read the request")

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    channels: list[tuple[Any, Any]] = []
    middleware = APIKeyMiddleware(app_called(calls, channels), KEY)
    asyncio.run(middleware({"headers": [], "path": "/v1/actions/metadata", **scope}, receive, send))
    assert channels == [(receive, send)] * len(calls)  # what reaches the app is passed through
    return calls, sent


def test_http_without_the_key_is_a_401_the_app_never_sees() -> None:
    calls, sent = refuse({"type": "http"})
    assert calls == []
    assert [m["type"] for m in sent] == ["http.response.start", "http.response.body"]
    assert sent[0]["status"] == 401
    assert sent[0]["headers"] == REFUSAL_HEADERS
    assert sent[1]["body"] == REFUSAL_BODY


def test_a_websocket_without_the_key_is_closed_with_1008() -> None:
    for scope in ({"type": "websocket"}, {"type": "websocket", "extensions": {}}):
        calls, sent = refuse(scope)
        assert calls == []
        assert sent == [{"type": "websocket.close", "code": 1008, "reason": "invalid API key"}]


def test_a_websocket_server_that_can_answer_the_handshake_gets_a_401() -> None:
    calls, sent = refuse({"type": "websocket", "extensions": {"websocket.http.response": {}}})
    assert calls == []
    assert [m["type"] for m in sent] == [
        "websocket.http.response.start",
        "websocket.http.response.body",
    ]
    assert sent[0]["status"] == 401
    assert sent[0]["headers"] == REFUSAL_HEADERS
    assert sent[1]["body"] == REFUSAL_BODY


def test_the_right_key_and_the_open_paths_reach_the_app() -> None:
    header = [(b"Authorization", f"Bearer {KEY}".encode("latin-1"))]
    calls, sent = refuse({"type": "http", "headers": header})
    assert (calls, sent) == (["/v1/actions/metadata"], [])
    calls, sent = refuse({"type": "http", "path": "/health"})
    assert (calls, sent) == (["/health"], [])
    calls, sent = refuse({"type": "lifespan", "path": ""})
    assert (calls, sent) == ([""], [])


@pytest.mark.parametrize(
    ("client", "shown"), [(("192.0.2.7", 50123), "192.0.2.7"), (None, "?"), ((), "?")]
)
def test_a_refusal_is_logged_with_the_clients_address(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture, client: Any, shown: str
) -> None:
    logger = logging.getLogger("vla_client.server.auth")
    monkeypatch.setattr(auth, "REFUSALS", RateLimitedLog(logger))
    scope: dict[str, Any] = {"type": "http"}
    if client is not None:
        scope["client"] = client
    with caplog.at_level(logging.INFO, logger=logger.name):
        refuse(scope)
    assert [r.getMessage() for r in caplog.records if r.name == logger.name] == [
        f"refused http /v1/actions/metadata from {shown}: no valid API key"
    ]
