"""The ZeroMQ transport on its own: what it refuses, and a socket never used past a failure."""

from __future__ import annotations

import asyncio
import socket
import time

import pytest

from gr00t_server import Gr00tServer, from_bytes, to_bytes
from vla_client.errors import ConnectError, RequestTimeoutError
from vla_client.transports.http import LONGER_TIMEOUT

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
        assert time.monotonic() - started < 2.0  # the call's 0.1 s, not the transport's 5 s
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
    for the next exchange's (a dropped connection there means a reply cut off, or lost), but
    the drop is counted: the server may be another now."""
    unused_tcp_port = free_port()
    transport = zmq_transport.ZmqTransport(f"tcp://127.0.0.1:{unused_tcp_port}", timeout_s=5)
    with Gr00tServer(port=unused_tcp_port):
        assert from_bytes(transport.call(PING))["status"] == "ok"
        assert transport.connection_drops() == 0
    time.sleep(0.3)  # the client's socket sees the drop and retries while idle
    with Gr00tServer(port=unused_tcp_port):
        assert transport.connection_drops() == 1
        assert from_bytes(transport.call(PING))["status"] == "ok"
        assert transport.connection_drops() == 1
    transport.close()


def test_a_drop_during_an_exchange_is_counted() -> None:
    """A server that goes away while a request waits: `ConnectError`, and one drop counted."""
    transport = zmq_transport.ZmqTransport(f"tcp://127.0.0.1:{free_port()}", timeout_s=5)
    with Gr00tServer(port=int(transport.url.rsplit(":", 1)[1])) as server:
        server.reply = lambda request: server.stop()
        with pytest.raises(ConnectError, match="dropped the connection"):
            transport.call(to_bytes({"endpoint": "get_action", "data": {}}))
    assert transport.drops == 1
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


def test_the_defaults_are_a_ten_second_timeout_and_the_reply_size_floor() -> None:
    from vla_client.protocol import REPLY_SIZE_FLOOR

    transport = zmq_transport.ZmqTransport("tcp://gpu-box")
    assert (transport.url, transport.timeout_s, transport.max_reply_bytes) == (
        "tcp://gpu-box",
        10.0,
        REPLY_SIZE_FLOOR,
    )


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"timeout_s": 0}, "timeout_s must be a number > 0; got 0"),
        ({"max_reply_bytes": 1.5}, "max_reply_bytes must be an integer > 0; got 1.5"),
    ],
)
def test_option_errors_name_the_option(options: dict, message: str) -> None:
    with pytest.raises(ValueError) as refused:
        zmq_transport.ZmqTransport("tcp://gpu-box", **options)
    assert str(refused.value) == message


def test_a_wait_for_a_silent_server_sleeps_and_names_the_url_and_the_seconds() -> None:
    with Gr00tServer(delay_s=2.0) as server:
        transport = zmq_transport.ZmqTransport(server.url, timeout_s=5)
        cpu = time.process_time()
        with pytest.raises(RequestTimeoutError) as waited:
            transport.call(PING, timeout_s=0.3)
        # ZeroMQ's poll sleeps until the end: a spinning wait would use the 0.3 s of CPU
        assert time.process_time() - cpu < 0.15
        assert str(waited.value) == f"no reply from {server.url} within 0.3 s; {LONGER_TIMEOUT}"
        transport.close()


def test_an_async_call_keeps_to_its_own_timeout_on_a_socket_of_the_shared_context() -> None:
    import zmq

    async def run(url: str) -> None:
        transport = zmq_transport.AsyncZmqTransport(url, timeout_s=5)
        started = time.monotonic()
        with pytest.raises(RequestTimeoutError) as waited:
            await transport.call(PING, timeout_s=0.1)
        assert time.monotonic() - started < 2.0  # the call's 0.1 s, not the transport's 5 s
        assert str(waited.value) == f"no reply from {url} within 0.1 s; {LONGER_TIMEOUT}"
        transport._opened()
        assert transport._sockets is not None
        # one process-wide context: a context per socket would leave its I/O thread behind
        assert transport._sockets[0].context.underlying == zmq.Context.instance().underlying
        await transport.close()

    with Gr00tServer(delay_s=0.5) as server:
        asyncio.run(run(server.url))


def test_a_server_that_starts_during_the_call_answers_it() -> None:
    """ZeroMQ retries the connection while the request waits: the attempts it reports before
    the server is up are no error (a robot's client may start before GR00T's server)."""
    import threading

    port = free_port()
    transport = zmq_transport.ZmqTransport(f"tcp://127.0.0.1:{port}", timeout_s=5)
    serving, finished = threading.Event(), threading.Event()

    def serve() -> None:
        time.sleep(0.3)
        with Gr00tServer(port=port):
            serving.set()
            finished.wait(5)

    thread = threading.Thread(target=serve)
    thread.start()
    try:
        reply = transport.call(PING)
    finally:
        finished.set()
        thread.join()
        transport.close()
    assert serving.is_set() and from_bytes(reply)["status"] == "ok"
