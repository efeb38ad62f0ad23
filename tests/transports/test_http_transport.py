"""The HTTP transports, blocking and asyncio, piece by piece: the one-line message for a server
that cannot be reached, the reply size cap, the options a real server sees, and the deadline
that bounds each connect, read and write of a blocking exchange.

The deadline's pieces (`_bounded`, `_BoundedStream`, `_BoundedBackend`) are checked on real
sockets on 127.0.0.1 through the timeout they leave on the socket (httpcore's streams set it
before each wait), so no test measures a wall-clock time; the few end-to-end checks against a
silent server give a margin of many seconds.
"""

from __future__ import annotations

import asyncio
import json
import socket
import ssl
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpcore
import pytest
from httpcore._backends.sync import SyncBackend, SyncStream

from raw_http_server import RawHTTPServer, RawRequest
from vla_client.errors import ConnectError, ReplyTooLargeError, RequestTimeoutError
from vla_client.protocol import GENERATIONS_PATH, METADATA_PATH, REPLY_SIZE_FLOOR, reply_size_limit
from vla_client.transports.http import (
    LONGER_TIMEOUT,
    AsyncHTTPTransport,
    HTTPTransport,
    _BodyLimit,
    _bounded,
    _BoundedBackend,
    _BoundedStream,
    _exchange_ends_at,
    unreachable,
)

Transport = HTTPTransport | AsyncHTTPTransport
TIME_UP = r"^the exchange's time is up$"


def call(transport: Transport, name: str, *args: Any, **kwargs: Any) -> Any:
    """`transport.name(*args, **kwargs)`, run to its end whether it is blocking or asyncio."""
    result = getattr(transport, name)(*args, **kwargs)
    if isinstance(transport, AsyncHTTPTransport):

        async def run() -> Any:
            try:
                return await result
            finally:
                await transport.close()

        return asyncio.run(run())
    return result


@pytest.fixture(params=[HTTPTransport, AsyncHTTPTransport], ids=["blocking", "asyncio"])
def kind(request: pytest.FixtureRequest) -> type[Transport]:
    return request.param  # type: ignore[no-any-return]


def answering(body: bytes, head: str = "Content-Type: application/json\r\n") -> RawHTTPServer:
    """A server that answers every request 200 with `body` (its length declared)."""

    def answer(request: RawRequest, conn: socket.socket) -> None:
        conn.sendall(
            f"HTTP/1.1 200 OK\r\n{head}Content-Length: {len(body)}\r\n\r\n".encode() + body
        )

    return RawHTTPServer(answer)


