"""HTTP connections that must finish their headers in time, and a limit only requests count in.

uvicorn's h11 protocol bounds how long an idle keep-alive connection stays open, but only once
it has answered a first request: a peer that connects and sends nothing, or half a header and
then a byte a second (slowloris), holds its connection for as long as it likes. uvicorn's
``limit_concurrency`` counts such connections too, so a few hundred of them, from anyone who
can reach the port, turn every other client away with 503, whether the server has a key or not.

`HeaderDeadlineProtocol` is uvicorn's h11 protocol with three changes:

- a deadline on the request line and headers, armed when the connection opens (and, on a
  keep-alive connection, at the first byte of each later request); a connection whose headers
  are not complete by then is closed, without a reply (h11 cannot answer a request it has not
  read, and a peer this slow is not reading one);
- the connection limit counts only connections that have sent a complete request (and the
  requests in flight), so peers that never finish one cannot use up the room of those that do.
  Each of those costs one socket for at most the deadline;
- a body of declared length can be read straight into a buffer the app gives
  (`BODY_INTO`, `BodyInto`): each read from the socket is copied once, into that buffer.
  Through uvicorn and h11 a 2 MB body was copied five times over (h11's receive buffer, the
  event it extracts, uvicorn's body buffer, the bytes handed to the app, then the app's
  buffer), and the request's task woke for every 256 KiB read, with reading paused and resumed
  each time. h11 still parses every request line and header, checks the framing (a
  Content-Length and no Transfer-Encoding) and sees the body end; only the body's bytes skip it.
  This counts the bytes off h11's private body reader (`ContentLengthReader`'s ``_remaining``),
  so it is offered only where that reader is as read here (`H11_BODY_INTO`); an h11 that
  changed it reads bodies the ordinary way (tests/server/test_body_into.py checks both).

`uvicorn_options` (`vla_client.server.config`) selects it for every server this package runs.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable, Iterator, MutableSet
from typing import Any

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol, RequestResponseCycle

try:
    from h11._readers import ContentLengthReader
except ImportError:  # pragma: no cover - an h11 that moved its reader
    ContentLengthReader = None  # type: ignore[assignment,misc]


def _reader_counts_like_h11_0_14_to_0_16() -> bool:
    """Whether h11's body reader keeps ``_length`` and ``_remaining`` as `BodyInto` updates."""
    if ContentLengthReader is None:
        return False
    return {"_length", "_remaining"} <= set(vars(ContentLengthReader(1)))


H11_BODY_INTO = _reader_counts_like_h11_0_14_to_0_16()
"""True where bodies can go straight into the app's buffer (see the module's docstring)."""

BODY_INTO = "vla_client.body_into"
"""The ASGI extension of HTTP requests served by `HeaderDeadlineProtocol`:
``scope["extensions"][BODY_INTO]["start"]`` is the request's `BodyIntoStarter`."""


class BodyInto:
    """The rest of a request body, written by the protocol into `buffer` as it arrives.

    `filled` is how many bytes of `buffer` hold body so far. The app waits for the body's end
    as usual (its next ``receive()`` says ``more_body: False``, or the client hung up) and
    calls `close` on every path, after which the protocol never touches `buffer` again.
    """

    def __init__(self, protocol: HeaderDeadlineProtocol, buffer: memoryview) -> None:
        self._protocol: HeaderDeadlineProtocol | None = protocol
        self._buffer = buffer
        self.filled = 0

    @property
    def missing(self) -> int:
        """Body bytes still to come."""
        return len(self._buffer) - self.filled

    def take(self, data: bytes) -> int:
        """Copy the start of `data` that belongs to the body; returns how many bytes that is."""
        taken = min(len(data), self.missing)
        self._buffer[self.filled : self.filled + taken] = memoryview(data)[:taken]
        self.filled += taken
        return taken

    def close(self) -> None:
        """Stop writing into the buffer (and forget it)."""
        protocol, self._protocol = self._protocol, None
        if protocol is not None and protocol.body_into is self:
            protocol.body_into = None
        self._buffer = memoryview(b"")


BodyIntoStarter = Callable[[memoryview], "BodyInto | None"]
"""Called with a buffer exactly as long as the request's declared body: the `BodyInto` now
filling it (with what had arrived already), or None when the body cannot be read that way
(then read it with ``receive()`` as usual)."""


