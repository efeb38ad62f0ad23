"""ZeroMQ request/reply transports: one REQ socket, one message out, one message back.

This is how NVIDIA Isaac GR00T's policy server listens (``tcp://host:5555``); the messages
themselves are built and read by `vla_client.protocol.families.gr00t`. The transport moves bytes
only: `call` sends one request and returns the reply's bytes within the wait it is given (and
never past its own `timeout_s`), mapping ZeroMQ's failures to the client's errors.

A REQ socket must get the reply to its request before it may send again, so a socket whose
exchange failed (timed out, was cancelled, lost its connection) is closed and the next call
opens a fresh one: a late reply is never read as the answer to a newer request. Replies over
`max_reply_bytes` are cut off by ZeroMQ itself (``MAXMSGSIZE``), which drops the connection
without reading them into memory; the transport tells that drop from a server that went away
by what follows it (a server that went away makes ZeroMQ retry the connection at once; a reply
over the cap ends the connection for good) and raises `ReplyTooLargeError` or `ConnectError`.

ZeroMQ also connects by itself, silently, and keeps trying: to an address where nothing listens
yet (a robot's client may start before GR00T's server), and again after a connection dropped (a
server restarted on the same address, perhaps with another policy, is simply talked to again).
The socket's monitor reports each attempt, so a call finds out fast when nothing answers: the
connection must open (ZeroMQ's handshake with the server done) within `connect_timeout_s`
(default 5 s), else `ConnectError` says what it found (refused: nothing listens on that port; a
host that never answers; something that answers but does not speak ZeroMQ, at once) and what to
check. The monitor's dropped connections are counted (`connection_drops`), so the client can
read the server's facts again before the next request.

The blocking and asyncio transports are one set of steps (`vla_client.transports.drive`), run
with pyzmq's blocking or asyncio sockets. pyzmq comes with the ``gr00t`` extra.
"""

from __future__ import annotations

import asyncio
import threading
import time
from abc import abstractmethod
from functools import partial
from typing import Any
from urllib.parse import urlsplit

import zmq
import zmq.asyncio
from zmq.utils.monitor import parse_monitor_message

from vla_client.errors import ConnectError, ReplyTooLargeError, RequestTimeoutError
from vla_client.protocol import REPLY_SIZE_FLOOR
from vla_client.protocol.families.gr00t import GR00T_PORT, zmq_address
from vla_client.transports.drive import Steps, adrive, drive
from vla_client.transports.http import LONGER_TIMEOUT
from vla_client.validation import check_positive

_HANDSHAKE_FAILED = (
    zmq.EVENT_HANDSHAKE_FAILED_NO_DETAIL
    | zmq.EVENT_HANDSHAKE_FAILED_PROTOCOL
    | zmq.EVENT_HANDSHAKE_FAILED_AUTH
)
_WATCHED = (
    zmq.EVENT_DISCONNECTED | zmq.EVENT_CONNECT_RETRIED | zmq.EVENT_CONNECT_DELAYED
    | zmq.EVENT_CONNECTED | zmq.EVENT_HANDSHAKE_SUCCEEDED | _HANDSHAKE_FAILED
)  # fmt: skip
DROP_GRACE_S = 0.25
"""How long after a dropped connection to look for ZeroMQ's reconnect attempt (it follows at
once when the server went away; none follows a reply cut off at the cap)."""
CONNECT_TIMEOUT_S = 5.0
"""How long a call waits for its connection to open, by default: a server that is starting has
that long; an address where nothing answers is said to be one after it."""
LONGER_CONNECT = (
    "a server still starting: wait longer with connect_timeout_s= (--connect-timeout on the "
    "command line)"
)


