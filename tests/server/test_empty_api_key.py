"""An empty key never unlocks anything: not as the server's key, not as the one a client sends.

Requests are written by hand, as curl would send them, to every route the app has (the API
routes, the docs, every websocket) with ``Authorization: Bearer`` and nothing after it.
"""

from __future__ import annotations

import base64
import os
import socket
from collections.abc import Iterator

import pytest
from starlette.routing import BaseRoute, Route, WebSocketRoute

from vla_client.server import LocalServer, ReferencePolicy, ServerConfig, create_app
from vla_client.server.edge.auth import OPEN_PATHS

KEY = "k3y-for-empty-tests"
EMPTY_KEYS = ["Bearer", "Bearer ", "Bearer \t ", "Api-Key", "Api-Key  ", "", "bearer"]


APP = create_app(ReferencePolicy(), ServerConfig(in_process=True, api_key=KEY))


@pytest.fixture(scope="module")
def server() -> Iterator[LocalServer]:
    with LocalServer(APP) as running:
        yield running


def guarded(routes: list[BaseRoute]) -> list[tuple[str, str]]:
    """(method, path) of every route behind the key; websockets as method ``WS``."""
    found = []
    for route in routes:
        path = getattr(route, "path", "")
        if path in OPEN_PATHS:
            continue
        if isinstance(route, WebSocketRoute) or type(route).__name__ == "APIWebSocketRoute":
            found.append(("WS", path))
        elif isinstance(route, Route) and route.methods:
            found.extend((method, path) for method in sorted(route.methods - {"HEAD"}))
    return found


def status(server: LocalServer, method: str, path: str, authorization: str | None) -> int:
    lines = [f"{'GET' if method == 'WS' else method} {path} HTTP/1.1", "Host: 127.0.0.1"]
    if method == "WS":
        nonce = base64.b64encode(os.urandom(16)).decode()
        lines += ["Upgrade: websocket", "Connection: Upgrade", f"Sec-WebSocket-Key: {nonce}",
                  "Sec-WebSocket-Version: 13"]  # fmt: skip
    else:
        lines += ["Content-Length: 0", "Connection: close"]
    if authorization is not None:
        lines.append(f"Authorization: {authorization}")
    with socket.create_connection((server.host, server.port), timeout=10) as sock:
        sock.sendall(("\r\n".join(lines) + "\r\n\r\n").encode())
        return int(sock.recv(4096).split(b" ", 2)[1])


def test_every_guarded_route_is_found(server: LocalServer) -> None:
    routes = guarded(APP.routes)
    assert ("POST", "/v1/actions/generations") in routes
    assert ("GET", "/v1/actions/metadata") in routes
    assert {("WS", "/v1/actions/realtime"), ("WS", "/openpi/policy")} <= set(routes)


@pytest.mark.parametrize("authorization", EMPTY_KEYS)
def test_an_empty_presented_key_is_refused_everywhere(
    server: LocalServer, authorization: str
) -> None:
    refused = {
        f"{method} {path}": status(server, method, path, authorization)
        for method, path in guarded(APP.routes)
    }
    assert set(refused.values()) == {401}, refused


def test_the_right_key_opens_every_route(server: LocalServer) -> None:
    for method, path in guarded(APP.routes):
        code = status(server, method, path, f"Bearer {KEY}")
        assert code != 401, (method, path)
        if method == "WS":
            assert code == 101, path


def test_a_server_is_never_made_with_an_empty_key() -> None:
    with pytest.raises(ValueError, match="api_key must not be empty"):
        ServerConfig(api_key="")