class HeaderDeadlineProtocol(H11Protocol):
    """uvicorn's h11 protocol, closing connections whose headers take over `header_timeout_s`."""

    def __init__(self, *args: Any, header_timeout_s: float, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.header_timeout_s = header_timeout_s
        self._requested = False
        self._header_deadline: asyncio.TimerHandle | None = None
        self.body_into: BodyInto | None = None
        """Where the current request's body goes, while its app reads it that way."""
        self._offered: RequestResponseCycle | None = None
        # uvicorn only adds to, removes from and measures this set: a view is enough.
        self.connections = _RequestingConnections(self.server_state.connections)  # type: ignore[assignment]

    @property
    def has_requested(self) -> bool:
        """True once this connection has sent a complete request line and headers (h11 leaves
        its idle state on reading them, before the limit is checked)."""
        return self._requested or self.conn.their_state is not h11.IDLE

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._arm_header_deadline()

    def data_received(self, data: bytes) -> None:
        body_into = self.body_into
        if body_into is not None:
            taken = body_into.take(data)
            reader = self.conn._reader
            assert isinstance(reader, ContentLengthReader)
            reader._remaining -= taken  # h11 counts the body as read, as if it had parsed it
            if body_into.missing:
                return
            self.body_into = None
            data = data[taken:]  # what follows the body: a pipelined request
            if not data:
                self.handle_events()  # h11 now sees the end of the body
                return
        if self.conn.their_state is h11.IDLE and self._header_deadline is None:
            self._arm_header_deadline()  # the first byte of a later request on a kept connection
        super().data_received(data)

    def handle_events(self) -> None:
        super().handle_events()
        if self.conn.their_state is not h11.IDLE:  # h11 has read a whole request line + headers
            self._requested = True
            self._disarm_header_deadline()
            cycle = self.cycle
            if (
                H11_BODY_INTO and cycle is not None and cycle is not self._offered
            ):  # app not started
                self._offered = cycle
                extensions = cycle.scope.setdefault("extensions", {})
                extensions[BODY_INTO] = {"start": functools.partial(self._start_body_into, cycle)}

    def _start_body_into(self, cycle: RequestResponseCycle, buffer: memoryview) -> BodyInto | None:
        """`cycle`'s body from here on into `buffer` (see `BodyIntoStarter`): only while that
        request is the one h11 is reading, its body is framed by Content-Length and `buffer` is
        as long as that length."""
        reader = self.conn._reader
        if (
            cycle is not self.cycle
            or self.body_into is not None
            or cycle.disconnected
            or self.conn.their_state is not h11.SEND_BODY
            or not isinstance(reader, ContentLengthReader)
            or reader._length != len(buffer)
            or reader._remaining + len(cycle.body) != len(buffer)  # the app has read some
        ):
            return None
        body_into = BodyInto(self, buffer)
        if cycle.body:  # read already, not yet handed to the app, which will now never see it
            body_into.take(bytes(cycle.body))
            cycle.body = cycle.body[:0]
        if body_into.missing:
            self.body_into = body_into
        return body_into

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm_header_deadline()
        if self.body_into is not None:
            self.body_into.close()
        super().connection_lost(exc)

    def _arm_header_deadline(self) -> None:
        self._header_deadline = self.loop.call_later(self.header_timeout_s, self._headers_late)

    def _disarm_header_deadline(self) -> None:
        if self._header_deadline is not None:
            self._header_deadline.cancel()
            self._header_deadline = None

    def _headers_late(self) -> None:
        self._header_deadline = None
        if self.conn.their_state is h11.IDLE and not self.transport.is_closing():
            self.transport.close()


class _RequestingConnections(MutableSet[Any]):
    """The server's set of connections as uvicorn's concurrency limit sees it: adding and
    removing change the server's set (which shutdown walks), but the size counts only the
    connections that have sent a complete request (websockets always have)."""

    def __init__(self, connections: set[Any]) -> None:
        self._connections = connections

    def add(self, value: Any) -> None:
        self._connections.add(value)

    def discard(self, value: Any) -> None:
        self._connections.discard(value)

    def __contains__(self, value: object) -> bool:
        return value in self._connections

    def __iter__(self) -> Iterator[Any]:
        return iter(self._connections)

    def __len__(self) -> int:
        return sum(1 for c in self._connections if getattr(c, "has_requested", True))
