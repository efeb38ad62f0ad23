"""`AsyncActionClient`: `ActionClient` for asyncio, driving the same steps with `adrive`."""

from __future__ import annotations

from types import TracebackType
from typing import Any

from vla_client.client.base import ClientBase
from vla_client.client.request_book import runtime_block
from vla_client.client.result import ActionResult
from vla_client.observation import Observation
from vla_client.protocol import ActionMetadata
from vla_client.transports.base import AsyncReplyStream, AsyncTransport
from vla_client.transports.drive import adrive


class AsyncActionClient(ClientBase[AsyncTransport]):
    """Send observations from asyncio code, as `ActionClient` does (same options).

    Example::

        async with AsyncActionClient("ws://127.0.0.1:8000") as client:
            result = await client.infer(Observation({"wrist": frame}, task="pick up the cup"))
            result.actions  # float32 [H, D]

    Encoding runs in a worker thread, off the event loop. Over a websocket, concurrent calls
    on one client are served one at a time, in order.
    """

    _stream_type = AsyncReplyStream
    _transport_prefix = "Async"

    async def metadata(self) -> ActionMetadata:
        """The server's policy description (waiting for a server that is warming up)."""
        return await adrive(self._session.metadata())

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
        block = runtime_block(runtime, return_digest)
        return await adrive(self._session.infer(observation, parameters, request_id, block))

    async def reset(self) -> None:
        """Start a new episode: GR00T's server resets its policy; vLLM-Omni's robot endpoint
        ends the session and the next request starts a new one. The action API (SGLang's and
        the reference server's) and openpi's websocket keep no episode state between
        requests, so there it does nothing. `ControlLoop` and ``vla-client eval`` call it at
        each episode's start."""
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
