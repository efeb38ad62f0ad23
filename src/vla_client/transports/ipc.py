"""``ipc://PATH`` transports: the action API over a Unix socket, frames in shared memory.

For a robot and its policy server on one host (``vla-client serve --ipc PATH``). Each request's
frames (colour and depth, `SharedFrames`) are written once into a shared-memory segment of the
client's own (`FramePool`), which the server's policy worker reads in place; the socket carries
the request without its frames, the segment's name and the frames' places, and the reply
(`vla_client.protocol.ipc`). The client's session is the action API's, as over HTTP
(`vla_client.client.action_api`): its options, retries, deadlines and reply reading all apply,
and the reply is read by `vla_client.protocol.read_reply` as an HTTP one.

One connection serves one exchange at a time (calls from several threads or tasks take turns).
A connection whose exchange failed (timed out, cancelled, cut) is closed, and its segment
unlinked rather than reused, so a late reply or a late write by the worker never reaches the
next request; the next exchange connects afresh. `timeout_s` bounds each exchange (connecting
included), and a request's deadline, when shorter, bounds it instead.

The blocking and asyncio transports are one set of steps (`vla_client.transports.drive`), run
with blocking socket calls or the event loop's.
"""

from __future__ import annotations

import asyncio
import select
import socket
import threading
import time
from abc import abstractmethod
from functools import partial
from typing import Any

import msgspec

from vla_client.errors import ConnectError, ProtocolError, ReplyTooLargeError, RequestTimeoutError
from vla_client.protocol import REPLY_SIZE_FLOOR, Reply, read_reply, reply_size_limit
from vla_client.protocol.ipc import (
    GREETING,
    LENGTH_BYTES,
    VERSION,
    Infer,
    Metadata,
    SharedFrames,
    decode_answer,
    decode_hello,
    framed,
    ipc_path,
)
from vla_client.segments import Segment
from vla_client.transports.drive import Steps, adrive, drive
from vla_client.transports.ipc_memory import FramePool
from vla_client.validation import check_positive


