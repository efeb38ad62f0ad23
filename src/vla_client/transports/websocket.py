"""Websocket transports: one persistent connection, one binary msgpack frame each way.

Two endpoints use this framing: ``/v1/actions/realtime`` takes the HTTP request body and answers
with the envelope, and openpi's ``/openpi/policy`` takes the flat observation and answers with
the raw dict. Either way the server's first frame is its metadata, then every request gets
exactly one reply, in order. An error arrives as an ``{"error": ...}`` map or a text frame, after
which the server closes the connection; the close code carries the status (see
`vla_client.protocol.status`), which this transport puts on the `Reply` of a text frame.

No frame is read past `max_reply_bytes` (`ReplyTooLargeError`, and the connection is closed);
by default the cap is sized from the metadata frame. An `exchange` given `timeout_s` ends
within it, connecting included, while the transport's own `timeout_s` bounds each frame.

Two rules keep a late reply from ever being taken for a newer request's: a connection whose reply
timed out (or whose call was cancelled) is closed rather than read on, and a reply with the wrong
request id is skipped by the client. Where replies carry no id (openpi's, vLLM-Omni's and
RoboArena's, `replies_without_ids`), only the order tells them apart, so the order is kept
provable: one request in flight, and a frame the client did not ask for (one already waiting
when the next request is about to leave: an error frame per retry, a reply sent twice, a config
pushed mid-connection) drops the connection, which is opened again and its metadata frame read
again. The session drops it too after an error or a reply it cannot read (`discard`). Each drop
the client makes, and each connection found closed by the server, is told to `on_drop` with
its reason (`DropReason`); the client counts them. A connection the server closed normally
(code 1000: vLLM-Omni closes one idle for 30 s) before answering is opened again and the
request sent once more on it, as the server never read it.

After a drop the next call reconnects at once; after a failed connect, calls fail fast
with `ConnectError` until the backoff delay has passed, so a control loop that keeps calling is
never held up waiting on a server that is down.

The metadata frame may also be a text frame: an error the server sends in place of its
metadata (vLLM-Omni with no policy loaded: ``{"type": "error", "error": ..., "code": ...}``
as JSON), raised as the `ServerErrorFrame` it is, with its code.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
from abc import abstractmethod
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from functools import partial
from typing import Any, Generic, Literal, TypeVar

from websockets.asyncio.client import ClientConnection as AsyncConnection
from websockets.asyncio.client import connect as async_connect
from websockets.exceptions import ConnectionClosed, InvalidHandshake, InvalidStatus, InvalidURI
from websockets.frames import CloseCode
from websockets.protocol import State
from websockets.sync import client as sync_client
from websockets.sync.client import ClientConnection, connect

from vla_client.codecs import msgpack_numpy
from vla_client.errors import (
    CodecError,
    ConnectError,
    ProtocolError,
    ReplyTooLargeError,
    RequestTimeoutError,
    ServerError,
    ServerErrorFrame,
    VLAClientError,
)
from vla_client.protocol import (
    REPLY_SIZE_FLOOR,
    Endpoint,
    Reply,
    auth_headers,
    read_reply,
    reply_size_limit,
    status_from_close,
    websocket_url,
)
from vla_client.protocol.status import redirect_detail
from vla_client.transports.drive import Steps, adrive, drive
from vla_client.transports.http import LONGER_TIMEOUT, unreachable
from vla_client.transports.retry import Backoff
from vla_client.validation import check_positive

CLOSE_TIMEOUT_S = 1.0
_READ_ROUNDS = 8
"""Event loop rounds an asyncio connection is given to read frames already on the socket (a
frame in the socket's buffer is read and handed over in three; each round is microseconds)."""
DropReason = Literal["unasked frame", "error frame", "unreadable reply", "timeout", "cancelled",
                     "closed by the server"]  # fmt: skip
"""Why a connection was dropped (or found closed) and opened again: a frame that arrived
unasked, an error frame or a reply the client could not read on a connection whose replies
carry no id (the surplus may still come), a reply that did not come in time or a call
cancelled while waiting (it may come later), or a close by the server (one idle too long)."""


def _not_counted(reason: DropReason) -> None:
    """`on_drop` of a transport that no client counts for."""


# Redirects: the `websockets` library follows them itself (asyncio since 14, sync since 17.1),
# and across origins drops only Authorization, Cookie and Proxy-Authorization: a key in any
# other header would go wherever the server points. As over HTTP, none is followed; the 3xx
# is reported (`_Link.connect_failed`).


class _AsyncOpener(async_connect):
    """`websockets.asyncio.client.connect`, following no redirect."""

    def process_redirect(self, exc: Exception) -> Exception | str:
        return exc


def _open_sync(url: str, **options: Any) -> ClientConnection:
    """`websockets.sync.client.connect(url, **options)`, following no redirect."""
    conn: ClientConnection
    if not hasattr(sync_client, "reconnect"):  # websockets < 17.1: its sync client follows none
        conn = connect(url, **options)
        return conn

    class Opener(sync_client.reconnect):  # type: ignore[misc,name-defined,unused-ignore]
        def process_redirect(self, exc: Exception) -> Exception | str:
            return exc

    conn = Opener(url, **options).connect()
    return conn


ConnectionT = TypeVar("ConnectionT", ClientConnection, AsyncConnection)
LockT = TypeVar("LockT", threading.Lock, asyncio.Lock)
_CONNECT_ERRORS = (
    OSError, TimeoutError, asyncio.TimeoutError, InvalidHandshake, InvalidURI, ConnectionClosed,
    CodecError,
)  # fmt: skip


@dataclass
class WebSocketStats:
    """Connection counters: opened connections, failed connects, connections lost or dropped."""

    connects: int = 0
    connect_failures: int = 0
    drops: int = 0


class ReconnectGate:
    """Fail fast between reconnect attempts: after `n` failed connects, ``backoff.delay(n)``."""

    def __init__(self, backoff: Backoff, clock: Callable[[], float] = time.monotonic) -> None:
        self.backoff = backoff
        self._clock = clock
        self.failures = 0
        self.last_failure = ""
        self._retry_at = 0.0

    def check(self, url: str) -> None:
        """Raise `ConnectError` while the backoff delay since the last failure is running."""
        wait = self._retry_at - self._clock()
        if self.failures and wait > 0:
            raise ConnectError(
                f"{self.last_failure} ({self.failures} failed connects); next try in {wait:.2f} s",
                sent=False,
                retry_after=wait,
            )

    def failed(self, reason: str) -> None:
        self.failures += 1
        self.last_failure = reason
        self._retry_at = self._clock() + self.backoff.delay(self.failures)

    def succeeded(self) -> None:
        self.failures = 0


class _Link(Generic[ConnectionT, LockT]):
    """What the sync and async transports share: URL, headers, backoff, counters, error mapping.

    `timeout_s` is the default wait for a reply and `connect_timeout_s` (default `timeout_s`) for
    the handshake and metadata frame; `api_key` becomes the endpoint's Authorization header,
    added to `headers`; `backoff` paces reconnects after a failed connect. `max_reply_bytes`
    caps every frame (None: sized from each connection's metadata frame, see
    `vla_client.protocol.reply_size_limit`).
    """

    def __init__(
        self,
        url: str,
        *,
        endpoint: Endpoint | None = None,
        timeout_s: float = 10.0,
        connect_timeout_s: float | None = None,
        api_key: str | None = None,
        headers: dict[str, str] | None = None,
        max_reply_bytes: int | None = None,
        backoff: Backoff | None = None,
    ) -> None:
        check_positive("timeout_s", timeout_s)
        check_positive("connect_timeout_s", connect_timeout_s, allow_none=True)
        check_positive("max_reply_bytes", max_reply_bytes, integer=True, allow_none=True)
        self.url, self.endpoint = websocket_url(url, endpoint)
        self.timeout_s = timeout_s
        self.connect_timeout_s = timeout_s if connect_timeout_s is None else connect_timeout_s
        self.headers = {**auth_headers(api_key, self.endpoint), **(headers or {})}
        self.max_reply_bytes = max_reply_bytes
        self.gate = ReconnectGate(backoff or Backoff())
        self.stats = WebSocketStats()
        self.server_metadata: Any = None
        self.text_answers: frozenset[str] = frozenset()
        """Text frames that answer a request (RoboArena's ``reset successful``): returned as
        a reply, the connection kept. Any other text frame is the server's error."""
        self.replies_without_ids = False
        """Set by a client whose replies carry no request id (openpi's, vLLM-Omni's,
        RoboArena's): a frame waiting unasked before a request leaves drops the connection."""
        self.on_drop: Callable[[DropReason], None] = _not_counted
        """Told each time a connection is dropped or found closed, with why (the client's
        counter, ``stats.dropped_connections``)."""
        self._handshake: str | bytes | None = None
        """The current connection's metadata frame as it came."""
        self._discarded: DropReason | None = None
        """Why the current connection is to carry no other request (`discard`)."""
        self._conn: ConnectionT | None = None
        self._lock: LockT = self._new_lock()

    @staticmethod
    @abstractmethod
    def _new_lock() -> LockT:
        """The lock that serves calls one at a time."""

    def discard(self, reason: DropReason) -> None:
        """Send no other request on the current connection: the next call drops it (told to
        `on_drop` with `reason`) and opens a new one. For a client that could not read a reply
        on a connection whose replies carry no id, as what else the server sends for that
        request would be taken for the next one's reply."""
        if self._conn is not None:
            self._discarded = reason

    def connect_wait(self, timeout_s: float | None) -> float:
        """The wait for a connection: the connect timeout, or `timeout_s` when shorter."""
        if timeout_s is None:
            return self.connect_timeout_s
        return min(self.connect_timeout_s, timeout_s)

    def connect_options(self, timeout_s: float | None) -> dict[str, Any]:
        return {
            "additional_headers": self.headers,
            "compression": None,
            "max_size": self.max_reply_bytes or REPLY_SIZE_FLOOR,
            "open_timeout": self.connect_wait(timeout_s),
            "close_timeout": CLOSE_TIMEOUT_S,
        }

    def opened(self, conn: ConnectionT, handshake: str | bytes) -> None:
        """Read the metadata frame the server sends first, and size `conn`'s frame cap to it
        (unless `max_reply_bytes` was given). A text frame there is the server's error
        (`ServerErrorFrame` when it is an error frame, else `ConnectError`)."""
        if isinstance(handshake, str):
            raise _text_handshake(self.url, handshake)
        self.server_metadata = msgpack_numpy.unpackb(handshake)
        self._handshake = handshake
        if self.max_reply_bytes is None:
            conn.protocol.max_message_size = reply_size_limit(self.server_metadata)
        self.gate.succeeded()
        self.stats.connects += 1

    def connect_failed(self, exc: Exception) -> VLAClientError:
        """The error for a connection that did not open; nothing was sent on it."""
        error: VLAClientError
        if isinstance(exc, InvalidStatus) and 300 <= exc.response.status_code < 400:
            status = exc.response.status_code
            error = ServerError(
                status, redirect_detail(status, exc.response.headers.get("Location"))
            )
        elif isinstance(exc, InvalidStatus):
            response = exc.response
            error = self._handshake_refused(
                response.status_code,
                bytes(response.body or b""),
                response.headers.get("content-type", ""),
            )
        elif isinstance(exc, ConnectError | ServerError):
            error = exc
        else:
            error = ConnectError(unreachable(self.url, exc), sent=False)
        self.gate.failed(str(error))
        self.stats.connect_failures += 1
        return error

    def _handshake_refused(self, status: int, body: bytes, content_type: str) -> ServerError:
        """The `ServerError` for a refused handshake, its JSON ``detail`` read as an HTTP
        error's is (a sentence, not the raw document)."""
        if body.strip():
            try:
                read_reply(Reply(status, content_type, body))
            except ServerError as error:
                return error
            except VLAClientError:
                pass
        text = body.decode("utf-8", "replace").strip()
        return ServerError(status, text or f"handshake refused on {self.url}")

    def lost(self, exc: ConnectionClosed) -> ConnectError | ReplyTooLargeError:
        """The error for a connection that closed: a frame over the cap, or a drop."""
        self.stats.drops += 1
        if exc.sent is not None and exc.sent.code == CloseCode.MESSAGE_TOO_BIG:
            return ReplyTooLargeError(self.frame_limit, f"a frame from {self.url}")
        return ConnectError(f"connection to {self.url} lost: {exc}")

    @property
    def frame_limit(self) -> int:
        """The cap on the current connection's frames, in bytes."""
        conn = self._conn
        if conn is not None and conn.protocol.max_message_size is not None:
            return conn.protocol.max_message_size
        return self.max_reply_bytes or REPLY_SIZE_FLOOR

    def timed_out(self, timeout_s: float) -> RequestTimeoutError:
        self.stats.drops += 1
        self.on_drop("timeout")
        return RequestTimeoutError(
            f"no reply from {self.url} within {timeout_s:.3g} s; {LONGER_TIMEOUT}"
        )

    def wait(self, end: float | None) -> float:
        """The wait for one frame: the transport's timeout, cut to what is left before `end`
        (a `time.monotonic()` time) when there is one."""
        return self.timeout_s if end is None else min(self.timeout_s, _left(end))

    # What each transport does its own way: open a connection (following no redirect), and
    # read its next frame within `wait_s` seconds (`TimeoutError` when none came), blocking
    # or as an awaitable. Everything else is the steps below, run with `drive` or `adrive`.

    @staticmethod
    @abstractmethod
    def _open(url: str, options: dict[str, Any]) -> Any: ...

    @staticmethod
    @abstractmethod
    def _next_frame(conn: Any, wait_s: float) -> Any: ...

    @staticmethod
    @abstractmethod
    def _waiting_frame(conn: Any) -> Any:
        """The frame already received on `conn` and not yet read, None when there is none
        (`ConnectionClosed` when the connection has closed)."""

    def _metadata(self, timeout_s: float | None) -> Steps[Any]:
        yield from self._connected(timeout_s)
        return self.server_metadata

    def _exchange(self, body: bytes, timeout_s: float | None) -> Steps[Reply]:
        """Send `body` and read its reply. On a connection whose replies carry no id, a frame
        found waiting just before sending replaces the connection; if the new one announces
        other metadata than the request was built for, it is not sent (`ProtocolError`). A
        connection the server closes normally before answering (one it found idle) is opened
        again and `body` sent once more."""
        end = ends_at(timeout_s)
        try:
            return (yield from self._sent(body, end, first=True))
        except ConnectionClosed:  # closed normally in place of the reply: never read
            self.stats.drops += 1
            self.on_drop("closed by the server")
        return (yield from self._sent(body, end, first=False))

    def _sent(self, body: bytes, end: float | None, *, first: bool) -> Steps[Reply]:
        """`body` sent on the connection (opened if needed), and its reply. On the `first`
        try, a normal close in place of the reply is raised as it came (`ConnectionClosed`),
        the connection dropped, for `body` to be sent once more."""
        before = self._handshake
        conn = yield from self._connected(None if end is None else _left(end))
        if self.replies_without_ids and before is not None and self._handshake != before:
            raise ProtocolError(
                f"{self.url} announced new metadata before the request left; not sent"
            )
        try:
            yield partial(conn.send, body)
            return (yield from self._reply(conn, end, closed_unanswered=first))
        except ConnectionClosed as exc:
            yield from self._drop()
            if first and _closed_normally(exc):
                raise
            raise self.lost(exc) from exc

    def _receive(self, timeout_s: float | None) -> Steps[Reply]:
        if self._conn is None:
            raise ConnectError(f"connection to {self.url} is closed; its replies are lost")
        return (yield from self._reply(self._conn, ends_at(timeout_s)))

    def _connected(self, timeout_s: float | None) -> Steps[ConnectionT]:
        """The open connection, or a new one whose metadata frame has been read: the handshake
        and that frame together within the connect wait (one slow step leaves the other only
        what is left, so a server slow at both cannot make it twice as long). Where replies
        carry no id, an open connection with a frame waiting unasked is replaced."""
        if self._conn is not None:
            reason = yield from self._unusable(self._conn)
            if reason is None:
                return self._conn
            self.stats.drops += 1
            self.on_drop(reason)
        yield from self._drop()
        self.gate.check(self.url)
        end = time.monotonic() + self.connect_wait(timeout_s)
        try:
            options = self.connect_options(_left(end))
            conn: ConnectionT = yield partial(self._open, self.url, options)
        except _CONNECT_ERRORS as exc:
            raise self.connect_failed(exc) from exc
        try:
            self.opened(conn, (yield partial(self._next_frame, conn, _left(end))))
        except (*_CONNECT_ERRORS, ConnectError, ServerError) as exc:
            yield from _close(conn, min(CLOSE_TIMEOUT_S, _left(end)))
            raise self.connect_failed(exc) from exc
        self._conn = conn
        return conn

    def _unusable(self, conn: ConnectionT) -> Steps[DropReason | None]:
        """Why `conn` cannot carry the next request (closed by the server, or, where replies
        carry no id, a frame waiting that no request asked for); None when it can."""
        if self._discarded is not None:
            return self._discarded
        if conn.state is not State.OPEN:
            return "closed by the server"
        if not self.replies_without_ids:
            return None
        try:
            frame = yield partial(self._waiting_frame, conn)
        except ConnectionClosed:
            return "closed by the server"
        return None if frame is None else "unasked frame"

    def _reply(
        self, conn: ConnectionT, end: float | None, *, closed_unanswered: bool = False
    ) -> Steps[Reply]:
        """The next reply frame on `conn` as a `Reply`; a text frame that answers no request
        is the server's error, the close that follows it read for its status. With
        `closed_unanswered`, a normal close in place of the reply is raised as it came
        (`ConnectionClosed`), for the request to be sent again. A call cancelled while
        waiting drops the connection: its reply may still come."""
        wait = self.wait(end)
        try:
            frame = yield partial(self._next_frame, conn, wait)
        except TimeoutError:
            yield from self._drop(close_wait_s=0.0)  # the call's time is up
            raise self.timed_out(wait) from None
        except ConnectionClosed as exc:
            if closed_unanswered and _closed_normally(exc):
                raise
            error = self.lost(exc)
            yield from self._drop()
            raise error from exc
        except GeneratorExit:
            raise
        except BaseException:  # cancelled: the reply may come later, to the next request
            self.stats.drops += 1
            self.on_drop("cancelled")
            yield from self._drop(close_wait_s=0.0)
            raise
        if isinstance(frame, bytes):
            return frame_reply(frame)
        if frame in self.text_answers:
            return Reply(200, "text/plain", frame.encode())
        closed = None
        close_wait = CLOSE_TIMEOUT_S if end is None else min(CLOSE_TIMEOUT_S, _left(end))
        try:
            yield partial(self._next_frame, conn, close_wait)
        except ConnectionClosed as exc:
            closed = exc
        except TimeoutError:
            pass
        if closed is None:  # the server sent on, or nothing: the client ends it
            self.stats.drops += 1
            self.on_drop("error frame")
        yield from self._drop(close_wait_s=0.0)  # closed by now, or given up on
        return frame_reply(frame, closed)

    def _drop(self, close_wait_s: float = CLOSE_TIMEOUT_S) -> Steps[None]:
        """Forget the connection and close it (see `_close`)."""
        conn, self._conn = self._conn, None
        self._discarded = None
        if conn is not None:
            yield from _close(conn, close_wait_s)


def _closed_normally(exc: ConnectionClosed) -> bool:
    """Whether the server closed the connection with code 1000 (a normal close, as vLLM-Omni
    closes one idle too long)."""
    return exc.rcvd is not None and exc.rcvd.code == CloseCode.NORMAL_CLOSURE


def _text_handshake(url: str, text: str) -> VLAClientError:
    """The error for a text frame sent in place of the metadata: a JSON error frame
    (``{"type": "error", "error" or "message": ..., "code": ...}``) as `ServerErrorFrame`
    with its code, any other text as `ConnectError` quoting it."""
    try:
        document = json.loads(text)
    except ValueError:
        document = None
    if isinstance(document, dict) and document.get("type") == "error":
        detail = document.get("error", document.get("message", "an error frame without a message"))
        code = document.get("code")
        return ServerErrorFrame(500, str(detail), code=None if code is None else str(code))
    return ConnectError(f"{url} sent text, not its metadata: {text[:200]}")


def _close(conn: ClientConnection | AsyncConnection, wait_s: float) -> Steps[None]:
    """Close `conn` politely, waiting at most `wait_s` for the server's answering close frame;
    its socket is closed then either way. After a call has used its time the wait is 0: a
    server silent enough to time a call out would hold the close for the whole wait."""
    conn.close_timeout = wait_s
    yield conn.close


def _left(end: float) -> float:
    """Seconds left before `end` (a `time.monotonic()` time), 0 once it has passed."""
    return max(0.0, end - time.monotonic())


def ends_at(timeout_s: float | None) -> float | None:
    """When an exchange given `timeout_s` must end, as `time.monotonic()` (None: no bound)."""
    return None if timeout_s is None else time.monotonic() + timeout_s


def frame_reply(frame: str | bytes, closed: ConnectionClosed | None = None) -> Reply:
    """A reply frame as a `Reply`.

    A text frame is the server's error message; its status comes from the close that follows
    it (`closed`), 500 when there is none.
    """
    if isinstance(frame, bytes):
        return Reply(status=200, content_type=msgpack_numpy.CONTENT_TYPE, content=frame)
    close = closed.rcvd if closed is not None else None
    status = status_from_close(close.code if close else None, close.reason if close else None)
    headers = {} if status.retry_after is None else {"retry-after": f"{status.retry_after:g}"}
    return Reply(status.status, "text/plain", frame.encode(), headers)


class WebSocketTransport(_Link[ClientConnection, threading.Lock]):
    """Blocking websocket transport. Calls from several threads are served one at a time."""

    @staticmethod
    def _new_lock() -> threading.Lock:
        return threading.Lock()

    @staticmethod
    def _open(url: str, options: dict[str, Any]) -> ClientConnection:
        conn = _open_sync(url, **options)
        conn.__enter__()  # as `with connect()` would; websockets >= 17.1 warns otherwise
        return conn

    @staticmethod
    def _next_frame(conn: ClientConnection, wait_s: float) -> str | bytes:
        return conn.recv(timeout=wait_s)

    @staticmethod
    def _waiting_frame(conn: ClientConnection) -> str | bytes | None:
        try:
            return conn.recv(timeout=0)  # only a frame received already
        except TimeoutError:
            return None

    def metadata(self, *, timeout_s: float | None = None) -> Any:
        """The metadata frame the server sent on the current connection (connecting if needed,
        within `timeout_s` when that is shorter than the connect timeout)."""
        with self._lock:
            return drive(self._metadata(timeout_s))

    def exchange(
        self, body: bytes, content_type: str, accept: str, *, timeout_s: float | None = None
    ) -> Reply:
        """Send one frame and return the next reply, all within `timeout_s` when given (the
        transport's own timeout still bounds the wait for the frame)."""
        with self._lock:
            return drive(self._exchange(body, timeout_s))

    def receive(self, *, timeout_s: float | None = None) -> Reply:
        """The next reply frame on the current connection (after a reply that was skipped),
        within `timeout_s` when given and the transport's timeout."""
        with self._lock:
            return drive(self._receive(timeout_s))

    def reset(self) -> None:
        """Forget the connection (the server ends it after an error); the next call reconnects."""
        with self._lock:
            drive(self._drop())

    def close(self) -> None:
        with self._lock:
            drive(self._drop())


class AsyncWebSocketTransport(_Link[AsyncConnection, asyncio.Lock]):
    """asyncio websocket transport; concurrent calls are served one at a time."""

    @staticmethod
    def _new_lock() -> asyncio.Lock:
        return asyncio.Lock()

    @staticmethod
    def _open(url: str, options: dict[str, Any]) -> Awaitable[AsyncConnection]:
        return _AsyncOpener(url, **options)

    @staticmethod
    async def _next_frame(conn: AsyncConnection, wait_s: float) -> str | bytes:
        try:
            return await asyncio.wait_for(conn.recv(), wait_s)
        except asyncio.TimeoutError:  # not the builtin TimeoutError before Python 3.11
            raise TimeoutError from None

    @staticmethod
    async def _waiting_frame(conn: AsyncConnection) -> str | bytes | None:
        """A frame already on its way in: the loop is let run a few rounds (to read what the
        socket holds), then the read is cancelled, which loses nothing."""
        receiving = asyncio.ensure_future(conn.recv())
        for _ in range(_READ_ROUNDS):
            if receiving.done():
                break
            await asyncio.sleep(0)
        if not receiving.done():
            receiving.cancel()
            await asyncio.wait({receiving})
        return None if receiving.cancelled() else receiving.result()

    async def metadata(self, *, timeout_s: float | None = None) -> Any:
        async with self._lock:
            return await adrive(self._metadata(timeout_s))

    async def exchange(
        self, body: bytes, content_type: str, accept: str, *, timeout_s: float | None = None
    ) -> Reply:
        async with self._lock:
            return await adrive(self._exchange(body, timeout_s))

    async def receive(self, *, timeout_s: float | None = None) -> Reply:
        async with self._lock:
            return await adrive(self._receive(timeout_s))

    async def reset(self) -> None:
        async with self._lock:
            await adrive(self._drop())

    async def close(self) -> None:
        async with self._lock:
            await adrive(self._drop())
