"""A websocket handshake answered with a redirect is reported, never followed (issue 36).

The `websockets` library follows redirects itself (its asyncio client since 14, its sync client
since 17.1), and across origins strips only ``Authorization``, ``Cookie`` and
``Proxy-Authorization``: a key in any other header (``Api-Key``, say) went to wherever the server
pointed. As the HTTP transport does, both websocket transports report the redirect as a
`ServerError` naming where it pointed, and send nothing there. The servers are real, on
127.0.0.1: one that redirects, and the place it points to, which records what reaches it.
"""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Iterator

import numpy as np
import pytest

from raw_http_server import RawHTTPServer, RawRequest
from vla_client.client import ActionClient, AsyncActionClient
from vla_client.errors import ServerError
from vla_client.observation import Observation
from vla_client.transports import NO_RETRY, AsyncWebSocketTransport, WebSocketTransport

KEY = "s3cret"


@pytest.fixture
def elsewhere() -> Iterator[RawHTTPServer]:
    """Where the redirects point; it records whatever reaches it."""

    def answer(request: RawRequest, conn: socket.socket) -> None:
        conn.sendall(b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n")

    with RawHTTPServer(answer) as server:
        yield server


def redirecting(status: int, location: str) -> RawHTTPServer:
    def answer(request: RawRequest, conn: socket.socket) -> None:
        conn.sendall(
            f"HTTP/1.1 {status} Moved\r\nLocation: {location}\r\nContent-Length: 0\r\n\r\n".encode()
        )

    return RawHTTPServer(answer)


OPTIONS = {"retry": NO_RETRY, "check_contract": False}
OBSERVATION = Observation({"wrist": np.zeros((32, 32, 3), np.uint8)}, task="t")


def infer(client_type: type, url: str, **options: object) -> None:
    """One inference with a client of `client_type` (sync or asyncio) at `url`."""
    if client_type is ActionClient:
        with ActionClient(url, **OPTIONS, **options) as client:  # type: ignore[arg-type]
            client.infer(OBSERVATION)
        return

    async def run() -> None:
        async with AsyncActionClient(url, **OPTIONS, **options) as client:  # type: ignore[arg-type]
            await client.infer(OBSERVATION)

    asyncio.run(run())


@pytest.mark.parametrize("client_type", [ActionClient, AsyncActionClient])
@pytest.mark.parametrize("endpoint", ["realtime", "openpi"])
@pytest.mark.parametrize("status", [301, 302, 307, 308])
def test_a_redirected_handshake_is_reported_and_not_followed(
    client_type: type, endpoint: str, status: int, elsewhere: RawHTTPServer
) -> None:
    location = f"ws://127.0.0.1:{elsewhere.port}/openpi/policy"
    with redirecting(status, location) as server, pytest.raises(ServerError) as caught:
        infer(client_type, f"ws://127.0.0.1:{server.port}", api_key=KEY, endpoint=endpoint)
    assert caught.value.status_code == status
    assert f"the server redirected to {location} (HTTP {status}); not followed" in str(caught.value)
    assert KEY in server.requests[0].headers["authorization"]  # the server asked for was sent it
    assert elsewhere.requests == []


@pytest.mark.parametrize("transport_type", [WebSocketTransport, AsyncWebSocketTransport])
def test_a_key_in_another_header_never_reaches_the_place_pointed_to(
    transport_type: type, elsewhere: RawHTTPServer
) -> None:
    """``Api-Key`` is a header the library does not strip on a cross-origin redirect."""
    location = f"ws://127.0.0.1:{elsewhere.port}/v1/actions/realtime"
    with redirecting(302, location) as server, pytest.raises(ServerError, match="not followed"):
        url = f"ws://127.0.0.1:{server.port}"
        transport = transport_type(url, headers={"Api-Key": KEY})
        infer(
            ActionClient if transport_type is WebSocketTransport else AsyncActionClient,
            url,
            transport=transport,
        )
    assert server.requests[0].headers["api-key"] == KEY
    assert elsewhere.requests == []


def test_a_redirect_on_the_same_server_is_not_followed_either() -> None:
    """Same host and port, another path: reported all the same, one rule for every redirect."""

    def answer(request: RawRequest, conn: socket.socket) -> None:
        conn.sendall(b"HTTP/1.1 307 Moved\r\nLocation: /elsewhere\r\nContent-Length: 0\r\n\r\n")

    with RawHTTPServer(answer) as server, pytest.raises(ServerError, match="not followed"):
        infer(AsyncActionClient, f"ws://127.0.0.1:{server.port}", api_key=KEY)
    assert len(server.requests) == 1
