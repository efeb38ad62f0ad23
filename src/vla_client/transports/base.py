"""What a client needs from a transport: the server's metadata and one request/reply exchange.

HTTP POSTs each request to ``/v1/actions/generations``; a websocket sends it as one frame on a
persistent connection. Both fit `Transport`, so `ActionClient` has one `infer` for all of them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

GENERATIONS_PATH = "/v1/actions/generations"
METADATA_PATH = "/v1/actions/metadata"
HEALTH_PATH = "/health"


@dataclass(frozen=True)
class Reply:
    """One reply as received: status, content type and body bytes."""

    status: int
    content_type: str
    content: bytes
    headers: Mapping[str, str] = field(default_factory=dict)


class Transport(Protocol):
    """A blocking transport."""

    def metadata(self) -> Any:
        """The server's metadata document (parsed)."""

    def exchange(self, body: bytes, content_type: str, accept: str) -> Reply:
        """Send one request body and return its reply."""

    def close(self) -> None:
        """Release connections."""


class AsyncTransport(Protocol):
    """An asyncio transport."""

    async def metadata(self) -> Any:
        """The server's metadata document (parsed)."""

    async def exchange(self, body: bytes, content_type: str, accept: str) -> Reply:
        """Send one request body and return its reply."""

    async def close(self) -> None:
        """Release connections."""
