"""API-key check for every route but ``/health``, over HTTP and websockets alike.

Two header forms are accepted: ``Authorization: Bearer <key>`` (SGLang's ``--api-key``) and
``Authorization: Api-Key <key>`` (what openpi's websocket client sends). The key is compared
with `hmac.compare_digest`, so the time a wrong guess takes says nothing about the right key.
An empty presented key (``Authorization: Bearer`` with nothing after it) never matches, and a
middleware is never made with an empty expected key, so "" can never unlock anything.
The check is an ASGI middleware rather than a route dependency so that routes added later
(websockets included) cannot forget it. A refused HTTP request also closes its connection
(``Connection: close``): a peer without the key holds no kept-alive connection, so the room of
the connection limit is left to clients that have it (`vla_client.server.edge.connections`).
"""

from __future__ import annotations

import hmac
import logging
from collections.abc import Iterable, Mapping

from starlette.types import ASGIApp, Receive, Scope, Send

from vla_client.server.config import check_api_key_setting
from vla_client.server.edge.quiet_logs import RateLimitedLog

OPEN_PATHS = frozenset({"/health"})
REFUSALS = RateLimitedLog(logging.getLogger("vla_client.server.auth"))
"""One line for the first refusal, then one per interval with the count: a flood stays quiet."""
_SCHEMES = ("bearer", "api-key")
_REFUSAL = b'{"detail":"missing or invalid API key"}'


def check_api_key(headers: Mapping[str, str], expected: str | None) -> bool:
    """True when `expected` is None (auth off) or `headers` carry it in an accepted form.

    An empty `expected` is never matched (fail closed), nor is an empty presented key.
    """
    if expected is None:
        return True
    value = headers.get("authorization") or headers.get("Authorization") or ""
    scheme, _, key = value.strip().partition(" ")
    presented = key.strip()
    if scheme.lower() not in _SCHEMES or not presented or not expected:
        return False
    return hmac.compare_digest(presented.encode(), expected.encode())


class APIKeyMiddleware:
    """Answers 401 (HTTP) or refuses the handshake (websocket) without the right key."""

    def __init__(self, app: ASGIApp, api_key: str, open_paths: Iterable[str] = OPEN_PATHS) -> None:
        check_api_key_setting(api_key)
        if api_key is None:
            raise ValueError("APIKeyMiddleware needs a key; leave the middleware out for none")
        self.app = app
        self.api_key = api_key
        self.open_paths = frozenset(open_paths)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket") or scope["path"] in self.open_paths:
            await self.app(scope, receive, send)
            return
        headers = {
            name.decode("latin-1").lower(): value.decode("latin-1")
            for name, value in scope["headers"]
        }
        if check_api_key(headers, self.api_key):
            await self.app(scope, receive, send)
            return
        client = scope.get("client") or ("?", 0)
        REFUSALS.info(f"refused {scope['type']} {scope['path']} from {client[0]}: no valid API key")
        if scope["type"] == "http":
            await _refuse_http(send, "http.response")
        elif "websocket.http.response" in scope.get("extensions", {}):
            await _refuse_http(send, "websocket.http.response")
        else:
            await send({"type": "websocket.close", "code": 1008, "reason": "invalid API key"})


async def _refuse_http(send: Send, prefix: str) -> None:
    await send({
        "type": f"{prefix}.start",
        "status": 401,
        "headers": [
            (b"content-type", b"application/json"),
            (b"content-length", str(len(_REFUSAL)).encode()),
            (b"www-authenticate", b"Bearer"),
            (b"connection", b"close"),
        ],
    })  # fmt: skip
    await send({"type": f"{prefix}.body", "body": _REFUSAL})
