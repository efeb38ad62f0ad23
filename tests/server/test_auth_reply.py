"""The 401 for a missing or wrong API key, byte for byte: status, headers and body.

Over HTTP and in a refused websocket handshake alike, the refusal is a complete JSON reply:
``application/json``, a Content-Length that matches the body, ``WWW-Authenticate: Bearer``,
and ``Connection: close``: a peer without the key keeps no connection open to hold a place in
the connection limit.
"""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator

import pytest

from vla_client.server import LocalServer, ReferencePolicy, ServerConfig, create_app

KEY = "k-7f3a"
BODY = b'{"detail":"missing or invalid API key"}'


@pytest.fixture(scope="module")
def keyed() -> Iterator[LocalServer]:
    config = ServerConfig(in_process=True, api_key=KEY)
    with LocalServer(create_app(ReferencePolicy(), config)) as server:
        yield server


def raw_reply(server: LocalServer, request: bytes) -> tuple[str, dict[str, str], bytes]:
    """Status line, headers (names lowercased) and body of the reply to a raw request."""
    with socket.create_connection((server.host, server.port), timeout=10) as sock:
        sock.sendall(request)
        data = b""
        while b"\r\n\r\n" not in data:
            data += sock.recv(65536)
        head, _, body = data.partition(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        headers = dict(line.split(": ", 1) for line in lines[1:])
        headers = {name.lower(): value for name, value in headers.items()}
        while len(body) < int(headers.get("content-length", len(body))):
            body += sock.recv(65536)
    return lines[0], headers, body


@pytest.mark.parametrize(
    "request_bytes",
    [
        b"GET /v1/actions/metadata HTTP/1.1\r\nHost: x\r\n\r\n",
        b"GET /v1/actions/metadata HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer wrong\r\n\r\n",
        b"GET /v1/actions/realtime HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\n"
        b"Connection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
        b"Sec-WebSocket-Version: 13\r\n\r\n",
    ],
    ids=["http-no-key", "http-wrong-key", "websocket-handshake"],
)
def test_the_refusal_is_a_complete_json_401(keyed: LocalServer, request_bytes: bytes) -> None:
    status, headers, body = raw_reply(keyed, request_bytes)
    assert status.startswith("HTTP/1.1 401"), status
    assert headers["content-type"] == "application/json"
    assert headers["content-length"] == str(len(BODY))
    assert headers["www-authenticate"] == "Bearer"
    assert headers["connection"] == "close"
    assert "transfer-encoding" not in headers
    assert body == BODY and json.loads(body) == {"detail": "missing or invalid API key"}


def test_a_refused_http_connection_is_closed_after_its_401(keyed: LocalServer) -> None:
    with socket.create_connection((keyed.host, keyed.port), timeout=10) as sock:
        sock.sendall(b"GET /v1/actions/metadata HTTP/1.1\r\nHost: x\r\n\r\n")
        data = b""
        while not data.endswith(BODY):
            data += sock.recv(65536)
        assert data.startswith(b"HTTP/1.1 401")
        sock.settimeout(3.0)  # under the idle timeout (5 s), which would close it anyway
        assert sock.recv(65536) == b""  # the server hung up after its reply
