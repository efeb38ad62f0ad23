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

ZeroMQ also reconnects by itself, silently: a server restarted on the same address (perhaps with
another policy) is simply talked to again. The socket's monitor reports each dropped connection,
and the transport counts them (`connection_drops`), so the client can read the server's facts
again before the next request.

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

import zmq
import zmq.asyncio
from zmq.utils.monitor import parse_monitor_message

from vla_client.errors import ConnectError, ReplyTooLargeError, RequestTimeoutError
from vla_client.protocol import REPLY_SIZE_FLOOR
from vla_client.protocol.families.gr00t import zmq_address
from vla_client.transports.drive import Steps, adrive, drive
from vla_client.validation import check_positive

_WATCHED = zmq.EVENT_DISCONNECTED | zmq.EVENT_CONNECT_RETRIED
DROP_GRACE_S = 0.25
"""How long after a dropped connection to look for ZeroMQ's reconnect attempt (it follows at
once when the server went away; none follows a reply cut off at the cap)."""


class _ReqLink:
    """What the two transports share: the address, the limits, the socket's life and the steps
    of one exchange. `context` makes their sockets, blocking or asyncio."""

    poller_type: type[zmq.Poller]

    @staticmethod
    def _context() -> zmq.Context[Any]:
        """The context the sockets are made in: the process's shared one."""
        return zmq.Context.instance()

    def __init__(
        self, url: str, *, timeout_s: float = 10.0, max_reply_bytes: int | None = None
    ) -> None:
        check_positive("timeout_s", timeout_s)
        check_positive("max_reply_bytes", max_reply_bytes, integer=True, allow_none=True)
        self.url = url
        self.address = zmq_address(url)
        self.timeout_s = timeout_s
        self.max_reply_bytes = max_reply_bytes or REPLY_SIZE_FLOOR
        self._sockets: tuple[zmq.Socket[Any], zmq.Socket[Any]] | None = None
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
            event = parse_monitor_message((yield monitor.recv_multipart))["event"]
            if event == zmq.EVENT_DISCONNECTED:
                self.drops += 1
        return self.drops

    def _steps(self, body: bytes, timeout_s: float | None) -> Steps[bytes]:
        """One exchange: send `body`, wait for the reply within `timeout_s` (and `timeout_s` of
        the transport), return its bytes; on any failure the socket is closed."""
        wait_s = self.timeout_s if timeout_s is None else min(self.timeout_s, timeout_s)
        end = time.monotonic() + wait_s
        socket, monitor = self._opened()
        poller = self.poller_type()
        poller.register(monitor, zmq.POLLIN)
        dropped_at: float | None = None
        try:
            yield from self._drained()  # events from before this exchange: counted, not waited on
            poller.register(socket, zmq.POLLIN)
            yield partial(socket.send, body, copy=False)
            while True:
                until = end if dropped_at is None else min(end, dropped_at + DROP_GRACE_S)
                left_ms = max(0, round((until - time.monotonic()) * 1000))
                ready = dict((yield partial(poller.poll, left_ms)))
                if socket in ready:
                    reply: bytes = yield partial(socket.recv)
                    return reply
                if monitor in ready:
                    event = parse_monitor_message((yield monitor.recv_multipart))["event"]
                    if event == zmq.EVENT_CONNECT_RETRIED and dropped_at is not None:
                        raise ConnectError(f"{self.url} dropped the connection; no reply")
                    if event == zmq.EVENT_DISCONNECTED:
                        self.drops += 1
                        dropped_at = time.monotonic()
                elif dropped_at is not None and time.monotonic() < end:
                    raise ReplyTooLargeError(self.max_reply_bytes, f"the reply from {self.url}")
                elif time.monotonic() >= end:
                    raise RequestTimeoutError(f"no reply from {self.url} within {wait_s:.3g} s")
        except BaseException:
            self._close()  # its reply may still come: a REQ socket is not used past a failure
            raise


class ZmqTransport(_ReqLink):
    """Blocking ZeroMQ REQ transport. `timeout_s` bounds each exchange; `max_reply_bytes`
    (default 1 MiB) each reply. Calls from several threads are served one at a time."""

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