class _IpcLink:
    """What the two transports share: the path, the limits, the connection and the steps."""

    def __init__(
        self,
        url: str,
        *,
        timeout_s: float = 10.0,
        api_key: str | None = None,
        max_reply_bytes: int | None = None,
    ) -> None:
        check_positive("timeout_s", timeout_s)
        check_positive("max_reply_bytes", max_reply_bytes, integer=True, allow_none=True)
        self.url = url
        self.path = ipc_path(url)
        self.timeout_s = timeout_s
        self.api_key = api_key
        self.max_reply_bytes = max_reply_bytes
        self._announced_reply_bytes = REPLY_SIZE_FLOOR
        self._socket: socket.socket | None = None
        self._lock = self._new_lock()
        self.frames = FramePool()
        """The segments its requests' frames are written into."""

    @staticmethod
    @abstractmethod
    def _new_lock() -> Any:
        """The lock that serves calls one at a time."""

    @property
    def reply_limit(self) -> int:
        """The largest reply read: `max_reply_bytes`, else sized from the metadata."""
        return self.max_reply_bytes or self._announced_reply_bytes

    # The I/O each driver does: plain calls here, coroutines in `AsyncIpcTransport`.
    def _connect(self, sock: socket.socket, timeout_s: float) -> Any:
        sock.settimeout(timeout_s)
        return sock.connect(self.path)

    def _sendall(self, sock: socket.socket, data: bytes, timeout_s: float) -> Any:
        sock.settimeout(timeout_s)
        return sock.sendall(data)

    def _recv_into(self, sock: socket.socket, view: memoryview, timeout_s: float) -> Any:
        sock.settimeout(timeout_s)
        return sock.recv_into(view)

    def _left(self, end: float) -> float:
        left = end - time.monotonic()
        if left <= 0:
            raise TimeoutError
        return left

    def _connected(self, end: float) -> Steps[socket.socket]:
        """The open connection, or a new one once the server has said who it is."""
        sock = self._socket
        if sock is not None and not _closed_by_peer(sock):
            return sock
        self._close()
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            yield partial(self._connect, sock, self._left(end))
        except (FileNotFoundError, ConnectionRefusedError, NotADirectoryError) as exc:
            sock.close()
            raise ConnectError(
                f"{self.url}: no vla-client server listens at {self.path} "
                f"({exc.strerror or type(exc).__name__}); start one with "
                f"vla-client serve --ipc {self.path}",
                sent=False,
            ) from None
        except OSError as exc:
            sock.close()
            if isinstance(exc, TimeoutError | asyncio.TimeoutError):
                raise
            raise ConnectError(
                f"{self.url}: cannot connect to {self.path} ({exc.strerror or exc})", sent=False
            ) from None
        self._socket = sock
        yield from self._greeted(sock, end)
        return sock

    def _greeted(self, sock: socket.socket, end: float) -> Steps[None]:
        """Read the server's greeting on a new connection; `ProtocolError` (the connection
        closed) for a peer that is no vla-client server, or one of another protocol version."""
        try:
            hello = decode_hello((yield from self._read_record(sock, end, 4096)))
        except (ProtocolError, msgspec.ValidationError, msgspec.DecodeError, ConnectError):
            self._close()
            raise ProtocolError(
                f"{self.url}: {self.path} is not a vla-client server (it did not greet as one)"
            ) from None
        if hello.greeting != GREETING or hello.version != VERSION:
            self._close()
            raise ProtocolError(
                f"{self.url}: {self.path} speaks {hello.greeting!r} version {hello.version}, "
                f"not {GREETING!r} version {VERSION}"
            )

    def _read_record(self, sock: socket.socket, end: float, limit: int) -> Steps[bytes]:
        """One length-prefixed record, refused past `limit` bytes."""
        head = yield from self._read_exactly(sock, LENGTH_BYTES, end)
        size = int.from_bytes(head, "big")
        if size > limit:
            raise ReplyTooLargeError(limit, f"the reply from {self.url}")
        return (yield from self._read_exactly(sock, size, end))

    def _read_exactly(self, sock: socket.socket, size: int, end: float) -> Steps[bytes]:
        data = bytearray(size)
        view = memoryview(data)
        got = 0
        while got < size:
            count = yield partial(self._recv_into, sock, view[got:], self._left(end))
            if not count:
                raise ConnectError(f"{self.url}: the server closed the connection; no reply")
            got += count
        return bytes(data)

    def _round(self, record: Metadata | Infer, end: float) -> Steps[Reply]:
        """Send `record` on the connection, read its answer as a `Reply`."""
        sock = yield from self._connected(end)
        try:
            yield partial(self._sendall, sock, framed(record), self._left(end))
            packed = yield from self._read_record(sock, end, self.reply_limit)
        except (TimeoutError, asyncio.TimeoutError):  # distinct before Python 3.11
            raise
        except OSError as exc:  # reset, broken pipe: the server went away mid-exchange
            raise ConnectError(
                f"{self.url}: the server dropped the connection ({exc.strerror or exc}); no reply"
            ) from None
        try:
            answer = decode_answer(packed)
        except (msgspec.DecodeError, msgspec.ValidationError) as exc:
            raise ProtocolError(f"{self.url}: cannot read the server's answer: {exc}") from None
        return Reply(answer.status, answer.content_type, answer.body, answer.headers)

    def _steps(
        self, record: Metadata | Infer, frames: SharedFrames | None, timeout_s: float | None,
    ) -> Steps[Reply]:  # fmt: skip
        """One exchange within `timeout_s` (and the transport's own): `record`, or an `Infer`
        of `frames` (written into a segment first); on failure the connection is closed."""
        wait_s = self.timeout_s if timeout_s is None else min(self.timeout_s, timeout_s)
        end = time.monotonic() + wait_s
        segment: Segment | None = None
        reply: Reply | None = None
        try:
            if isinstance(record, Infer):
                assert frames is not None
                segment, layouts, depth = self.frames.write(frames)
                record = Infer(record.body, segment.name, layouts, self.api_key, depth)
            reply = yield from self._round(record, end)
            return reply
        except (TimeoutError, asyncio.TimeoutError):  # distinct before Python 3.11
            self._close()
            raise RequestTimeoutError(f"no reply from {self.url} within {wait_s:.3g} s") from None
        except BaseException:
            self._close()  # its reply may still come: the connection is not used again
            raise
        finally:
            if segment is not None:
                self.frames.give_back(segment, reuse=reply is not None and reply.status == 200)

    def _metadata_steps(self, timeout_s: float | None) -> Steps[Any]:
        reply = yield from self._steps(Metadata(self.api_key), None, timeout_s)
        document = read_reply(reply)
        self._announced_reply_bytes = reply_size_limit(document)
        return document

    def _exchange_steps(
        self, body: bytes, frames: SharedFrames | None, timeout_s: float | None
    ) -> Steps[Reply]:
        if frames is None:
            raise ValueError("an ipc:// request carries its frames apart from its body")
        return (yield from self._steps(Infer(body, "", ()), frames, timeout_s))

    def _close(self) -> None:
        sock, self._socket = self._socket, None
        if sock is not None:
            sock.close()