def chunked(pieces: list[bytes]) -> RawHTTPServer:
    """A server that answers with `pieces` as chunks, no length declared."""

    def answer(request: RawRequest, conn: socket.socket) -> None:
        conn.sendall(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n")
        for piece in pieces:
            conn.sendall(b"%x\r\n%s\r\n" % (len(piece), piece))
        conn.sendall(b"0\r\n\r\n")

    return RawHTTPServer(answer)


@pytest.fixture
def silent() -> Iterator[RawHTTPServer]:
    """A server that reads requests and never answers."""
    with RawHTTPServer(lambda request, conn: None) as server:
        yield server


# --- unreachable: one line per cause ------------------------------------------------------


def raised_from(outer: BaseException, cause: BaseException) -> BaseException:
    outer.__cause__ = cause
    return outer


@pytest.mark.parametrize(
    ("url", "plain"),
    [
        ("https://robot.lan:8443/v1", "http://robot.lan:8443/v1"),
        ("wss://robot.lan:8443/ws", "ws://robot.lan:8443/ws"),
    ],
)
def test_tls_spoken_to_a_plain_server_says_which_url_to_use(url: str, plain: str) -> None:
    exc = OSError("[SSL: WRONG_VERSION_NUMBER] wrong version number (_ssl.c:1006)")
    assert unreachable(url, exc) == (f"{url}: the server speaks plain HTTP, not TLS; use {plain}")


def test_a_tls_error_on_a_plain_url_and_another_error_on_https_are_told_as_they_are() -> None:
    exc = OSError("[SSL: WRONG_VERSION_NUMBER] wrong version number")
    assert unreachable("http://h:1", exc) == f"cannot reach the server at http://h:1: {exc}"
    other = OSError("certificate verify failed")
    assert unreachable("https://h:1", other) == (
        "cannot reach the server at https://h:1: certificate verify failed"
    )


def refused(url: str, port: int, host: str) -> str:
    return (
        f"cannot reach the server at {url}: connection refused, nothing listens on port "
        f"{port} of {host}; start one there ('vla-client serve --port {port}') "
        "or give the URL of a running one"
    )


@pytest.mark.parametrize(
    ("url", "port"),
    [("http://robot.lan", 80), ("ws://robot.lan", 80), ("https://robot.lan", 443),
     ("wss://robot.lan", 443), ("http://robot.lan:8000", 8000)],
)  # fmt: skip
def test_a_refused_connection_names_the_port_nothing_listens_on(url: str, port: int) -> None:
    exc = raised_from(OSError("All connection attempts failed"), ConnectionRefusedError(111, "x"))
    assert unreachable(url, exc) == refused(url, port, "robot.lan")


def test_a_refusal_told_only_in_words_is_found_whatever_its_case() -> None:
    exc = raised_from(OSError("outer"), OSError("Connect call failed: Connection Refused"))
    assert unreachable("http://h:5", exc) == refused("http://h:5", 5, "h")


def test_a_web_server_answering_a_websocket_handshake_is_named() -> None:
    cause = ValueError("unsupported protocol; expected HTTP/1.1: HTTP/1.0 200 OK")
    exc = raised_from(OSError("did not receive a valid HTTP response"), cause)
    assert unreachable("ws://h:8000", exc) == (
        "ws://h:8000 is not a websocket server: it answered the websocket handshake with "
        "'HTTP/1.0 200 OK', as an ordinary web server does; give the URL of a VLA server's "
        "websocket (vla-client serve's ws://HOST:PORT, openpi's server, SGLang's "
        "/v1/actions/realtime)"
    )


@pytest.mark.parametrize(
    "exc",
    [
        OSError("did not receive a valid HTTP response"),  # no cause to quote
        raised_from(OSError("handshake failed"), ValueError("a: b")),  # other words
        TimeoutError(),  # no words at all: its type names it
    ],
)
def test_any_other_cause_is_quoted(exc: BaseException) -> None:
    text = str(exc) or type(exc).__name__
    assert unreachable("ws://h:8000", exc) == f"cannot reach the server at ws://h:8000: {text}"


# --- the reply size cap ---------------------------------------------------------------------


def test_a_declared_length_over_the_cap_is_refused_and_one_at_it_is_read() -> None:
    limit = _BodyLimit(100)
    limit.check_declared({"content-length": "100"})
    limit.check_declared({})  # chunked: counted as it comes
    with pytest.raises(ReplyTooLargeError) as caught:
        limit.check_declared({"content-length": "101"})
    assert caught.value.limit == 100
    assert str(caught.value) == (
        "the reply's declared 101 bytes is over the limit of 100 bytes (max_reply_bytes); "
        "cut off, not read to the end"
    )


def test_a_body_is_counted_across_chunks_up_to_the_cap() -> None:
    limit = _BodyLimit(100)
    assert limit.counted(b"a" * 60) == b"a" * 60
    assert limit.counted(b"b" * 40) == b"b" * 40  # 100: at the cap
    with pytest.raises(ReplyTooLargeError) as caught:
        limit.counted(b"c")
    assert caught.value.limit == 100
    assert str(caught.value).startswith("the reply is over the limit of 100 bytes")


def test_a_reply_over_max_reply_bytes_is_cut_off(kind: type[Transport]) -> None:
    with answering(b"x" * 101) as declared, chunked([b"x" * 60, b"y" * 41]) as streamed:
        for server, what in ((declared, "the reply's declared 101 bytes"), (streamed, "the reply")):
            transport = kind(server.url, max_reply_bytes=100)
            with pytest.raises(ReplyTooLargeError, match=f"^{what} is over the limit of 100"):
                call(transport, "exchange", b"{}", "application/json", "application/json")


def test_a_reply_in_many_pieces_is_read_whole(kind: type[Transport]) -> None:
    pieces = [bytes([65 + i]) * 1000 for i in range(5)]
    with chunked(pieces) as server:
        reply = call(kind(server.url), "exchange", b"{}", "application/json", "*/*")
    assert reply.status == 200
    assert reply.content == b"".join(pieces)
    assert reply.content_type == ""  # the server named none


def test_the_metadata_sizes_the_cap_on_the_next_reply(kind: type[Transport]) -> None:
    document = {"output": {"action_horizon": 100, "action_dim": 500}}
    with answering(json.dumps(document).encode()) as server:
        transport = kind(server.url)
        assert transport.reply_limit == REPLY_SIZE_FLOOR
        assert call(transport, "metadata") == document
    assert transport.reply_limit == reply_size_limit(document) > REPLY_SIZE_FLOOR
    assert server.requests[0].line == f"GET {METADATA_PATH} HTTP/1.1"


# --- the options, as a server sees them -----------------------------------------------------


def test_the_options_reach_the_server(kind: type[Transport]) -> None:
    with answering(b"{}") as server:
        transport = kind(server.url + "/", api_key="k3y", headers={"X-Robot": "arm-2"})
        reply = call(transport, "exchange", b"[1]", "application/msgpack", "application/x-npy")
    assert reply.content_type == "application/json"
    (request,) = server.requests
    assert request.line == f"POST {GENERATIONS_PATH} HTTP/1.1"
    assert request.headers["authorization"] == "Bearer k3y"
    assert request.headers["x-robot"] == "arm-2"
    assert request.headers["content-type"] == "application/msgpack"
    assert request.headers["accept"] == "application/x-npy"
    assert request.body == b"[1]"


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"timeout_s": 0}, "timeout_s must be a number > 0; got 0"),
        ({"max_reply_bytes": 0}, "max_reply_bytes must be an integer > 0; got 0"),
        ({"max_reply_bytes": 1.5}, "max_reply_bytes must be an integer > 0; got 1.5"),
    ],
)
def test_an_option_out_of_range_is_refused(
    kind: type[Transport], options: dict[str, Any], message: str
) -> None:
    with pytest.raises(ValueError, match=f"^{message}$"):
        kind("http://127.0.0.1:9", **options)


