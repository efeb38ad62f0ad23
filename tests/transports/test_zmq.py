"""The ZeroMQ transport on its own: what it refuses, and a socket never used past a failure."""

from __future__ import annotations

import asyncio
import socket
import time

import pytest

from gr00t_server import Gr00tServer, from_bytes, to_bytes
from vla_client.errors import RequestTimeoutError

zmq_transport = pytest.importorskip("vla_client.transports.zmq")
PING = to_bytes({"endpoint": "ping"})


@pytest.mark.parametrize(
    ("url", "options", "match"),
    [
        ("http://127.0.0.1:5555", {}, "tcp://host:port"),
        ("tcp://127.0.0.1:99999", {}, "1..65535"),
        ("tcp://127.0.0.1:5555", {"timeout_s": 0}, "timeout_s"),
        ("tcp://127.0.0.1:5555", {"max_reply_bytes": 1.5}, "max_reply_bytes"),
    ],
)
def test_options_are_checked_when_given(url: str, options: dict, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        zmq_transport.ZmqTransport(url, **options)


def test_the_default_port_is_gr00ts() -> None:
    assert zmq_transport.ZmqTransport("tcp://gpu-box").address == "tcp://gpu-box:5555"


def test_a_socket_that_timed_out_is_closed_and_the_next_call_opens_a_new_one() -> None:
    with Gr00tServer(delay_s=0.5) as server:
        transport = zmq_transport.ZmqTransport(server.url, timeout_s=5)
        started = time.monotonic()
        with pytest.raises(RequestTimeoutError):
            transport.call(PING, timeout_s=0.1)
        assert time.monotonic() - started < 0.4
        assert transport._sockets is None  # closed, not kept for its late reply
        server.delay_s = 0.0
        assert from_bytes(transport.call(PING))["status"] == "ok"
        transport.close()


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def test_a_server_restarted_between_calls_is_no_error() -> None:
    """The drop and reconnect attempts ZeroMQ reports while the socket is idle are not taken
    for the next exchange's (a dropped connection there means a reply cut off, or lost)."""
    unused_tcp_port = free_port()
    transport = zmq_transport.ZmqTransport(f"tcp://127.0.0.1:{unused_tcp_port}", timeout_s=5)
    with Gr00tServer(port=unused_tcp_port):
        assert from_bytes(transport.call(PING))["status"] == "ok"
    time.sleep(0.3)  # the client's socket sees the drop and retries while idle
    with Gr00tServer(port=unused_tcp_port):
        assert from_bytes(transport.call(PING))["status"] == "ok"
    transport.close()


def test_concurrent_async_calls_take_turns_on_the_one_socket() -> None:
    async def main(url: str) -> list[dict]:
        transport = zmq_transport.AsyncZmqTransport(url, timeout_s=5)
        replies = await asyncio.gather(*(transport.call(PING) for _ in range(5)))
        await transport.close()
        return [from_bytes(reply) for reply in replies]

    with Gr00tServer() as server:
        replies = asyncio.run(main(server.url))
    assert [reply["status"] for reply in replies] == ["ok"] * 5
