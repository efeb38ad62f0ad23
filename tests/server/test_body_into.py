"""Bodies read straight into the app's buffer by the HTTP protocol (`BODY_INTO`).

A real uvicorn server on 127.0.0.1 with the server's own protocol (`uvicorn_options`) serves
an endpoint that reads each body with `read_body` into a buffer of its own and answers the
body's digest and whether the protocol wrote it (the `BodyInto` path) or the app copied it
chunk by chunk. Raw sockets send the bodies in pieces, with the headers, pipelined behind
another request, or not at all, and h11 (as a client) reads the replies.
"""

from __future__ import annotations

import hashlib
import json
import socket
import time
from collections.abc import Iterator
from typing import Any

import h11
import pytest
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse

from vla_client.server import LocalServer, ServerConfig
from vla_client.server.edge.connections import BODY_INTO
from vla_client.server.edge.limits import read_body

BODY_TIMEOUT_S = 1.0


def echo_app() -> FastAPI:
    """POST /echo: the body's sha256 and length, and whether the protocol wrote it."""
    app = FastAPI()
    app.state.config = ServerConfig(body_timeout_s=BODY_TIMEOUT_S)

    @app.post("/echo")
    async def echo(request: Request) -> JSONResponse:
        offer = request.scope.get("extensions", {}).get(BODY_INTO)
        started: list[Any] = []
        if offer is not None:
            start = offer["start"]

            def recording_start(buffer: memoryview) -> Any:
                started.append(start(buffer))
                return started[-1]

            offer["start"] = recording_start
        buffers: list[memoryview] = []

        def into(size: int) -> memoryview:
            buffers.append(memoryview(bytearray(size)))
            return buffers[-1]

        body = await read_body(request, 1 << 24, BODY_TIMEOUT_S, into)
        return JSONResponse(
            {
                "sha256": hashlib.sha256(body).hexdigest(),
                "size": len(body),
                "into_buffer": bool(buffers) and body is buffers[0],
                "offered": offer is not None,
                "direct": bool(started) and started[0] is not None,
            }
        )

    return app


@pytest.fixture(scope="module")
def server() -> Iterator[LocalServer]:
    with LocalServer(echo_app()) as running:
        yield running


def post(body: bytes, content_length: int | None = None) -> bytes:
    length = len(body) if content_length is None else content_length
    return f"POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: {length}\r\n\r\n".encode() + body


def replies(sock: socket.socket, count: int) -> list[tuple[int, bytes]]:
    """The next `count` responses on `sock`: status and body each (h11 reads them as the
    client of requests like ours, which it is told were sent)."""
    client = h11.Connection(h11.CLIENT)
    found: list[tuple[int, bytes]] = []
    status, content = 0, b""
    client.send(
        h11.Request(method="POST", target="/echo", headers=[("Host", "x"), ("Content-Length", "0")])
    )
    client.send(h11.EndOfMessage())
    while len(found) < count:
        event = client.next_event()
        if event is h11.NEED_DATA:
            client.receive_data(sock.recv(65536))
        elif isinstance(event, h11.Response):
            status, content = event.status_code, b""
        elif isinstance(event, h11.Data):
            content += event.data
        elif isinstance(event, h11.EndOfMessage):
            found.append((status, content))
            if len(found) < count:
                client.start_next_cycle()
                client.send(
                    h11.Request(
                        method="POST",
                        target="/echo",
                        headers=[("Host", "x"), ("Content-Length", "0")],
                    )
                )
                client.send(h11.EndOfMessage())
        elif isinstance(event, h11.ConnectionClosed):
            break
    return found


def expected(body: bytes) -> dict[str, Any]:
    return {
        "sha256": hashlib.sha256(body).hexdigest(),
        "size": len(body),
        "into_buffer": True,
        "offered": True,
        "direct": True,
    }


def connect(server: LocalServer) -> socket.socket:
    return socket.create_connection((server.host, server.port), timeout=10)


