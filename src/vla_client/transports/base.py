"""What a client needs from a transport: the server's metadata and request/reply exchanges.

HTTP POSTs each request to ``/v1/actions/generations``; a websocket sends it as one frame on a
persistent connection. Both fit `Transport` (or `AsyncTransport`), so `ActionClient` has one
`infer` for all of them. A transport moves bytes and maps its own failures to `ConnectError` and
`RequestTimeoutError`, and cuts off a reply over its size cap (`ReplyTooLargeError`); it never
judges an exchange's reply (`vla_client.protocol.read_reply` does that, once, in the client).
`metadata` is the one place a transport reads a reply itself, because it returns the parsed
document (and the HTTP transport sizes its reply cap from it): over HTTP that is the same
`read_reply`, so an error status is the same `ServerError`.

A transport that keeps one connection for many requests (a websocket) is also a
`ReplyStream`: it can read on past a reply that belongs to another request, and drop its
connection when a reply can no longer be trusted.
"""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

from vla_client.protocol import Reply


class Transport(Protocol):
    """A blocking transport."""

    def metadata(self, *, timeout_s: float | None = None) -> Any:
        """The server's metadata document (parsed); raises `ServerError` for an error reply.

        A websocket transport returns what the server sent first on the current connection,
        connecting if there is none; `timeout_s` bounds the wait (default: the transport's).
        """

    def exchange(
        self, body: bytes, content_type: str, accept: str, *, timeout_s: float | None = None
    ) -> Reply:
        """Send one request body and return its reply, the whole exchange (connecting, the
        reply's head and body) within `timeout_s` seconds when given; the transport's own
        timeout bounds each read either way. A reply over the transport's size cap is a
        `ReplyTooLargeError`."""

    def close(self) -> None:
        """Release connections."""


class AsyncTransport(Protocol):
    """An asyncio transport."""

    async def metadata(self, *, timeout_s: float | None = None) -> Any:
        """The server's metadata document (parsed), as `Transport.metadata`."""

    async def exchange(
        self, body: bytes, content_type: str, accept: str, *, timeout_s: float | None = None
    ) -> Reply:
        """Send one request body and return its reply within `timeout_s` seconds."""

    async def close(self) -> None:
        """Release connections."""


@runtime_checkable
class MessageTransport(Protocol):
    """A transport that carries whole messages each way and reads none of them: ZeroMQ
    request/reply to GR00T's server (`vla_client.transports.zmq`), blocking or asyncio, whose
    `call` returns the reply's bytes (awaitable, for asyncio)."""

    def call(self, body: bytes, *, timeout_s: float | None = None) -> Any: ...


@runtime_checkable
class FrameTransport(Protocol):
    """A transport whose requests carry their frames apart from the body (``ipc://``: in
    shared memory), as `exchange`'s `frames`; the client then leaves them out of the body."""

    frames: Any
    """Where the frames go (`vla_client.transports.ipc_memory.FramePool`)."""


@runtime_checkable
class ReplyStream(Protocol):
    """A transport with one connection for many requests, whose replies arrive in order."""

    def receive(self, *, timeout_s: float | None = None) -> Reply:
        """The next reply on the current connection (after one that was skipped)."""

    def reset(self) -> None:
        """Drop the connection; the next exchange opens a new one."""


@runtime_checkable
class AsyncReplyStream(Protocol):
    """`ReplyStream` for asyncio."""

    async def receive(self, *, timeout_s: float | None = None) -> Reply: ...

    async def reset(self) -> None: ...
