"""HTTP transports over httpx, sync and async, with httpx's errors mapped to ours.

One pooled keep-alive connection per client: a new TCP connection per request would add a
handshake to every control tick.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import httpx
import orjson

from vla_client.errors import ConnectError, ProtocolError, RequestTimeoutError, ServerError
from vla_client.transports.base import GENERATIONS_PATH, METADATA_PATH, Reply


def auth_headers(api_key: str | None) -> dict[str, str]:
    """``Authorization: Bearer <key>`` as SGLang's ``--api-key`` expects, or nothing."""
    return {"Authorization": f"Bearer {api_key}"} if api_key else {}


class HTTPTransport:
    """Blocking HTTP transport on an `httpx.Client`."""

    def __init__(
        self, base_url: str, *, timeout: float = 10.0, api_key: str | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:  # fmt: skip
        self._client = httpx.Client(
            base_url=base_url.rstrip("/"),
            timeout=timeout,
            headers={**auth_headers(api_key), **(headers or {})},
        )

    def metadata(self) -> Any:
        with _mapped_errors():
            response = self._client.get(METADATA_PATH)
        return parse_json_reply(_reply(response))

    def exchange(self, body: bytes, content_type: str, accept: str) -> Reply:
        with _mapped_errors():
            response = self._client.post(
                GENERATIONS_PATH,
                content=body,
                headers={"Content-Type": content_type, "Accept": accept},
            )
        return _reply(response)

    def close(self) -> None:
        self._client.close()


class AsyncHTTPTransport:
    """asyncio HTTP transport on an `httpx.AsyncClient`."""

    def __init__(
        self, base_url: str, *, timeout: float = 10.0, api_key: str | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:  # fmt: skip
        self._client = httpx.AsyncClient(
            base_url=base_url.rstrip("/"),
            timeout=timeout,
            headers={**auth_headers(api_key), **(headers or {})},
        )

    async def metadata(self) -> Any:
        with _mapped_errors():
            response = await self._client.get(METADATA_PATH)
        return parse_json_reply(_reply(response))

    async def exchange(self, body: bytes, content_type: str, accept: str) -> Reply:
        with _mapped_errors():
            response = await self._client.post(
                GENERATIONS_PATH,
                content=body,
                headers={"Content-Type": content_type, "Accept": accept},
            )
        return _reply(response)

    async def close(self) -> None:
        await self._client.aclose()


def raise_for_status(reply: Reply) -> None:
    """Raise `ServerError` with the server's ``detail`` for a 4xx/5xx reply."""
    if reply.status < 400:
        return
    detail: Any = reply.content.decode("utf-8", "replace").strip() or f"HTTP {reply.status}"
    try:
        document = orjson.loads(reply.content)
    except orjson.JSONDecodeError:
        document = None
    if isinstance(document, dict) and "detail" in document:
        detail = document["detail"]
    retry_after = reply.headers.get("retry-after")
    raise ServerError(
        reply.status,
        detail if isinstance(detail, str) else orjson.dumps(detail).decode(),
        retry_after=float(retry_after) if retry_after and retry_after.isdigit() else None,
    )


def parse_json_reply(reply: Reply) -> Any:
    """The JSON document of a successful reply."""
    raise_for_status(reply)
    try:
        return orjson.loads(reply.content)
    except orjson.JSONDecodeError as exc:
        raise ProtocolError(f"server sent invalid JSON: {exc}") from None


def _reply(response: httpx.Response) -> Reply:
    return Reply(
        status=response.status_code,
        content_type=response.headers.get("content-type", ""),
        content=response.content,
        headers=response.headers,
    )


@contextmanager
def _mapped_errors() -> Iterator[None]:
    try:
        yield
    except httpx.TimeoutException as exc:
        raise RequestTimeoutError(f"no reply within the timeout ({type(exc).__name__})") from exc
    except httpx.TransportError as exc:
        raise ConnectError(f"cannot reach the server: {exc or type(exc).__name__}") from exc