def test_a_body_sent_in_pieces_is_written_by_the_protocol(server: LocalServer) -> None:
    body = bytes(range(256)) * 4096  # 1 MiB
    with connect(server) as sock:
        sock.sendall(post(b"", content_length=len(body)))
        time.sleep(0.05)  # the app starts and hands its buffer over before any body arrives
        for start in range(0, len(body), 100_003):
            sock.sendall(body[start : start + 100_003])
            time.sleep(0.005)
        ((status, content),) = replies(sock, 1)
    assert status == 200 and json.loads(content) == expected(body)


def test_body_that_came_with_the_headers_is_kept(server: LocalServer) -> None:
    body = b"0123456789" * 50_000
    with connect(server) as sock:
        sock.sendall(post(body[:7_777], content_length=len(body)))
        time.sleep(0.05)  # read by the protocol before the app asks for the rest
        sock.sendall(body[7_777:])
        ((status, content),) = replies(sock, 1)
    assert status == 200 and json.loads(content) == expected(body)


def test_a_request_pipelined_behind_a_body_is_read_after_it(server: LocalServer) -> None:
    first, second = b"a" * 300_000 + b"end", b"b" * 200_000 + b"END"
    with connect(server) as sock:
        sock.sendall(post(b"", content_length=len(first)))
        time.sleep(0.05)
        # The end of the first body and all of the next request in one read.
        sock.sendall(first + post(second))
        (status_1, content_1), (status_2, content_2) = replies(sock, 2)
    assert (status_1, json.loads(content_1)) == (200, expected(first))
    assert status_2 == 200
    assert json.loads(content_2)["sha256"] == hashlib.sha256(second).hexdigest()


def test_a_body_there_before_the_app_reads_is_all_in_the_buffer(server: LocalServer) -> None:
    body = b"small body"
    with connect(server) as sock:
        sock.sendall(post(body))
        ((status, content),) = replies(sock, 1)
    answer = json.loads(content)
    assert status == 200 and answer["sha256"] == hashlib.sha256(body).hexdigest()
    assert answer["into_buffer"] and answer["size"] == len(body)


def test_a_body_that_stalls_gets_408_and_the_next_connection_is_served(
    server: LocalServer,
) -> None:
    with connect(server) as sock:
        sock.sendall(post(b"x" * 1000, content_length=100_000))
        started = time.monotonic()
        ((status, _),) = replies(sock, 1)
        assert status == 408 and time.monotonic() - started < BODY_TIMEOUT_S + 2
        sock.settimeout(2)
        try:  # late body bytes, which the protocol no longer has a buffer for
            sock.sendall(b"y" * 5000)
            assert sock.recv(65536) == b""  # the server closed the connection
        except (ConnectionResetError, BrokenPipeError):
            pass  # closed, with those bytes unread
    body = b"z" * 200_000
    with connect(server) as sock:
        sock.sendall(post(body))
        ((status, content),) = replies(sock, 1)
    assert status == 200 and json.loads(content)["sha256"] == hashlib.sha256(body).hexdigest()


def test_a_client_that_hangs_up_mid_body_leaves_the_server_serving(
    server: LocalServer,
) -> None:
    for _ in range(5):
        with connect(server) as sock:
            sock.sendall(post(b"", content_length=100_000))
            time.sleep(0.02)
            sock.sendall(b"q" * 50_000)  # of 100 000
            time.sleep(0.02)
    body = b"w" * 123_457
    with connect(server) as sock:
        sock.sendall(post(body))
        ((status, content),) = replies(sock, 1)
    assert status == 200 and json.loads(content)["sha256"] == hashlib.sha256(body).hexdigest()


def test_the_installed_h11_keeps_the_reader_the_protocol_counts_on() -> None:
    """The fast path is on with the h11 this project installs (0.14 to 0.16 keep their body
    reader's ``_length`` and ``_remaining``); a change there turns it off, not into errors."""
    from vla_client.server.edge import connections

    assert connections.H11_BODY_INTO


def test_an_h11_the_protocol_does_not_know_reads_bodies_the_ordinary_way(
    server: LocalServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    from vla_client.server.edge import connections

    monkeypatch.setattr(connections, "H11_BODY_INTO", False)
    body = bytes(range(256)) * 2048
    with connect(server) as sock:
        sock.sendall(post(body))
        ((status, content),) = replies(sock, 1)
    assert status == 200
    assert json.loads(content) == {**expected(body), "offered": False, "direct": False}
