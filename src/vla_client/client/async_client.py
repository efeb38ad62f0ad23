"""`AsyncActionClient`: the asyncio twin of `ActionClient`, sharing its encode and read steps."""

from __future__ import annotations

import time
from types import TracebackType
from typing import TYPE_CHECKING, Any

from vla_client.client.base import ClientBase
from vla_client.client.core import PreparedRequest, Received, runtime_block
from vla_client.client.result import ActionResult
from vla_client.errors import ConnectError, ServerError
from vla_client.observation import Observation
from vla_client.protocol import ActionMetadata, Reply, read_metadata
from vla_client.transports.base import AsyncReplyStream, AsyncTransport
from vla_client.transports.drive import adrive
from vla_client.transports.http import AsyncHTTPTransport
from vla_client.transports.retry import aretrying

if TYPE_CHECKING:
    from vla_client.transports.websocket import AsyncWebSocketTransport
    from vla_client.transports.zmq import AsyncZmqTransport


class AsyncActionClient(ClientBase[AsyncTransport, AsyncReplyStream]):
    """Send observations from asyncio code, as `ActionClient` does (same options).

    Example::

        async with AsyncActionClient("ws://127.0.0.1:8000") as client:
            result = await client.infer(Observation({"wrist": frame}, task="pick up the cup"))
            result.actions  # float32 [H, D]

    Encoding runs in a worker thread, off the event loop. Over a websocket, concurrent calls
    on one client are served one at a time, in order.
    """

    _stream_type = AsyncReplyStream
    _http_type = AsyncHTTPTransport

    @staticmethod
    def _zmq_type() -> type[AsyncZmqTransport]:
        from vla_client.transports.zmq import AsyncZmqTransport

        return AsyncZmqTransport

    @staticmethod
    def _websocket_type() -> type[AsyncWebSocketTransport]:
        from vla_client.transports.websocket import AsyncWebSocketTransport

        return AsyncWebSocketTransport

    async def metadata(self) -> ActionMetadata:
        """The server's policy description (waiting for a server that is warming up)."""
        if self._session is not None:
            return await adrive(self._session.metadata())
        return read_metadata(
            await aretrying(self._transport.metadata, self.retry, on_retry=self._book.retried)
        )

    async def infer(
        self,
        observation: Observation,
        *,
        request_id: str | None = None,
        runtime: dict[str, Any] | None = None,
        return_digest: bool = False,
        **parameters: Any,
    ) -> ActionResult:
        """One inference, as `ActionClient.infer`."""
        if self._session is not None:
            if runtime or return_digest:
                raise ValueError("this server takes no runtime options or digests")
            return await adrive(self._session.infer(observation, parameters, request_id))
        return await self._book.arun(
            observation,
            parameters,
            runtime_block(runtime, return_digest),
            request_id,
            contract=self._server_contract,
            send=self._send,
            receive=self._receive if self._stream is not None else None,
        )

    async def _server_contract(self, deadline_at: float | None) -> ActionMetadata | None:
        """The metadata to fit observations to: None with ``check_contract=False``; on a
        websocket, the current connection's (connecting if needed, so a reconnect is checked
        afresh); over HTTP, read once and again after a connection failed. Reading it is
        retried as requests are."""
        source = self._contract_source()
        if source == "none":
            return None
        if source == "http" and self._http_metadata is not None:
            return self._http_metadata
        budget_s = None if deadline_at is None else deadline_at - time.monotonic()
        return await aretrying(
            lambda: self._read_contract(source, deadline_at),
            self.retry,
            budget_s=budget_s,
            on_retry=self._book.retried,
        )

    async def _read_contract(self, source: str, deadline_at: float | None) -> ActionMetadata:
        try:
            document = await self._transport.metadata(timeout_s=self._book.wait_until(deadline_at))
        except ServerError as exc:
            if exc.status_code != 404:  # a server without metadata announces nothing
                raise
            document = None
        return self._keep_contract(source, document)

    async def _send(self, prepared: PreparedRequest) -> Received:
        """`prepared`'s exchange, retried as `retry` allows within its deadline."""
        return await aretrying(
            lambda: self._attempt(prepared),
            self.retry,
            budget_s=self._book.budget(prepared),
            on_retry=self._book.retried,
        )

    async def _attempt(self, prepared: PreparedRequest) -> Received:
        try:
            with self._book.waiting(prepared) as timeout_s:
                reply = await self._transport.exchange(
                    prepared.body, prepared.content_type, prepared.accept, timeout_s=timeout_s
                )
        except ConnectError:
            self._http_metadata = None  # the server may have come back as another
            raise
        return await self._read(prepared, reply)

    async def _receive(self, prepared: PreparedRequest) -> Received:
        """The websocket's next reply, read past one to another request."""
        assert self._stream is not None  # given to `arun` only with a stream
        with self._book.waiting(prepared) as timeout_s:
            reply = await self._stream.receive(timeout_s=timeout_s)
        return await self._read(prepared, reply)

    async def _read(self, prepared: PreparedRequest, reply: Reply) -> Received:
        try:
            return self._book.read(prepared, reply)
        except ServerError as exc:
            if self._stream is not None:  # the server ends a websocket after an error
                await self._stream.reset()
            if 400 <= exc.status_code < 500:  # it may be another server now: read it again
                self._http_metadata = None
            raise

    async def reset(self) -> None:
        """Start a new episode: GR00T's server resets its policy; vLLM-Omni's robot endpoint
        ends the session and the next request starts a new one. The action API (SGLang's and
        the reference server's) and openpi's websocket keep no episode state between
        requests, so there it does nothing. `ControlLoop` and ``vla-client eval`` call it at
        each episode's start."""
        if self._session is not None:
            await adrive(self._session.reset())

    async def close(self) -> None:
        """Close the connection (pool)."""
        await self._transport.close()

    async def __aenter__(self) -> AsyncActionClient:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()
