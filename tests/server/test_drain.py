"""SIGTERM of ``vla-client serve`` with a request in flight on a keep-alive connection.

The request in flight gets its 200; a client that connects once the server is stopping is
refused (which clients retry), never accepted into a listening socket nobody serves any more
and then reset. With several entrypoints the serving process used to keep its copy of the
listening socket open until it exited, so every connection made during the drain was reset.
"""

from __future__ import annotations

import signal
import socket
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from serve_process import start_serve

from vla_client.cameras.scene import synthetic_frames
from vla_client.observation import Observation
from vla_client.protocol import encode_request

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
import load_test

GENERATIONS = "/v1/actions/generations"
DRIP_S = 3.0
SIGTERM_AT_S = 0.5
PROBE_AT_S = 1.5


def dripping(body: bytes, seconds: float) -> Iterator[bytes]:
    """`body` in ten pieces spread over `seconds`."""
    step = -(-len(body) // 10)
    for start in range(0, len(body), step):
        yield body[start : start + step]
        time.sleep(seconds / 10)


def probe(port: int) -> str:
    """What a new client meets: ``refused``, or what happens to a request it sends."""
    try:
        sock = socket.create_connection(("127.0.0.1", port), timeout=5)
    except ConnectionRefusedError:
        return "refused"
    with sock:
        sock.sendall(b"GET /health HTTP/1.1\r\nhost: x\r\n\r\n")
        try:
            reply = sock.recv(100)
        except OSError as exc:
            return f"accepted, then {type(exc).__name__}"
        return f"accepted, then {reply[:12]!r}"


@pytest.mark.parametrize("api_servers", ["1", "2"])
def test_sigterm_drains_the_request_in_flight_and_refuses_new_clients(api_servers: str) -> None:
    port = load_test.free_port()
    server = start_serve(port, "--api-servers", api_servers)
    url = f"http://127.0.0.1:{port}"
    body, content_type = encode_request(
        Observation(images=synthetic_frames(2, 64, 64)), encoding="raw", wire="msgpack"
    )
    headers = {"content-type": content_type, "content-length": str(len(body))}
    probed: list[str] = []
    try:
        with httpx.Client(base_url=url, timeout=30) as http:  # one keep-alive connection
            assert http.post(GENERATIONS, content=body, headers=headers).status_code == 200
            threading.Timer(SIGTERM_AT_S, server.send_signal, (signal.SIGTERM,)).start()
            threading.Timer(PROBE_AT_S, lambda: probed.append(probe(port))).start()
            reply = http.post(GENERATIONS, content=dripping(body, DRIP_S), headers=headers)
        assert reply.status_code == 200, reply.text
        assert server.wait(30) in (0, -signal.SIGTERM)
    finally:
        if server.poll() is None:
            server.kill()
            server.wait()
    assert probed == ["refused"]
    errors = server.stderr.read().decode() if server.stderr else ""
    assert "Traceback" not in errors


@pytest.mark.parametrize("api_servers", ["1", "2"])
def test_sighup_drains_like_sigterm_and_exits_0(api_servers: str) -> None:
    """A hang-up (a closed terminal, ``kill -HUP``) used to end ``serve`` at once (rc -1, and
    with several entrypoints uvicorn restarted them instead): now it drains and exits 0."""
    port = load_test.free_port()
    server = start_serve(port, "--api-servers", api_servers)
    body, content_type = encode_request(
        Observation(images=synthetic_frames(2, 64, 64)), encoding="raw", wire="msgpack"
    )
    headers = {"content-type": content_type, "content-length": str(len(body))}
    try:
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=30) as http:
            assert http.post(GENERATIONS, content=body, headers=headers).status_code == 200
            threading.Timer(SIGTERM_AT_S, server.send_signal, (signal.SIGHUP,)).start()
            reply = http.post(GENERATIONS, content=dripping(body, DRIP_S), headers=headers)
        assert reply.status_code == 200, reply.text
        assert server.wait(30) == 0
    finally:
        if server.poll() is None:
            server.kill()
            server.wait()
    errors = server.stderr.read().decode() if server.stderr else ""
    assert "Received SIGHUP, exiting." in errors and "Traceback" not in errors
