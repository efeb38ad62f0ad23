"""`AsyncActionClient`: the asyncio twin of `ActionClient`, sharing its encode and read steps."""

from __future__ import annotations

import asyncio
import time
from types import TracebackType
from typing import TYPE_CHECKING, Any

from vla_client.client.base import ClientBase
from vla_client.client.core import PreparedRequest, Received, runtime_block
from vla_client.client.result import ActionResult
from vla_client.errors import MismatchedReplyError, ServerError
from vla_client.observation import Observation
from vla_client.protocol import ActionMetadata, Reply
from vla_client.transports.base import AsyncReplyStream, AsyncTransport
from vla_client.transports.http import AsyncHTTPTransport
from vla_client.transports.retry import aretrying

if TYPE_CHECKING:
    from vla_client.transports.websocket import AsyncWebSocketTransport


class AsyncActionClient(ClientBase[AsyncTransport, AsyncReplyStream]):
    """Send observations from asyncio code, as `ActionClient` does (same options).

    Encoding runs in a worker thread, off the event loop.
    """

    _stream_type = AsyncReplyStream
    _http_type = AsyncHTTPTransport

    @staticmethod
    def _websocket_type() -> type[AsyncWebSocketTransport]:
        from vla_client.transports.websocket import AsyncWebSocketTransport

        return AsyncWebSocketTransport

    async def metadata(self) -> ActionMetadata:
        """The server's policy description."""
        return ActionMetadata.model_validate(await self._transport.metadata())

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
        book = self._book
        prepared = await asyncio.to_thread(
            book.prepare, observation, parameters, runtime_block(runtime, return_digest), request_id
        )
        start = time.perf_counter()
        received = await aretrying(
            lambda: self._attempt(prepared),
            self.retry,
            budget_s=book.budget(prepared),
            on_retry=book.retried,
        )
        while True:
            try:
                return book.finish(prepared, received, (time.perf_counter() - start) * 1000)
            except MismatchedReplyError:
                if self._stream is None:
                    raise
                with book.waiting(prepared) as timeout_s:
                    reply = await self._stream.receive(timeout_s=timeout_s)
                received = await self._read(prepared, reply)

    async def _attempt(self, prepared: PreparedRequest) -> Received:
        with self._book.waiting(prepared) as timeout_s:
            reply = await self._transport.exchange(
                prepared.body, prepared.content_type, prepared.accept, timeout_s=timeout_s
            )
        return await self._read(prepared, reply)

    async def _read(self, prepared: PreparedRequest, reply: Reply) -> Received:
        try:
            return self._book.read(prepared, reply)
        except ServerError:
            if self._stream is not None:  # the server ends a websocket after an error
                await self._stream.reset()
            raise

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