def test_a_deadline_out_of_range_is_refused(kind: type[Transport]) -> None:
    for name, args in (("metadata", ()), ("exchange", (b"", "a/b", "a/b"))):
        with pytest.raises(ValueError, match=r"^timeout_s must be a number > 0; got -1$"):
            call(kind("http://127.0.0.1:9"), name, *args, timeout_s=-1)


def test_a_read_past_the_transport_timeout_names_it_and_the_url(
    kind: type[Transport], silent: RawHTTPServer
) -> None:
    transport = kind(silent.url + "/", timeout_s=0.25)
    started = time.monotonic()
    with pytest.raises(RequestTimeoutError) as caught:
        call(transport, "metadata")
    assert time.monotonic() - started < 4.0  # not httpx's default of 5 s
    assert str(caught.value) == (
        f"no reply from {silent.url} within 0.25 s (ReadTimeout); {LONGER_TIMEOUT}"
    )


def test_the_default_transport_timeout_is_ten_seconds(silent: RawHTTPServer) -> None:
    # the exchange's own deadline ends the wait; the message names the transport's timeout
    with pytest.raises(RequestTimeoutError, match=r"within 10 s \(ReadTimeout\)"):
        HTTPTransport(silent.url).metadata(timeout_s=0.2)


# --- the exchange's deadline ----------------------------------------------------------------


