"""HTTP transports over httpx, sync and async, with httpx's errors mapped to ours.

One pooled keep-alive connection per client: a new TCP connection per request would add a
handshake to every control tick. A connection that could not be opened (refused, DNS, connect
timeout) is a `ConnectError` with ``sent=False``: the request never left, so a retry cannot run
the policy twice. Any later failure may have reached the server and is ``sent=True``.

Two bounds hold against any server. The transport's `timeout_s` bounds every read; the
`timeout_s` given to one `exchange` (the client's deadline) bounds the whole exchange, connect,
headers and body, so a server dripping a byte a second cannot hold a call past it. And no reply
is read past `max_reply_bytes` (`ReplyTooLargeError`): an endless chunked body is cut off.
"""

from __future__ import annotations

import asyncio
import time
from abc import abstractmethod
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any, Generic, TypeVar
from urllib.parse import urlsplit, urlunsplit

import httpcore
import httpx

from vla_client.errors import ConnectError, ReplyTooLargeError, RequestTimeoutError
from vla_client.protocol import (
    GENERATIONS_PATH,
    METADATA_PATH,
    REPLY_SIZE_FLOOR,
    Reply,
    auth_headers,
    read_reply,
    reply_size_limit,
)
from vla_client.validation import check_positive

ClientT = TypeVar("ClientT", httpx.Client, httpx.AsyncClient)

_exchange_ends_at: ContextVar[float | None] = ContextVar("exchange_ends_at", default=None)
"""`time.monotonic()` by which the current blocking exchange must end (None: no bound)."""


class _HTTPBase(Generic[ClientT]):
    """What the sync and async transports share: options, headers, URLs and the reply size cap.

    `max_reply_bytes` caps every reply; None sizes it from the metadata the server announces
    (`vla_client.protocol.reply_size_limit`, at least `REPLY_SIZE_FLOOR` bytes).
    """

    def __init__(
        self, base_url: str, *, timeout_s: float = 10.0, api_key: str | None = None,
        headers: dict[str, str] | None = None, max_reply_bytes: int | None = None,
    ) -> None:  # fmt: skip
        check_positive("timeout_s", timeout_s)
        check_positive("max_reply_bytes", max_reply_bytes, integer=True, allow_none=True)
        self.max_reply_bytes = max_reply_bytes
        self._announced_reply_bytes = REPLY_SIZE_FLOOR
        self._url = base_url.rstrip("/")
        self._timeout_s = timeout_s
        self._client: ClientT = self._new_client(
            base_url=base_url.rstrip("/"),
            timeout=timeout_s,
            headers={**auth_headers(api_key), **(headers or {})},
        )
        self._urls = _endpoint_urls(self._client.base_url)

    @staticmethod
    @abstractmethod
    def _new_client(**options: Any) -> ClientT:
        """The httpx client with `options`, that holds the connection pool."""

    @property
    def reply_limit(self) -> int:
        """The cap on the next reply, in bytes."""
        return self.max_reply_bytes or self._announced_reply_bytes

    def _metadata_read(self, reply: Reply) -> Any:
        document = read_reply(reply)
        self._announced_reply_bytes = reply_size_limit(document)
        return document


class HTTPTransport(_HTTPBase[httpx.Client]):
    """Blocking HTTP transport on an `httpx.Client`; `timeout_s` bounds every read."""

    @staticmethod
    def _new_client(**options: Any) -> httpx.Client:
        return httpx.Client(transport=_bounded_transport(), **options)

    def metadata(self, *, timeout_s: float | None = None) -> Any:
        return self._metadata_read(self._send("GET", METADATA_PATH, {}, None, timeout_s))

    def exchange(
        self, body: bytes, content_type: str, accept: str, *, timeout_s: float | None = None
    ) -> Reply:
        headers = {"Content-Type": content_type, "Accept": accept}
        return self._send("POST", GENERATIONS_PATH, headers, body, timeout_s)

    def _send(
        self, method: str, path: str, headers: dict[str, str], body: bytes | None,
        timeout_s: float | None,
    ) -> Reply:  # fmt: skip
        check_positive("timeout_s", timeout_s, allow_none=True)
        limit = _BodyLimit(self.reply_limit)
        bound = _exchange_ends_at.set(None if timeout_s is None else time.monotonic() + timeout_s)
        try:
            with (
                _mapped_errors(self._url, self._timeout_s),
                self._client.stream(
                    method, self._urls[path], content=body, headers=headers
                ) as response,
            ):
                limit.check_declared(response.headers)
                content = b"".join(limit.counted(chunk) for chunk in response.iter_bytes())
        finally:
            _exchange_ends_at.reset(bound)
        return _reply(response, content)

    def close(self) -> None:
        self._client.close()


