"""The client against servers that redirect, drip their reply or never end it (issue 22)."""

from __future__ import annotations

import asyncio
import base64
import hashlib
import socket
import threading
import time
from collections.abc import Callable, Iterator

import numpy as np
import orjson
import pytest
from websockets.sync.server import ServerConnection, serve

import vla_client.transports.websocket as websocket_transport
from raw_http_server import Answer, RawHTTPServer, RawRequest
from vla_client.client import ActionClient, AsyncActionClient
from vla_client.codecs import msgpack_numpy
from vla_client.errors import (
    ConnectError,
    DeadlineExceededError,
    ProtocolError,
    ReplyTooLargeError,
    RequestTimeoutError,
    ServerError,
)
from vla_client.observation import Observation
from vla_client.protocol import REPLY_SIZE_FLOOR
from vla_client.transports import NO_RETRY, WebSocketTransport

DEADLINE_S = 1.0
SLACK_S = 1.0
"""How far past its deadline a call may end on a busy test machine; the calls these tests
stop ran 20 s and more before."""
DRIP_INTERVAL_S = 1.0
WEBSOCKET_GUID = b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11"


@pytest.fixture
def observation() -> Observation:
    return Observation({"wrist": np.zeros((32, 32, 3), np.uint8)}, task="t")


@pytest.fixture
def elsewhere() -> Iterator[RawHTTPServer]:
    """Where a hostile server points its redirects; it records whatever reaches it."""

    def answer(request: RawRequest, conn: socket.socket) -> None:
        conn.sendall(b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n")

    with RawHTTPServer(answer) as server:
        yield server


@pytest.mark.parametrize("status", [301, 302, 307, 308])
def test_a_redirect_is_reported_as_one_and_not_followed(
    status: int, elsewhere: RawHTTPServer, observation: Observation
) -> None:
    location = f"{elsewhere.url}/v1/actions/generations"

    def answer(request: RawRequest, conn: socket.socket) -> None:
        conn.sendall(
            f"HTTP/1.1 {status} Moved\r\nLocation: {location}\r\nContent-Length: 0\r\n\r\n".encode()
        )

    with (
        RawHTTPServer(answer) as server,
        ActionClient(server.url, api_key="s3cret", retry=NO_RETRY, check_contract=False) as client,
        pytest.raises(ServerError) as caught,
    ):
        client.infer(observation, request_id="r-1")
    assert caught.value.status_code == status
    assert f"the server redirected to {location} (HTTP {status}); not followed, " in str(
        caught.value
    )
    assert "the API key was not sent there" in str(caught.value)
    assert caught.value.request_id == "r-1"
    assert server.requests[0].headers["authorization"] == "Bearer s3cret"
    assert elsewhere.requests == []


def test_a_redirect_of_the_metadata_is_reported_the_same_way(observation: Observation) -> None:
    def answer(request: RawRequest, conn: socket.socket) -> None:
        conn.sendall(b"HTTP/1.1 307 Temporary Redirect\r\nContent-Length: 0\r\n\r\n")

    with (
        RawHTTPServer(answer) as server,
        ActionClient(server.url, retry=NO_RETRY) as client,
        pytest.raises(ServerError, match="redirected without saying where"),
    ):
        client.infer(observation)


def reply_bytes(document: object, request: RawRequest | None = None) -> bytes:
    """A complete JSON reply to `request` (its id echoed)."""
    if request is not None and isinstance(document, dict) and request.body:
        document = {**document, "request_id": orjson.loads(request.body)["request_id"]}
    body = orjson.dumps(document)
    head = f"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {len(body)}"
    return head.encode() + b"\r\n\r\n" + body


def dripping(server: Callable[[], RawHTTPServer], head_at_once: bool) -> Answer:
    """Answers with a valid reply, a byte every `DRIP_INTERVAL_S` (its head too, unless
    `head_at_once`): every read returns within the client's timeout, so only a bound on the
    whole call stops it."""

    def answer(request: RawRequest, conn: socket.socket) -> None:
        whole = reply_bytes({"actions": [[0.0] * 8] * 8}, request)
        head_end = whole.index(b"\r\n\r\n") + 4
        start = head_end if head_at_once else 0
        conn.sendall(whole[:start])
        for index in range(start, len(whole)):
            if server().closed.is_set():
                return
            conn.sendall(whole[index : index + 1])
            time.sleep(DRIP_INTERVAL_S)

    return answer


def endless(server: Callable[[], RawHTTPServer]) -> Answer:
    """Answers with a chunked reply that never ends, 64 KiB chunks as fast as it can."""

    def answer(request: RawRequest, conn: socket.socket) -> None:
        conn.sendall(
            b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
            b"Transfer-Encoding: chunked\r\n\r\n"
        )
        chunk = b"%x\r\n%s\r\n" % (65536, b"[" * 65536)
        while not server().closed.is_set():
            conn.sendall(chunk)

    return answer


def hostile(make: Callable[[Callable[[], RawHTTPServer]], Answer]) -> RawHTTPServer:
    servers: list[RawHTTPServer] = []
    servers.append(RawHTTPServer(make(lambda: servers[0])))
    return servers[0]


def timed(
    call: Callable[[], object], error: type[Exception] | tuple[type[Exception], ...]
) -> float:
    """Seconds `call` took to raise `error`."""
    start = time.monotonic()
    with pytest.raises(error):
        call()
    return time.monotonic() - start


@pytest.mark.parametrize("head_at_once", [True, False], ids=["body dripped", "all dripped"])
def test_a_dripping_server_cannot_hold_a_call_past_its_deadline(
    head_at_once: bool, observation: Observation
) -> None:
    with hostile(lambda server: dripping(server, head_at_once)) as server, ActionClient(
        server.url, timeout_s=2 * DRIP_INTERVAL_S, deadline_s=DEADLINE_S, retry=NO_RETRY,
        check_contract=False,
    ) as client:  # fmt: skip
        took = timed(lambda: client.infer(observation), DeadlineExceededError)
        assert client.stats.late_replies == 1
    assert took < DEADLINE_S + SLACK_S


def test_a_dripping_server_cannot_hold_the_metadata_read_past_the_deadline(
    observation: Observation,
) -> None:
    with (
        hostile(lambda server: dripping(server, head_at_once=False)) as server,
        ActionClient(server.url, timeout_s=5.0, deadline_s=DEADLINE_S, retry=NO_RETRY) as client,
    ):
        # The deadline ended it, not the 5 s timeout: a DeadlineExceededError saying so (it
        # was a RequestTimeoutError reading "no reply within 5 s").
        took = timed(lambda: client.infer(observation), DeadlineExceededError)
        assert client.stats.late_replies == 1
    assert took < DEADLINE_S + SLACK_S


@pytest.mark.parametrize("head_at_once", [True, False], ids=["body dripped", "all dripped"])
def test_a_dripping_server_cannot_hold_an_async_call_past_its_deadline(
    head_at_once: bool, observation: Observation
) -> None:
    async def main(url: str) -> float:
        async with AsyncActionClient(
            url, timeout_s=2 * DRIP_INTERVAL_S, deadline_s=DEADLINE_S, retry=NO_RETRY,
            check_contract=False,
        ) as client:  # fmt: skip
            start = time.monotonic()
            with pytest.raises(DeadlineExceededError):
                await client.infer(observation)
            return time.monotonic() - start

    with hostile(lambda server: dripping(server, head_at_once)) as server:
        assert asyncio.run(main(server.url)) < DEADLINE_S + SLACK_S


def test_without_a_deadline_the_timeout_stays_per_read(observation: Observation) -> None:
    # A reply dripped faster than the per-read timeout is slow, not dead: it is read whole.
    def answer(request: RawRequest, conn: socket.socket) -> None:
        whole = reply_bytes({"actions": [[0.5]]}, request)
        for index in range(len(whole)):
            conn.sendall(whole[index : index + 1])
            time.sleep(0.01)

    with (
        RawHTTPServer(answer) as server,
        ActionClient(server.url, timeout_s=0.5, retry=NO_RETRY, check_contract=False) as client,
    ):
        assert client.infer(observation).actions.tolist() == [[0.5]]


def test_an_endless_chunked_reply_is_cut_at_the_cap(observation: Observation) -> None:
    # Before, a reply like this grew the client to 3.4 GB within its 0.5 s deadline's 12 s.
    with (
        hostile(endless) as server,
        ActionClient(server.url, deadline_s=30.0, retry=NO_RETRY, check_contract=False) as client,
        pytest.raises(ReplyTooLargeError) as caught,
    ):
        client.infer(observation)
    assert caught.value.limit == REPLY_SIZE_FLOOR
    assert f"over the limit of {REPLY_SIZE_FLOOR} bytes (max_reply_bytes)" in str(caught.value)


def test_an_endless_chunked_reply_is_cut_on_the_async_client_too(observation: Observation) -> None:
    async def main(url: str) -> None:
        async with AsyncActionClient(
            url, max_reply_bytes=300_000, retry=NO_RETRY, check_contract=False
        ) as client:
            with pytest.raises(ReplyTooLargeError, match="limit of 300000 bytes"):
                await client.infer(observation)

    with hostile(endless) as server:
        asyncio.run(main(server.url))


def test_a_declared_length_over_the_cap_is_refused_before_the_body(
    observation: Observation,
) -> None:
    def answer(request: RawRequest, conn: socket.socket) -> None:
        conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 999999999\r\n\r\n[")

    with (
        RawHTTPServer(answer) as server,
        ActionClient(server.url, max_reply_bytes=4096, retry=NO_RETRY) as client,
        pytest.raises(ReplyTooLargeError, match="declared 999999999 bytes"),
    ):
        client.infer(observation)


def test_the_cap_is_sized_from_the_announced_chunk(observation: Observation) -> None:
    horizon, dim = 1024, 64  # 64 B a value: 4 MiB
    metadata = {"output": {"action_horizon": horizon, "action_dim": dim}}
    chunk = np.full((horizon, dim), 0.123456789).tolist()

    def answer(request: RawRequest, conn: socket.socket) -> None:
        if request.line.startswith("GET"):
            conn.sendall(reply_bytes(metadata))
        else:
            conn.sendall(reply_bytes({"actions": chunk}, request))

    with RawHTTPServer(answer) as server, ActionClient(server.url, retry=NO_RETRY) as client:
        # a 1.3 MB reply, over the floor: read because the server announced chunks this big
        assert client.infer(observation).actions.shape == (horizon, dim)
        assert client.transport.reply_limit == horizon * dim * 64  # type: ignore[attr-defined]


@pytest.mark.parametrize("asynchronous", [False, True], ids=["sync", "async"])
def test_a_websocket_server_dripping_its_handshake_cannot_hold_a_call_past_the_deadline(
    asynchronous: bool, observation: Observation
) -> None:
    def answer(request: RawRequest, conn: socket.socket) -> None:
        for byte in b"HTTP/1.1 101 Switching Protocols\r\n":
            if server.closed.is_set():
                return
            conn.sendall(bytes([byte]))
            time.sleep(DRIP_INTERVAL_S)

    options = {"timeout_s": 5.0, "deadline_s": DEADLINE_S, "retry": NO_RETRY,
               "check_contract": False}  # fmt: skip
    gives_up = DeadlineExceededError  # the deadline ended it (it was a ConnectError)

    async def infer_async(url: str) -> None:
        async with AsyncActionClient(url, **options) as client:
            await client.infer(observation)

    def infer(url: str) -> None:
        if asynchronous:
            asyncio.run(infer_async(url))
        else:
            with ActionClient(url, **options) as client:
                client.infer(observation)

    with RawHTTPServer(answer) as server:
        took = timed(lambda: infer(f"ws://127.0.0.1:{server.port}"), gives_up)
    assert took < DEADLINE_S + SLACK_S


HANDSHAKE_DELAY_S = 1.5
"""How long the slow server below takes to complete a websocket handshake."""


def upgrade(request: RawRequest) -> bytes:
    """The 101 answer that completes `request`'s websocket handshake (RFC 6455, 4.2.2)."""
    digest = hashlib.sha1(request.headers["sec-websocket-key"].encode() + WEBSOCKET_GUID)
    return (
        b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
        b"Sec-WebSocket-Accept: " + base64.b64encode(digest.digest()) + b"\r\n\r\n"
    )


LONG_CLOSE_S = 5.0
"""`CLOSE_TIMEOUT_S` in the tests below: a polite close waited on where it must not be would
add this much, far past the load slack they allow."""


@pytest.fixture
def long_close(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(websocket_transport, "CLOSE_TIMEOUT_S", LONG_CLOSE_S)


@pytest.mark.usefixtures("long_close")
@pytest.mark.parametrize("asynchronous", [False, True], ids=["sync", "async"])
def test_a_slow_handshake_and_a_silent_metadata_frame_share_one_connect_timeout(
    asynchronous: bool, observation: Observation
) -> None:
    """The handshake and the metadata frame that follows it are one connect: a server slow at
    the first leaves the second only what is left (each had the whole timeout)."""
    timeout_s = 2.0

    def answer(request: RawRequest, conn: socket.socket) -> None:
        time.sleep(HANDSHAKE_DELAY_S)
        conn.sendall(upgrade(request))
        server.closed.wait()  # then never the metadata frame

    async def infer_async(url: str) -> None:
        async with AsyncActionClient(url, timeout_s=timeout_s, retry=NO_RETRY) as client:
            await client.infer(observation)

    def infer(url: str) -> None:
        if asynchronous:
            asyncio.run(infer_async(url))
        else:
            with ActionClient(url, timeout_s=timeout_s, retry=NO_RETRY) as client:
                client.infer(observation)

    with RawHTTPServer(answer) as server:
        took = timed(lambda: infer(f"ws://127.0.0.1:{server.port}"), ConnectError)
    # with a timeout each it took 3.5 s, and up to CLOSE_TIMEOUT_S more for a polite close
    assert timeout_s - 0.1 < took < timeout_s + SLACK_S


def binary_frame(payload: bytes) -> bytes:
    """`payload` as one unmasked binary websocket frame, as a server sends it (RFC 6455, 5.2)."""
    if len(payload) < 126:
        return bytes([0x82, len(payload)]) + payload
    return bytes([0x82, 126]) + len(payload).to_bytes(2, "big") + payload


@pytest.mark.usefixtures("long_close")
@pytest.mark.parametrize("asynchronous", [False, True], ids=["sync", "async"])
@pytest.mark.parametrize("bound", ["deadline", "timeout"])
def test_a_server_silent_after_its_metadata_cannot_hold_the_close_past_the_bound(
    bound: str, asynchronous: bool, observation: Observation
) -> None:
    """A server that sends its metadata, takes the request and then reads nothing, not even
    the client's close frame: the call ends at its deadline (or timeout), without the polite
    close's wait for an answer that cannot come (it ended up to CLOSE_TIMEOUT_S later)."""
    metadata = {"object": "action.metadata", "output": {"action_horizon": 8, "action_dim": 5}}

    def answer(request: RawRequest, conn: socket.socket) -> None:
        conn.sendall(upgrade(request) + binary_frame(msgpack_numpy.packb(metadata)))
        server.closed.wait()  # never a reply, never the answering close frame

    options: dict[str, object] = {"retry": NO_RETRY, "check_contract": False}
    if bound == "deadline":
        options.update(timeout_s=10.0, deadline_s=DEADLINE_S)
    else:
        options.update(timeout_s=DEADLINE_S)
    gives_up = DeadlineExceededError if bound == "deadline" else RequestTimeoutError

    async def infer_async(url: str) -> None:
        async with AsyncActionClient(url, **options) as client:
            await client.metadata()  # the connection is open before the clock starts
            await asyncio.wait_for(client.infer(observation), 10 * DEADLINE_S)

    def infer(url: str) -> float:
        if asynchronous:
            return timed(lambda: asyncio.run(infer_async(url)), gives_up)
        with ActionClient(url, **options) as client:
            client.metadata()
            return timed(lambda: client.infer(observation), gives_up)

    with RawHTTPServer(answer) as server:
        took = infer(f"ws://127.0.0.1:{server.port}")
    assert took < DEADLINE_S + SLACK_S


@pytest.mark.parametrize("asynchronous", [False, True], ids=["sync", "async"])
@pytest.mark.parametrize("endpoint", ["realtime", "openpi", "http"])
def test_a_silent_server_is_a_deadline_error_at_the_deadline(
    endpoint: str, asynchronous: bool, observation: Observation
) -> None:
    """A server that accepts and never answers, with a deadline shorter than the timeout: the
    deadline ends the call, and says so (a websocket's handshake was a ConnectError, HTTP's
    metadata read a RequestTimeoutError naming the 10 s timeout)."""
    with socket.create_server(("127.0.0.1", 0)) as silent:
        port = silent.getsockname()[1]
        scheme = "http" if endpoint == "http" else "ws"
        options: dict[str, object] = {
            "timeout_s": 10.0,
            "deadline_s": DEADLINE_S,
            "retry": NO_RETRY,
        }
        if endpoint == "openpi":
            options["endpoint"] = "openpi"

        async def infer_async() -> None:
            async with AsyncActionClient(f"{scheme}://127.0.0.1:{port}", **options) as client:
                await client.infer(observation)

        def infer() -> None:
            if asynchronous:
                asyncio.run(infer_async())
            else:
                with ActionClient(f"{scheme}://127.0.0.1:{port}", **options) as client:
                    client.infer(observation)

        with pytest.raises(DeadlineExceededError, match="no metadata from the server within"):
            infer()


@pytest.fixture
def oversized_frames() -> Iterator[str]:
    """A websocket server announcing 8 x 5 chunks and answering with a 2 MiB frame."""

    def handle(conn: ServerConnection) -> None:
        metadata = {"object": "action.metadata", "output": {"action_horizon": 8, "action_dim": 5}}
        conn.send(msgpack_numpy.packb(metadata))
        for _ in conn:
            conn.send(b"\x00" * (2 << 20))

    with serve(handle, "127.0.0.1", 0, compression=None, max_size=None) as server:
        threading.Thread(target=server.serve_forever, daemon=True).start()
        yield f"ws://127.0.0.1:{server.socket.getsockname()[1]}"
        server.shutdown()


def test_a_websocket_frame_over_the_cap_is_a_typed_error(
    oversized_frames: str, observation: Observation
) -> None:
    with ActionClient(oversized_frames, retry=NO_RETRY) as client:
        with pytest.raises(ReplyTooLargeError) as caught:
            client.infer(observation)
        assert caught.value.limit == REPLY_SIZE_FLOOR
        assert client.transport.stats.drops == 1  # type: ignore[attr-defined]


def test_the_websocket_cap_is_the_option_when_given(
    oversized_frames: str, observation: Observation
) -> None:
    with (
        ActionClient(oversized_frames, retry=NO_RETRY, max_reply_bytes=4 << 20) as client,
        pytest.raises(ProtocolError, match="cannot read the server's reply"),
    ):
        client.infer(observation)  # 2 MiB read whole, then refused as the garbage it is
    transport = WebSocketTransport(oversized_frames, max_reply_bytes=1000)
    try:
        with pytest.raises(ReplyTooLargeError, match="limit of 1000 bytes"):
            transport.exchange(b"\x80", "application/msgpack", "application/msgpack")
    finally:
        transport.close()