def _closed_by_peer(sock: socket.socket) -> bool:
    """Whether the server has closed the connection (between exchanges, nothing else is ever
    waiting to be read): then the next exchange connects afresh rather than fail."""
    readable, _, _ = select.select([sock], [], [], 0)
    return bool(readable)


class IpcTransport(_IpcLink):
    """Blocking ``ipc://`` transport. `timeout_s` bounds each exchange, `max_reply_bytes` each
    reply (default: sized from the server's metadata); `api_key` goes with every request.
    Calls from several threads are served one at a time."""

    _lock: threading.Lock

    @staticmethod
    def _new_lock() -> threading.Lock:
        return threading.Lock()

    def metadata(self, *, timeout_s: float | None = None) -> Any:
        """The server's metadata document; `ServerError` for an error answer."""
        with self._lock:
            return drive(self._metadata_steps(timeout_s))

    def exchange(
        self, body: bytes, content_type: str, accept: str, *, timeout_s: float | None = None,
        frames: SharedFrames | None = None,
    ) -> Reply:  # fmt: skip
        """Send the request `body` with its `frames` (in shared memory), return its reply."""
        with self._lock:
            return drive(self._exchange_steps(body, frames, timeout_s))

    def close(self) -> None:
        """Close the connection and unlink the idle segments."""
        with self._lock:
            self._close()
            self.frames.close()


class AsyncIpcTransport(_IpcLink):
    """asyncio ``ipc://`` transport, as `IpcTransport`; concurrent calls take turns."""

    _lock: asyncio.Lock

    @staticmethod
    def _new_lock() -> asyncio.Lock:
        return asyncio.Lock()

    async def _connect(self, sock: socket.socket, timeout_s: float) -> Any:
        sock.setblocking(False)
        loop = asyncio.get_running_loop()
        return await asyncio.wait_for(loop.sock_connect(sock, self.path), timeout_s)

    async def _sendall(self, sock: socket.socket, data: bytes, timeout_s: float) -> Any:
        loop = asyncio.get_running_loop()
        return await asyncio.wait_for(loop.sock_sendall(sock, data), timeout_s)

    async def _recv_into(self, sock: socket.socket, view: memoryview, timeout_s: float) -> Any:
        loop = asyncio.get_running_loop()
        return await asyncio.wait_for(loop.sock_recv_into(sock, view), timeout_s)

    async def metadata(self, *, timeout_s: float | None = None) -> Any:
        """The server's metadata document; `ServerError` for an error answer."""
        async with self._lock:
            return await adrive(self._metadata_steps(timeout_s))

    async def exchange(
        self, body: bytes, content_type: str, accept: str, *, timeout_s: float | None = None,
        frames: SharedFrames | None = None,
    ) -> Reply:  # fmt: skip
        """Send the request `body` with its `frames` (in shared memory), return its reply."""
        async with self._lock:
            return await adrive(self._exchange_steps(body, frames, timeout_s))

    async def close(self) -> None:
        """Close the connection and unlink the idle segments."""
        async with self._lock:
            self._close()
            self.frames.close()