class AsyncHTTPTransport(_HTTPBase[httpx.AsyncClient]):
    """asyncio HTTP transport on an `httpx.AsyncClient`."""

    @staticmethod
    def _new_client(**options: Any) -> httpx.AsyncClient:
        return httpx.AsyncClient(**options)

    async def metadata(self, *, timeout_s: float | None = None) -> Any:
        return self._metadata_read(await self._send("GET", METADATA_PATH, {}, None, timeout_s))

    async def exchange(
        self, body: bytes, content_type: str, accept: str, *, timeout_s: float | None = None
    ) -> Reply:
        headers = {"Content-Type": content_type, "Accept": accept}
        return await self._send("POST", GENERATIONS_PATH, headers, body, timeout_s)

    async def _send(
        self, method: str, path: str, headers: dict[str, str], body: bytes | None,
        timeout_s: float | None,
    ) -> Reply:  # fmt: skip
        check_positive("timeout_s", timeout_s, allow_none=True)
        limit = _BodyLimit(self.reply_limit)

        async def exchange() -> Reply:
            chunks: list[bytes] = []
            with _mapped_errors(self._url, self._timeout_s):
                async with self._client.stream(
                    method, self._urls[path], content=body, headers=headers
                ) as response:
                    limit.check_declared(response.headers)
                    async for chunk in response.aiter_bytes():
                        chunks.append(limit.counted(chunk))
            return _reply(response, b"".join(chunks))

        try:
            # wait_for, not asyncio.timeout (3.11+); its TimeoutError is asyncio's on 3.10
            return await asyncio.wait_for(exchange(), timeout_s)
        except asyncio.TimeoutError:
            raise RequestTimeoutError(_TOO_SLOW.format(timeout_s)) from None

    async def close(self) -> None:
        await self._client.aclose()


_TOO_SLOW = "no complete reply within {:.3g} s"


def _endpoint_urls(base_url: httpx.URL) -> dict[str, httpx.URL]:
    """The metadata and generations URLs under `base_url`, joined once per transport as httpx
    joins a path to its client's base URL (its path, then the path's): httpx parses a path
    given as text again on every request, which costs more than the rest of building it."""
    return {
        path: base_url.copy_with(raw_path=base_url.raw_path + path.lstrip("/").encode())
        for path in (METADATA_PATH, GENERATIONS_PATH)
    }


class _BodyLimit:
    """Counts a reply's body against its cap, and refuses a declared length over it."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.size = 0

    def check_declared(self, headers: Mapping[str, str]) -> None:
        declared = headers.get("content-length", "")
        if declared.isdigit() and int(declared) > self.limit:
            raise ReplyTooLargeError(self.limit, f"the reply's declared {declared} bytes")

    def counted(self, chunk: bytes) -> bytes:
        self.size += len(chunk)
        if self.size > self.limit:
            raise ReplyTooLargeError(self.limit)
        return chunk


def _reply(response: httpx.Response, content: bytes) -> Reply:
    return Reply(
        status=response.status_code,
        content_type=response.headers.get("content-type", ""),
        content=content,
        headers=response.headers,
    )


def _bounded_transport() -> httpx.HTTPTransport:
    """httpx's transport, with every socket wait also cut at the exchange's end.

    httpx's timeouts are per read; a read that returns a byte resets them. The blocking
    client has no other way to stop a call at a wall-clock time, so its connection pool's
    network backend is wrapped (`_BoundedBackend`): each connect, read and write waits at most
    until `_exchange_ends_at`. (The asyncio client cancels the call instead.)
    """
    transport = httpx.HTTPTransport()
    pool = transport._pool
    if not isinstance(pool, httpcore.ConnectionPool):  # pragma: no cover - httpx internals
        raise RuntimeError(f"httpx {httpx.__version__}: unexpected connection pool {pool!r}")
    pool._network_backend = _BoundedBackend(pool._network_backend)
    return transport


def _bounded(timeout: float | None, error: type[Exception]) -> float | None:
    """`timeout`, shortened to the time left before the exchange's end; `error` once it passed."""
    ends_at = _exchange_ends_at.get()
    if ends_at is None:
        return timeout
    left = ends_at - time.monotonic()
    if left <= 0:
        raise error("the exchange's time is up")
    return left if timeout is None else min(timeout, left)


