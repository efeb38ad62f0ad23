"""HTTP connections that must finish their headers in time, and a limit only requests count in.

uvicorn's h11 protocol bounds how long an idle keep-alive connection stays open, but only once
it has answered a first request: a peer that connects and sends nothing, or half a header and
then a byte a second (slowloris), holds its connection for as long as it likes. uvicorn's
``limit_concurrency`` counts such connections too, so a few hundred of them, from anyone who
can reach the port, turn every other client away with 503, whether the server has a key or not.

`HeaderDeadlineProtocol` is uvicorn's h11 protocol with two changes:

- a deadline on the request line and headers, armed when the connection opens (and, on a
  keep-alive connection, at the first byte of each later request); a connection whose headers
  are not complete by then is closed, without a reply (h11 cannot answer a request it has not
  read, and a peer this slow is not reading one);
- the connection limit counts only connections that have sent a complete request (and the
  requests in flight), so peers that never finish one cannot use up the room of those that do.
  Each of those costs one socket for at most the deadline.

`uvicorn_options` (`vla_client.server.config`) selects it for every server this package runs.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator, MutableSet
from typing import Any

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol


class HeaderDeadlineProtocol(H11Protocol):
    """uvicorn's h11 protocol, closing connections whose headers take over `header_timeout_s`."""

    def __init__(self, *args: Any, header_timeout_s: float, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.header_timeout_s = header_timeout_s
        self._requested = False
        self._header_deadline: asyncio.TimerHandle | None = None
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
        if self.conn.their_state is h11.IDLE and self._header_deadline is None:
            self._arm_header_deadline()  # the first byte of a later request on a kept connection
        super().data_received(data)

    def handle_events(self) -> None:
        super().handle_events()
        if self.conn.their_state is not h11.IDLE:  # h11 has read a whole request line + headers
            self._requested = True
            self._disarm_header_deadline()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm_header_deadline()
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
