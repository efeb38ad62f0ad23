"""`AsyncActionClient`: the asyncio twin of `ActionClient`, sharing its encode and read steps."""

from __future__ import annotations

import asyncio
import time
from types import TracebackType
from typing import Any

from vla_client.client.core import ClientOptions, finish, prepare, runtime_options
from vla_client.client.result import ActionResult
from vla_client.codecs import Encoding
from vla_client.observation import Observation
from vla_client.protocol import ActionMetadata, Wire
from vla_client.transports.base import AsyncTransport
from vla_client.transports.http import AsyncHTTPTransport


class AsyncActionClient:
    """Send observations from asyncio code. Encoding runs in a worker thread, off the event loop."""

    def __init__(
        self,
        base_url: str,
        *,
        encoding: Encoding = "png",
        wire: Wire = "json",
        timeout: float = 10.0,
        api_key: str | None = None,
        jpeg_quality: int = 90,
        transport: AsyncTransport | None = None,
    ) -> None:
        self.options = ClientOptions(encoding=encoding, wire=wire, jpeg_quality=jpeg_quality)
        self.base_url = base_url
        self._transport = transport or AsyncHTTPTransport(base_url, timeout=timeout, api_key=api_key)

    async def metadata(self) -> ActionMetadata:
        """The server's policy description."""
        return ActionMetadata.model_validate(await self._transport.metadata())

    async def infer(
        self,
        observation: Observation,
        *,
        runtime: dict[str, Any] | None = None,
        return_digest: bool = False,
        **parameters: Any,
    ) -> ActionResult:
        """One inference, as `ActionClient.infer`."""
        prepared = await asyncio.to_thread(
            prepare, observation, self.options, parameters, runtime_options(runtime, return_digest)
        )
        start = time.perf_counter()
        reply = await self._transport.exchange(prepared.body, prepared.content_type, prepared.accept)
        return finish(prepared, reply, (time.perf_counter() - start) * 1000)

    async def close(self) -> None:
        """Close the connection pool."""
        await self._transport.close()

    async def __aenter__(self) -> AsyncActionClient:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close()