class _BoundedStream(httpcore.NetworkStream):
    """A network stream whose every wait ends by the exchange's end."""

    def __init__(self, stream: httpcore.NetworkStream) -> None:
        self._stream = stream

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        return self._stream.read(max_bytes, _bounded(timeout, httpcore.ReadTimeout))

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        # httpcore's streams send what the socket takes and slice off the rest: a slice of
        # bytes is a copy, so a 2 MB body the socket takes 64 KB at a time would be copied
        # over and over (tens of MB). A memoryview's slices are views of the one body.
        view: Any = memoryview(buffer)  # every stream writes any bytes-like buffer
        self._stream.write(view, _bounded(timeout, httpcore.WriteTimeout))

    def close(self) -> None:
        self._stream.close()

    def start_tls(
        self, ssl_context: Any, server_hostname: str | None = None, timeout: float | None = None
    ) -> httpcore.NetworkStream:
        wait = _bounded(timeout, httpcore.ConnectTimeout)
        return _BoundedStream(self._stream.start_tls(ssl_context, server_hostname, wait))

    def get_extra_info(self, info: str) -> Any:
        return self._stream.get_extra_info(info)


class _BoundedBackend(httpcore.NetworkBackend):
    """Opens `_BoundedStream` connections on `backend`."""

    def __init__(self, backend: httpcore.NetworkBackend) -> None:
        self._backend = backend

    def connect_tcp(
        self, host: str, port: int, timeout: float | None = None,
        local_address: str | None = None, socket_options: Any = None,
    ) -> httpcore.NetworkStream:  # fmt: skip
        wait = _bounded(timeout, httpcore.ConnectTimeout)
        return _BoundedStream(
            self._backend.connect_tcp(host, port, wait, local_address, socket_options)
        )

    def connect_unix_socket(
        self, path: str, timeout: float | None = None, socket_options: Any = None
    ) -> httpcore.NetworkStream:
        wait = _bounded(timeout, httpcore.ConnectTimeout)
        return _BoundedStream(self._backend.connect_unix_socket(path, wait, socket_options))

    def sleep(self, seconds: float) -> None:
        self._backend.sleep(seconds)


@contextmanager
def _mapped_errors(url: str, timeout_s: float) -> Iterator[None]:
    """httpx's errors as ours, each naming `url` and, where there is one, the fix."""
    try:
        yield
    except (httpx.ConnectError, httpx.ConnectTimeout) as exc:
        raise ConnectError(unreachable(url, exc), sent=False) from exc
    except httpx.TimeoutException as exc:
        raise RequestTimeoutError(
            f"no reply from {url} within {timeout_s:g} s ({type(exc).__name__}); {LONGER_TIMEOUT}"
        ) from exc
    except httpx.TransportError as exc:
        raise ConnectError(f"connection to {url} failed: {_describe(exc)}") from exc


LONGER_TIMEOUT = "wait longer with timeout_s= (--timeout on the command line)"


def unreachable(url: str, exc: BaseException) -> str:
    """Why a connection to `url` did not open, and what to do: a refused connection names the
    port nothing listens on, TLS spoken to a plain-HTTP server says to use ``http://``, a web
    server that answers a websocket handshake with something else than HTTP/1.1 is called what
    it is. The same words for every client and transport: the reason is looked for down the
    chain of causes (asyncio's clients raise ``All connection attempts failed`` or
    ``Connect call failed`` above the refusal)."""
    chain = _causes(exc)
    text = _describe(exc)
    parts = urlsplit(url)
    if "WRONG_VERSION_NUMBER" in text and parts.scheme in ("https", "wss"):
        plain = urlunsplit(("http" if parts.scheme == "https" else "ws", *parts[1:]))
        return f"{url}: the server speaks plain HTTP, not TLS; use {plain}"
    if any(
        isinstance(e, ConnectionRefusedError) or "refused" in _describe(e).lower() for e in chain
    ):
        port = parts.port or (443 if parts.scheme in ("https", "wss") else 80)
        return (
            f"cannot reach the server at {url}: connection refused, nothing listens on port "
            f"{port} of {parts.hostname}; start one there ('vla-client serve --port {port}') "
            "or give the URL of a running one"
        )
    if _NOT_HTTP_11 in text and len(chain) > 1:  # websockets' words for a reply it cannot read
        answer = _describe(chain[1]).partition(": ")[2]  # websockets: "<why>: <status line>"
        return (
            f"{url} is not a websocket server: it answered the websocket handshake with "
            f"{answer!r}, as an ordinary web server does; give the URL of a VLA server's "
            "websocket (vla-client serve's ws://HOST:PORT, openpi's server, SGLang's "
            "/v1/actions/realtime)"
        )
    return f"cannot reach the server at {url}: {text}"


_NOT_HTTP_11 = "did not receive a valid HTTP response"


def _causes(exc: BaseException) -> list[BaseException]:
    """`exc` and the exceptions it was raised from, outermost first."""
    chain = [exc]
    while (
        cause := chain[-1].__cause__ or chain[-1].__context__
    ) is not None and cause not in chain:
        chain.append(cause)
    return chain


def _describe(exc: BaseException) -> str:
    return str(exc) or type(exc).__name__
