"""The asyncio client's connection errors say what the blocking client's say (issue 45 item
9), over HTTP and websockets: a refused port names the port and the fix, not asyncio's ``All
connection attempts failed``; a ``ws://`` URL at an ordinary web server says it is one."""

from __future__ import annotations

import asyncio
import http.server
import socket
import threading
from collections.abc import Iterator

import numpy as np
import pytest

from raw_http_server import RawHTTPServer, RawRequest
from vla_client import ActionClient, AsyncActionClient, Observation
from vla_client.errors import ConnectError

OBSERVATION = Observation({"wrist": np.zeros((16, 16, 3), np.uint8)})


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture(scope="module")
def web_server_port() -> Iterator[int]:
    """Python's own web server: it answers every request, a websocket handshake too, with an
    HTTP/1.0 page."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), QuietHandler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield int(server.server_address[1])
    server.shutdown()
    server.server_close()


def blocking_error(url: str) -> str:
    with pytest.raises(ConnectError) as raised, ActionClient(url) as client:
        client.infer(OBSERVATION)
    return str(raised.value)


def async_error(url: str) -> str:
    async def infer() -> None:
        async with AsyncActionClient(url) as client:
            await client.infer(OBSERVATION)

    with pytest.raises(ConnectError) as raised:
        asyncio.run(infer())
    return str(raised.value)


@pytest.mark.parametrize("scheme", ["http", "ws"])
@pytest.mark.parametrize("error", [blocking_error, async_error], ids=["blocking", "async"])
def test_a_refused_port_is_named_with_its_fix_by_both_clients(scheme, error) -> None:
    port = closed_port()
    message = error(f"{scheme}://127.0.0.1:{port}")
    assert f"connection refused, nothing listens on port {port} of 127.0.0.1" in message
    assert f"start one there ('vla-client serve --port {port}')" in message
    assert "All connection attempts failed" not in message
    assert "Connect call failed" not in message


@pytest.mark.parametrize("error", [blocking_error, async_error], ids=["blocking", "async"])
def test_a_websocket_url_at_an_ordinary_web_server_says_so(error, web_server_port) -> None:
    url = f"ws://127.0.0.1:{web_server_port}"
    assert error(url) == (
        f"{url}/v1/actions/realtime is not a websocket server: it answered the websocket "
        "handshake with 'HTTP/1.0 404 File not found', as an ordinary web server does; give "
        "the URL of a VLA server's websocket (vla-client serve's ws://HOST:PORT, openpi's "
        "server, SGLang's /v1/actions/realtime)"
    )


@pytest.mark.parametrize("scheme", ["http", "ws"])
def test_both_clients_say_the_same_words(scheme) -> None:
    url = f"{scheme}://127.0.0.1:{closed_port()}"
    assert blocking_error(url) == async_error(url)


@pytest.mark.parametrize("error", [blocking_error, async_error], ids=["blocking", "async"])
def test_the_status_line_a_web_server_answered_is_quoted_whole(error) -> None:
    def answer(request: RawRequest, conn: socket.socket) -> None:
        conn.sendall(b"HTTP/1.0 502 Bad Gateway: upstream down\r\nContent-Length: 0\r\n\r\n")

    with RawHTTPServer(answer) as server:
        url = server.url.replace("http://", "ws://")
        assert "handshake with 'HTTP/1.0 502 Bad Gateway: upstream down'," in error(url)