def test_an_exchange_deadline_ends_a_wait_the_transport_would_sit_out(
    kind: type[Transport], silent: RawHTTPServer
) -> None:
    for name, args in (("metadata", ()), ("exchange", (b"{}", "a/b", "a/b"))):
        transport = kind(silent.url, timeout_s=60.0)
        started = time.monotonic()
        with pytest.raises(RequestTimeoutError) as caught:
            call(transport, name, *args, timeout_s=0.2)
        assert time.monotonic() - started < 30.0  # the transport alone would wait 60 s
        if kind is AsyncHTTPTransport:
            assert str(caught.value) == "no complete reply within 0.2 s"


def test_a_deadline_that_leaves_time_lets_the_exchange_finish(kind: type[Transport]) -> None:
    with answering(b"{}") as server:
        reply = call(kind(server.url), "exchange", b"{}", "a/b", "a/b", timeout_s=30.0)
    assert reply.content == b"{}"


@pytest.fixture
def ends_in() -> Iterator[Callable[[float], None]]:
    """Sets the exchange's end `seconds` from now (negative: already past) for the test."""
    tokens = []

    def set_end(seconds: float) -> None:
        tokens.append(_exchange_ends_at.set(time.monotonic() + seconds))

    yield set_end
    for token in reversed(tokens):
        _exchange_ends_at.reset(token)


def test_bounded_shortens_a_wait_to_the_time_left(ends_in: Callable[[float], None]) -> None:
    assert _bounded(5.0, httpcore.ReadTimeout) == 5.0
    assert _bounded(None, httpcore.ReadTimeout) is None
    ends_in(100.0)
    assert _bounded(5.0, httpcore.ReadTimeout) == 5.0
    assert 90.0 < (_bounded(None, httpcore.ReadTimeout) or 0.0) <= 100.0
    assert 90.0 < (_bounded(500.0, httpcore.ReadTimeout) or 0.0) <= 100.0
    ends_in(0.5)
    assert 0.0 < (_bounded(None, httpcore.ReadTimeout) or 0.0) <= 0.5
    ends_in(-0.001)
    with pytest.raises(httpcore.WriteTimeout, match=TIME_UP):
        _bounded(5.0, httpcore.WriteTimeout)


@pytest.fixture
def pair() -> Iterator[tuple[socket.socket, socket.socket]]:
    ours, theirs = socket.socketpair()
    yield ours, theirs
    ours.close()
    theirs.close()


def test_a_stream_reads_and_writes_within_the_time_left(
    pair: tuple[socket.socket, socket.socket], ends_in: Callable[[float], None]
) -> None:
    ours, theirs = pair
    stream = _BoundedStream(SyncStream(ours))
    assert stream.get_extra_info("socket") is ours
    theirs.sendall(b"hello")
    assert stream.read(5, timeout=3.0) == b"hello"
    assert ours.gettimeout() == 3.0
    stream.write(b"ping", timeout=4.0)
    assert ours.gettimeout() == 4.0
    assert theirs.recv(4) == b"ping"
    ends_in(100.0)
    theirs.sendall(b"x")
    stream.read(1)
    assert 90.0 < (ours.gettimeout() or 0.0) <= 100.0
    stream.write(b"y")
    assert 90.0 < (ours.gettimeout() or 0.0) <= 100.0
    ends_in(-0.001)
    with pytest.raises(httpcore.ReadTimeout):
        stream.read(1, timeout=3.0)
    with pytest.raises(httpcore.WriteTimeout):
        stream.write(b"z", timeout=3.0)
    stream.close()
    assert ours.fileno() == -1


def test_a_connection_opens_within_the_time_left_with_its_options(
    ends_in: Callable[[float], None],
) -> None:
    backend = _BoundedBackend(SyncBackend())
    with socket.create_server(("127.0.0.2", 0)) as listener:
        port = listener.getsockname()[1]
        keepalive = [(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)]
        stream = backend.connect_tcp(
            "127.0.0.2", port, timeout=3.0, local_address="127.0.0.3", socket_options=keepalive
        )
        assert isinstance(stream, _BoundedStream)
        sock = stream.get_extra_info("socket")
        assert sock.gettimeout() == 3.0
        assert sock.getsockname()[0] == "127.0.0.3"
        assert sock.getsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE) == 1
        stream.close()
        ends_in(100.0)
        stream = backend.connect_tcp("127.0.0.2", port)
        assert 90.0 < (stream.get_extra_info("socket").gettimeout() or 0.0) <= 100.0
        stream.close()
        ends_in(-0.001)
        with pytest.raises(httpcore.ConnectTimeout, match=TIME_UP):
            backend.connect_tcp("127.0.0.2", port, timeout=3.0)