class _ReqLink:
    """What the two transports share: the address, the limits, the socket's life and the steps
    of one exchange. `context` makes their sockets, blocking or asyncio."""

    poller_type: type[zmq.Poller]

    @staticmethod
    def _context() -> zmq.Context[Any]:
        """The context the sockets are made in: the process's shared one."""
        return zmq.Context.instance()

    def __init__(
        self,
        url: str,
        *,
        timeout_s: float = 10.0,
        connect_timeout_s: float = CONNECT_TIMEOUT_S,
        max_reply_bytes: int | None = None,
    ) -> None:
        check_positive("timeout_s", timeout_s)
        check_positive("connect_timeout_s", connect_timeout_s)
        check_positive("max_reply_bytes", max_reply_bytes, integer=True, allow_none=True)
        self.url = url
        self.address = zmq_address(url)
        self.timeout_s = timeout_s
        self.connect_timeout_s = connect_timeout_s
        self.max_reply_bytes = max_reply_bytes or REPLY_SIZE_FLOOR
        self._sockets: tuple[zmq.Socket[Any], zmq.Socket[Any]] | None = None
        self._link = _Link()
        self.drops = 0
        """Connections to the server that ZeroMQ reported dropped, as far as its monitor has been
        read: after each, ZeroMQ connects again by itself, perhaps to another server."""
        self._lock = self._new_lock()

    @staticmethod
    @abstractmethod
    def _new_lock() -> Any:
        """The lock that serves calls one at a time."""

    def _opened(self) -> tuple[zmq.Socket[Any], zmq.Socket[Any]]:
        """The REQ socket and its event monitor, opening them when there are none."""
        if self._sockets is None:
            socket = self._context().socket(zmq.REQ)
            socket.setsockopt(zmq.LINGER, 0)
            socket.setsockopt(zmq.MAXMSGSIZE, self.max_reply_bytes)
            monitor = socket.get_monitor_socket(_WATCHED)
            socket.connect(self.address)
            self._sockets = (socket, monitor)
            self._link = _Link()
        return self._sockets

    def _close(self) -> None:
        sockets, self._sockets = self._sockets, None
        if sockets is not None:
            socket, monitor = sockets
            socket.disable_monitor()
            monitor.close(linger=0)
            socket.close(linger=0)

    def _drained(self) -> Steps[int]:
        """Read the monitor's waiting events (from between exchanges), counting the dropped
        connections among them; `drops` after them."""
        _, monitor = self._opened()
        poller = self.poller_type()
        poller.register(monitor, zmq.POLLIN)
        while (yield partial(poller.poll, 0)):
            self._note((yield from self._event(monitor)))
        return self.drops

    def _event(self, monitor: zmq.Socket[Any]) -> Steps[int]:
        """The monitor's next event (waiting there)."""
        return int(parse_monitor_message((yield monitor.recv_multipart))["event"])

    def _note(self, event: int) -> bool:
        """Keep `event` in the connection's state; whether it dropped a connection to the
        server (counted in `drops`)."""
        dropped = self._link.note(event)
        self.drops += dropped
        return dropped

    def _steps(self, body: bytes, timeout_s: float | None) -> Steps[bytes]:
        """One exchange: send `body`, wait for the reply within `timeout_s` (and `timeout_s` of
        the transport), the connection opening within `connect_timeout_s` of it; return the
        reply's bytes. On any failure the socket is closed."""
        wait_s = self.timeout_s if timeout_s is None else min(self.timeout_s, timeout_s)
        started = time.monotonic()
        end = started + wait_s
        connect_end = started + min(wait_s, self.connect_timeout_s)
        socket, monitor = self._opened()
        poller = self.poller_type()
        poller.register(monitor, zmq.POLLIN)
        dropped_at: float | None = None
        try:
            yield from self._drained()  # events from before this exchange: counted, not waited on
            poller.register(socket, zmq.POLLIN)
            yield partial(socket.send, body, copy=False)
            while True:
                if self._link.refused_by_a_stranger:
                    raise ConnectError(self._unreachable(time.monotonic() - started), sent=False)
                until = end if self._link.open else connect_end
                if dropped_at is not None:
                    until = min(until, dropped_at + DROP_GRACE_S)
                left_ms = max(0, round((until - time.monotonic()) * 1000))
                ready = dict((yield partial(poller.poll, left_ms)))
                if socket in ready:
                    reply: bytes = yield partial(socket.recv)
                    return reply
                if monitor in ready:
                    event = yield from self._event(monitor)
                    if event == zmq.EVENT_CONNECT_RETRIED and dropped_at is not None:
                        raise ConnectError(f"{self.url} dropped the connection; no reply")
                    if self._note(event):
                        dropped_at = time.monotonic()
                elif dropped_at is not None and time.monotonic() < end:
                    raise ReplyTooLargeError(self.max_reply_bytes, f"the reply from {self.url}")
                elif not self._link.open and time.monotonic() >= connect_end:
                    raise ConnectError(self._unreachable(connect_end - started), sent=False)
                elif time.monotonic() >= end:
                    raise RequestTimeoutError(
                        f"no reply from {self.url} within {wait_s:.3g} s; {LONGER_TIMEOUT}"
                    )
        except BaseException:
            self._close()  # its reply may still come: a REQ socket is not used past a failure
            raise

    def _unreachable(self, waited_s: float) -> str:
        """Why no connection to the server opened in `waited_s`, and what to check."""
        parts = urlsplit(self.address)
        host, port = parts.hostname, parts.port
        start = "start GR00T's server there or give the address of a running one (its default "
        start += f"port is {GR00T_PORT})"
        seen = self._link.seen
        if seen == "stranger":
            return (
                f"{self.url} answered, but not as a ZeroMQ server: it is not GR00T's policy "
                f"server; check the port (GR00T's server listens on {GR00T_PORT} unless told "
                "otherwise)"
            )
        if seen == "accepted":
            return (
                f"{self.url} accepted the connection but did not speak ZeroMQ within "
                f"{waited_s:.3g} s: it is not GR00T's policy server; check the port"
            )
        if seen == "no address":
            reason = f"{host} cannot be connected to (an unknown host name, or no route to it)"
            return f"nothing answers at {self.url} (waited {waited_s:.3g} s): {reason}; check it"
        if seen == "refused":
            reason = f"connection refused, nothing listens on port {port} of {host}; {start}"
        else:
            reason = (
                f"no answer from {host}; check that it is up and reachable (a firewall may drop "
                f"the connection) and that GR00T's server listens on port {port}"
            )
        waited = f"nothing answers at {self.url} (waited {waited_s:.3g} s)"
        return f"{waited}: {reason}; {LONGER_CONNECT}"


