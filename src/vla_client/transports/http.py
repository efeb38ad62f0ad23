"""HTTP transports over httpx, sync and async, with httpx's errors mapped to ours.

One pooled keep-alive connection per client: a new TCP connection per request would add a
handshake to every control tick. A connection that could not be opened (refused, DNS, connect
timeout) is a `ConnectError` with ``sent=False``: the request never left, so a retry cannot run
the policy twice. Any later failure may have reached the server and is ``sent=True``.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import httpx

from vla_client.errors import ConnectError, RequestTimeoutError
from vla_client.protocol import GENERATIONS_PATH, METADATA_PATH, Reply, auth_headers, read_reply
from vla_client.validation import check_positive, renamed_keywords


class HTTPTransport:
    """Blocking HTTP transport on an `httpx.Client`; `timeout_s` bounds every request."""

    @renamed_keywords(timeout="timeout_s")  # the 0.1.0 name
    def __init__(
        self, base_url: str, *, timeout_s: float = 10.0, api_key: str | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:  # fmt: skip
        check_positive("timeout_s", timeout_s)
        self._client = httpx.Client(
            base_url=base_url.rstrip("/"),
            timeout=timeout_s,
            headers={**auth_headers(api_key), **(headers or {})},
        )

    def metadata(self, *, timeout_s: float | None = None) -> Any:
        with _mapped_errors():
            response = self._client.get(METADATA_PATH, timeout=_timeout(timeout_s))
        return read_reply(_reply(response))

    def exchange(
        self, body: bytes, content_type: str, accept: str, *, timeout_s: float | None = None
    ) -> Reply:
        with _mapped_errors():
            response = self._client.post(
                GENERATIONS_PATH,
                content=body,
                headers={"Content-Type": content_type, "Accept": accept},
                timeout=_timeout(timeout_s),
            )
        return _reply(response)

    def close(self) -> None:
        self._client.close()


class AsyncHTTPTransport:
    """asyncio HTTP transport on an `httpx.AsyncClient`."""

    @renamed_keywords(timeout="timeout_s")  # the 0.1.0 name
    def __init__(
        self, base_url: str, *, timeout_s: float = 10.0, api_key: str | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:  # fmt: skip
        check_positive("timeout_s", timeout_s)
        self._client = httpx.AsyncClient(
            base_url=base_url.rstrip("/"),
            timeout=timeout_s,
            headers={**auth_headers(api_key), **(headers or {})},
        )

    async def metadata(self, *, timeout_s: float | None = None) -> Any:
        with _mapped_errors():
            response = await self._client.get(METADATA_PATH, timeout=_timeout(timeout_s))
        return read_reply(_reply(response))

    async def exchange(
        self, body: bytes, content_type: str, accept: str, *, timeout_s: float | None = None
    ) -> Reply:
        with _mapped_errors():
            response = await self._client.post(
                GENERATIONS_PATH,
                content=body,
                headers={"Content-Type": content_type, "Accept": accept},
                timeout=_timeout(timeout_s),
            )
        return _reply(response)

    async def close(self) -> None:
        await self._client.aclose()


def _timeout(timeout_s: float | None) -> Any:
    return httpx.USE_CLIENT_DEFAULT if timeout_s is None else httpx.Timeout(timeout_s)


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
    except (httpx.ConnectError, httpx.ConnectTimeout) as exc:
        raise ConnectError(f"cannot reach the server: {_describe(exc)}", sent=False) from exc
    except httpx.TimeoutException as exc:
        raise RequestTimeoutError(f"no reply within the timeout ({type(exc).__name__})") from exc
    except httpx.TransportError as exc:
        raise ConnectError(f"connection failed: {_describe(exc)}") from exc


def _describe(exc: Exception) -> str:
    return str(exc) or type(exc).__name__