def test_a_unix_socket_opens_within_the_time_left(
    tmp_path: Path, ends_in: Callable[[float], None]
) -> None:
    backend = _BoundedBackend(SyncBackend())
    path = str(tmp_path / "s")
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as listener:
        listener.bind(path)
        listener.listen()
        keepalive = [(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)]
        stream = backend.connect_unix_socket(path, timeout=3.0, socket_options=keepalive)
        assert isinstance(stream, _BoundedStream)
        sock = stream.get_extra_info("socket")
        assert sock.gettimeout() == 3.0
        assert sock.getsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE) == 1
        stream.close()
        ends_in(-0.001)
        with pytest.raises(httpcore.ConnectTimeout, match=TIME_UP):
            backend.connect_unix_socket(path, timeout=3.0)


def test_the_backend_sleeps_as_asked() -> None:
    slept = threading.Event()

    class Recording(SyncBackend):
        def sleep(self, seconds: float) -> None:
            assert seconds == 0.01
            slept.set()

    _BoundedBackend(Recording()).sleep(0.01)
    assert slept.is_set()


def test_an_exchange_past_its_deadline_before_connecting_never_connects() -> None:
    with answering(b"{}") as server, pytest.raises(ConnectError) as caught:
        HTTPTransport(server.url).exchange(b"{}", "a/b", "a/b", timeout_s=1e-9)
    assert caught.value.sent is False
    assert str(caught.value) == (
        f"cannot reach the server at {server.url}: the exchange's time is up"
    )
    assert server.requests == []


def test_a_tls_handshake_starts_within_the_time_left(
    pair: tuple[socket.socket, socket.socket], ends_in: Callable[[float], None]
) -> None:
    ours, theirs = pair
    hello: list[bytes] = []

    def peer() -> None:  # reads the client's hello, then hangs up: the handshake fails
        theirs.settimeout(10.0)
        hello.append(theirs.recv(65536))
        theirs.close()

    reader = threading.Thread(target=peer)
    reader.start()
    context = ssl.create_default_context()
    with pytest.raises(httpcore.ConnectError):
        _BoundedStream(SyncStream(ours)).start_tls(context, "robot.example", timeout=3.0)
    reader.join()
    assert b"robot.example" in hello[0]  # the name went out in the hello (SNI)
    assert ours.gettimeout() == 3.0
    ends_in(-0.001)
    with pytest.raises(httpcore.ConnectTimeout, match=TIME_UP):
        _BoundedStream(SyncStream(ours)).start_tls(context, "robot.example", timeout=3.0)


def test_a_base_url_with_a_path_keeps_it_to_the_last_letter(silent: RawHTTPServer) -> None:
    with answering(b"{}") as server:
        assert call(HTTPTransport(server.url + "/apiX/"), "metadata") == {}
    assert server.requests[0].line == f"GET /apiX{METADATA_PATH} HTTP/1.1"
    with pytest.raises(RequestTimeoutError, match=f"^no reply from {silent.url}/apiX within"):
        HTTPTransport(silent.url + "/apiX/", timeout_s=0.2).metadata()


def test_an_exchange_whose_time_is_up_to_the_tick_waits_no_more(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    token = _exchange_ends_at.set(1000.0)
    try:
        monkeypatch.setattr(time, "monotonic", lambda: 1000.0)
        with pytest.raises(httpcore.ReadTimeout, match=TIME_UP):
            _bounded(5.0, httpcore.ReadTimeout)
    finally:
        monkeypatch.undo()
        _exchange_ends_at.reset(token)