class _Link:
    """What the monitor told of the socket's connection: whether it is `open` (ZeroMQ's
    handshake with the server done, and no drop since), and else what the last attempt met
    (`seen`): ``refused`` (nothing listens on the port), ``no address`` (the host cannot be
    connected to), ``accepted`` (a connection that has not yet spoken ZeroMQ), ``stranger``
    (a peer that is no ZeroMQ server), or None (no answer at all)."""

    def __init__(self) -> None:
        self.open = False
        self.seen: str | None = None
        self._dialled = False

    @property
    def refused_by_a_stranger(self) -> bool:
        """Whether the last attempt met a peer that is no ZeroMQ server (no use waiting)."""
        return not self.open and self.seen == "stranger"

    def note(self, event: int) -> bool:
        """Keep `event`; whether it dropped an open connection."""
        if event == zmq.EVENT_HANDSHAKE_SUCCEEDED:
            self.open, self.seen = True, None
        elif event & _HANDSHAKE_FAILED:
            self.seen = "stranger"
        elif event == zmq.EVENT_CONNECT_DELAYED:
            self._dialled = True
        elif event == zmq.EVENT_CONNECTED and self.seen != "stranger":
            self.seen = "accepted"
        elif event == zmq.EVENT_CONNECT_RETRIED and self.seen != "stranger":
            self.seen = "refused" if self._dialled else "no address"
            self._dialled = False
        elif event == zmq.EVENT_DISCONNECTED and self.open:
            self.open = False
            return True
        return False


class ZmqTransport(_ReqLink):
    """Blocking ZeroMQ REQ transport. `timeout_s` bounds each exchange, `connect_timeout_s`
    (default 5 s) the wait within it for the connection to open, `max_reply_bytes` (default
    1 MiB) each reply. Calls from several threads are served one at a time."""

    poller_type = zmq.Poller
    _lock: threading.Lock

    @staticmethod
    def _new_lock() -> threading.Lock:
        return threading.Lock()

    def call(self, body: bytes, *, timeout_s: float | None = None) -> bytes:
        """Send `body`, return the reply's bytes, within `timeout_s` when given."""
        with self._lock:
            return drive(self._steps(body, timeout_s))

    def connection_drops(self) -> int:
        """How many times the server's connection has dropped so far (ZeroMQ connected again
        by itself after each): a count that grew since the server's facts were read says they
        may be another server's."""
        with self._lock:
            return drive(self._drained())

    def close(self) -> None:
        """Close the socket."""
        with self._lock:
            self._close()


class AsyncZmqTransport(_ReqLink):
    """asyncio ZeroMQ REQ transport, as `ZmqTransport`; concurrent calls are served one at a
    time."""

    poller_type = zmq.asyncio.Poller
    _lock: asyncio.Lock

    @staticmethod
    def _new_lock() -> asyncio.Lock:
        return asyncio.Lock()

    @staticmethod
    def _context() -> zmq.Context[Any]:
        """The process's shared context, making asyncio sockets."""
        return zmq.asyncio.Context.shadow(zmq.Context.instance())

    async def call(self, body: bytes, *, timeout_s: float | None = None) -> bytes:
        """Send `body`, return the reply's bytes, within `timeout_s` when given."""
        async with self._lock:
            return await adrive(self._steps(body, timeout_s))

    async def connection_drops(self) -> int:
        """As `ZmqTransport.connection_drops`."""
        async with self._lock:
            return await adrive(self._drained())

    async def close(self) -> None:
        """Close the socket."""
        async with self._lock:
            self._close()
