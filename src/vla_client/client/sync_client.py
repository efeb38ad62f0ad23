"""`ActionClient`: blocking client for the action API."""

from __future__ import annotations

import time
from types import TracebackType
from typing import Any

from vla_client.client.core import ClientOptions, finish, prepare, runtime_options
from vla_client.client.result import ActionResult
from vla_client.codecs import Encoding
from vla_client.observation import Observation
from vla_client.protocol import ActionMetadata, Wire
from vla_client.transports.base import Transport
from vla_client.transports.http import HTTPTransport


class ActionClient:
    """Send observations to a policy server and get action chunks back.

    >>> with ActionClient("http://127.0.0.1:8000", encoding="png") as client:
    ...     result = client.infer(Observation({"wrist": frame}, state=q, task="pick up the cup"))
    ...     result.actions  # float32 [H, D]
    """

    def __init__(
        self,
        base_url: str,
        *,
        encoding: Encoding = "png",
        wire: Wire = "json",
        timeout: float = 10.0,
        api_key: str | None = None,
        jpeg_quality: int = 90,
        transport: Transport | None = None,
    ) -> None:
        self.options = ClientOptions(encoding=encoding, wire=wire, jpeg_quality=jpeg_quality)
        self.base_url = base_url
        self._transport = transport or HTTPTransport(base_url, timeout=timeout, api_key=api_key)

    def metadata(self) -> ActionMetadata:
        """The server's policy description (cameras, image size, action horizon and dims)."""
        return ActionMetadata.model_validate(self._transport.metadata())

    def infer(
        self,
        observation: Observation,
        *,
        runtime: dict[str, Any] | None = None,
        return_digest: bool = False,
        **parameters: Any,
    ) -> ActionResult:
        """One inference: `parameters` become the request's ``parameters`` block."""
        prepared = prepare(
            observation, self.options, parameters, runtime_options(runtime, return_digest)
        )
        start = time.perf_counter()
        reply = self._transport.exchange(prepared.body, prepared.content_type, prepared.accept)
        return finish(prepared, reply, (time.perf_counter() - start) * 1000)

    def close(self) -> None:
        """Close the connection pool."""
        self._transport.close()

    def __enter__(self) -> ActionClient:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()
