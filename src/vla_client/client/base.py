"""What `ActionClient` and `AsyncActionClient` share at construction: options, transport, counters.

The two clients differ only in how they wait on their transport, so everything they accept and
set up is written once here; each names its transport classes and the reply-stream protocol its
websocket transports follow.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from typing import Any, Generic, TypeVar, cast
from urllib.parse import urlsplit

from vla_client.client.core import (
    RequestBook,
    TransportKind,
    check_seconds,
    resolve_options,
    transport_kind,
)
from vla_client.protocol import Encoding, Endpoint, Wire, check_endpoint
from vla_client.transports.retry import RetryPolicy

TransportT = TypeVar("TransportT")
StreamT = TypeVar("StreamT")


class ClientBase(ABC, Generic[TransportT, StreamT]):
    """The constructor both clients share; see `ActionClient` for what each option does."""

    _stream_type: type
    """The runtime-checkable `ReplyStream` protocol of this client's websocket transports."""
    _http_type: Callable[..., Any]

    def __init__(
        self,
        base_url: str,
        *,
        encoding: Encoding | None = None,
        wire: Wire | None = None,
        timeout_s: float = 10.0,
        api_key: str | None = None,
        jpeg_quality: int = 90,
        transport: TransportT | TransportKind | None = None,
        endpoint: Endpoint | None = None,
        max_observation_age_s: float | None = None,
        deadline_s: float | None = None,
        retry: RetryPolicy | None = None,
    ) -> None:
        check_seconds("timeout_s", timeout_s)
        if endpoint is not None:
            check_endpoint(endpoint)
        if retry is not None and not isinstance(retry, RetryPolicy):
            raise TypeError(f"retry must be a RetryPolicy, got {type(retry).__name__}")
        self.base_url = base_url
        self.retry = retry or RetryPolicy()
        if transport is None or isinstance(transport, str):
            kind = transport_kind(urlsplit(base_url).scheme, transport, endpoint)
            if kind == "websocket":
                opened = self._websocket_type()(
                    base_url, endpoint=endpoint, timeout_s=timeout_s, api_key=api_key
                )
            else:
                opened = self._http_type(base_url, timeout_s=timeout_s, api_key=api_key)
            transport = cast("TransportT", opened)
        self._transport: TransportT = transport
        self._stream: StreamT | None = (
            cast("StreamT", transport) if isinstance(transport, self._stream_type) else None
        )
        self._book = RequestBook(
            resolve_options(
                websocket=self._stream is not None,
                flat=getattr(transport, "endpoint", None) == "openpi",
                encoding=encoding,
                wire=wire,
                jpeg_quality=jpeg_quality,
                max_observation_age_s=max_observation_age_s,
                deadline_s=deadline_s,
            ),
            timeout_s,
        )
        self.options = self._book.options
        self.stats = self._book.stats

    @property
    def transport(self) -> TransportT:
        """The transport in use (a websocket transport has its own connection `stats`)."""
        return self._transport

    @staticmethod
    @abstractmethod
    def _websocket_type() -> Callable[..., Any]:
        """This client's websocket transport class, imported only when a websocket is opened
        (the ``websocket`` extra may not be installed)."""
