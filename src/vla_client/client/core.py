"""The transport-free half of the clients: encode a request, read its reply, keep count.

`ActionClient` and `AsyncActionClient` differ only in how they wait for the transport; all
encoding, timing, id and deadline checking, error mapping and counting lives here once.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Literal, Protocol, runtime_checkable
from urllib.parse import urlsplit

from vla_client.client.result import ActionResult, Timings
from vla_client.codecs import frame_digest
from vla_client.errors import (
    CodecError,
    DeadlineExceededError,
    MismatchedReplyError,
    ProtocolError,
    RequestTimeoutError,
    ServerError,
    StaleObservationError,
)
from vla_client.observation import Observation
from vla_client.protocol import (
    CONTENT_TYPES,
    MSGPACK_CONTENT_TYPE,
    Encoding,
    Wire,
    dumps,
    loads,
    new_request_id,
    read_actions,
    wire_for_content_type,
)
from vla_client.protocol.request import build_flat_request, build_request
from vla_client.transports.base import Reply
from vla_client.transports.http import raise_for_status

TransportKind = Literal["http", "websocket"]


@dataclass(frozen=True)
class ClientOptions:
    """How a client encodes (image encoding, wire, JPEG quality, openpi's flat form) and when it
    gives up: observations older than `max_observation_age` seconds are not sent, and a reply
    more than `deadline` seconds after `infer` was called is not used."""

    encoding: Encoding = "png"
    wire: Wire = "json"
    jpeg_quality: int = 90
    flat: bool = False
    max_observation_age: float | None = None
    deadline: float | None = None

    def __post_init__(self) -> None:
        if self.encoding not in ("png", "jpeg", "raw", "pixels"):
            raise ValueError(f"encoding must be png, jpeg, raw or pixels, got {self.encoding!r}")
        if self.wire not in CONTENT_TYPES:
            raise ValueError(f"wire must be json or msgpack, got {self.wire!r}")
        if self.flat and self.wire != "msgpack":
            raise ValueError("openpi's flat observation travels as msgpack only")
        for name in ("max_observation_age", "deadline"):
            value = getattr(self, name)
            if value is not None and not value > 0:
                raise ValueError(f"{name} must be a positive number of seconds, got {value!r}")


@dataclass
class ClientStats:
    """What a client refused or threw away, so a control loop can see it happening.

    `late_replies` counts requests whose reply missed the deadline: discarded on arrival (HTTP),
    or not waited for (websocket, whose connection is then replaced so that reply is never read).
    """

    sent: int = 0
    stale_observations: int = 0
    mismatched_replies: int = 0
    late_replies: int = 0
    retries: int = 0


@runtime_checkable
class ReplyStream(Protocol):
    """A transport that can wait on its own and read on past a reply meant for another request."""

    def exchange(
        self, body: bytes, content_type: str, accept: str, *, timeout: float | None = None
    ) -> Reply: ...

    def receive(self, *, timeout: float | None = None) -> Reply: ...

    def reset(self) -> None:
        """Drop the connection; a server answers an error and then closes it."""


@runtime_checkable
class AsyncReplyStream(Protocol):
    """`ReplyStream` for asyncio."""

    async def exchange(
        self, body: bytes, content_type: str, accept: str, *, timeout: float | None = None
    ) -> Reply: ...

    async def receive(self, *, timeout: float | None = None) -> Reply: ...

    async def reset(self) -> None: ...


def transport_kind(base_url: str, transport: TransportKind | None) -> TransportKind:
    """`transport` if given, else by URL scheme: ``ws://``/``wss://`` mean websocket."""
    if transport is not None:
        if transport not in ("http", "websocket"):
            raise ValueError(f"transport must be 'http' or 'websocket', got {transport!r}")
        return transport
    return "websocket" if urlsplit(base_url).scheme in ("ws", "wss") else "http"


def resolve_options(
    *,
    websocket: bool,
    flat: bool,
    encoding: Encoding | None,
    wire: Wire | None,
    jpeg_quality: int,
    max_observation_age: float | None,
    deadline: float | None,
) -> ClientOptions:
    """Defaults per transport: websockets carry msgpack, openpi's endpoint raw ndarrays."""
    if websocket and wire == "json":
        raise ValueError("websocket frames are msgpack; leave wire unset or pass wire='msgpack'")
    return ClientOptions(
        encoding=encoding or ("raw" if flat else "png"),
        wire=wire or ("msgpack" if websocket else "json"),
        jpeg_quality=jpeg_quality,
        flat=flat,
        max_observation_age=max_observation_age,
        deadline=deadline,
    )


@dataclass(frozen=True)
class PreparedRequest:
    """An encoded request, ready for any transport."""

    body: bytes
    content_type: str
    accept: str
    request_id: str
    encode_ms: float
    deadline_at: float | None = None
    """`time.monotonic()` after which a reply is not used."""


def check_age(observation: Observation, max_age: float | None) -> None:
    """Raise `StaleObservationError` if the oldest frame is older than `max_age` seconds.

    Capture times are `time.monotonic()` seconds, as the cameras stamp them.
    """
    oldest = observation.oldest_capture_time
    if max_age is None or oldest is None:
        return
    age = time.monotonic() - oldest
    if age > max_age:
        raise StaleObservationError(age, max_age)


def prepare(
    observation: Observation,
    options: ClientOptions,
    parameters: Mapping[str, Any],
    runtime: Mapping[str, Any] | None,
    request_id: str | None = None,
) -> PreparedRequest:
    """Encode `observation` with `options`; the request gets `request_id` or a fresh id.

    Raises `StaleObservationError` for an observation older than `max_observation_age`.
    """
    if not isinstance(observation, Observation):
        raise TypeError(f"infer() takes an Observation, got {type(observation).__name__}")
    check_age(observation, options.max_observation_age)
    start = time.perf_counter()
    deadline_at = None if options.deadline is None else time.monotonic() + options.deadline
    request_id = request_id or new_request_id()
    if options.flat:
        if runtime:
            raise ValueError("openpi's flat observation has no runtime block; drop runtime options")
        payload: Any = build_flat_request(
            observation,
            encoding=options.encoding,
            request_id=request_id,
            parameters=parameters,
            jpeg_quality=options.jpeg_quality,
        )
    else:
        payload = build_request(
            observation,
            encoding=options.encoding,
            wire=options.wire,
            request_id=request_id,
            parameters=parameters,
            runtime=runtime,
            jpeg_quality=options.jpeg_quality,
        ).to_payload()
    body = dumps(payload, options.wire)
    content_type = CONTENT_TYPES[options.wire]
    return PreparedRequest(
        body=body,
        content_type=content_type,
        accept=content_type if options.wire == "msgpack" else "application/json",
        request_id=request_id,
        encode_ms=(time.perf_counter() - start) * 1000,
        deadline_at=deadline_at,
    )


def finish(prepared: PreparedRequest, reply: Reply, round_trip_ms: float) -> ActionResult:
    """Read `reply` into an `ActionResult`.

    Raises `ServerError` (an error status, or a websocket ``{"error": ...}`` map),
    `MismatchedReplyError` for a reply to another request, or `ProtocolError`.
    """
    raise_for_status(reply)
    start = time.perf_counter()
    try:
        wire = wire_for_content_type(reply.content_type or MSGPACK_CONTENT_TYPE)
        document = loads(reply.content, wire)
    except CodecError as exc:
        raise ProtocolError(f"cannot read the server's reply: {exc}") from None
    if isinstance(document, dict) and "error" in document and "actions" not in document:
        raise ServerError(500, str(document["error"]))
    actions, request_id = read_actions(document)
    if request_id is not None and request_id != prepared.request_id:
        raise MismatchedReplyError(
            f"reply is for request {request_id!r}, not the one sent ({prepared.request_id!r})"
        )
    decode_ms = (time.perf_counter() - start) * 1000
    server_timings = {**(document.get("timings") or {}), **(document.get("server_timing") or {})}
    return ActionResult(
        actions=actions,
        request_id=request_id or prepared.request_id,
        timings=Timings(
            encode_ms=prepared.encode_ms,
            round_trip_ms=round_trip_ms,
            decode_ms=decode_ms,
            bytes_sent=len(prepared.body),
            bytes_received=len(reply.content),
            server={k: float(v) for k, v in server_timings.items() if isinstance(v, int | float)},
        ),
        raw=document,
        digests=document.get("digests"),
    )


class RequestBook:
    """The bookkeeping both clients share: encode, deadline and age checks, counters."""

    def __init__(self, options: ClientOptions) -> None:
        self.options = options
        self.stats = ClientStats()

    def prepare(
        self,
        observation: Observation,
        parameters: Mapping[str, Any],
        runtime: Mapping[str, Any] | None,
        request_id: str | None,
    ) -> PreparedRequest:
        """`prepare`, counting sent requests and observations refused as too old."""
        try:
            prepared = prepare(observation, self.options, parameters, runtime, request_id)
        except StaleObservationError:
            self.stats.stale_observations += 1
            raise
        self.stats.sent += 1
        return prepared

    def budget(self, prepared: PreparedRequest) -> float | None:
        """Seconds left before the deadline (None: no deadline); raises once it has passed."""
        if prepared.deadline_at is None:
            return None
        left = prepared.deadline_at - time.monotonic()
        if left <= 0:
            self.stats.late_replies += 1
            raise DeadlineExceededError(f"request {prepared.request_id} is past its deadline")
        return left

    @contextmanager
    def waiting(self, prepared: PreparedRequest) -> Iterator[float | None]:
        """Yield the wait allowed for a reply; a timeout that hits the deadline is counted."""
        timeout = self.budget(prepared)
        try:
            yield timeout
        except RequestTimeoutError as exc:
            if timeout is None:
                raise
            self.stats.late_replies += 1
            raise DeadlineExceededError(
                f"no reply to {prepared.request_id} within its deadline of "
                f"{self.options.deadline:.3g} s"
            ) from exc

    def retried(self, error: Exception) -> None:
        """`on_retry` hook: count a retried attempt."""
        self.stats.retries += 1

    def finish(self, prepared: PreparedRequest, reply: Reply, round_trip_ms: float) -> ActionResult:
        """`finish`, counting (and raising for) a reply to another request or past the deadline."""
        try:
            result = finish(prepared, reply, round_trip_ms)
        except MismatchedReplyError:
            self.stats.mismatched_replies += 1
            raise
        if prepared.deadline_at is not None and time.monotonic() > prepared.deadline_at:
            self.stats.late_replies += 1
            raise DeadlineExceededError(
                f"reply to {prepared.request_id} came after its deadline of "
                f"{self.options.deadline:.3g} s; discarded"
            )
        return result


def runtime_options(
    runtime: Mapping[str, Any] | None, return_digest: bool
) -> dict[str, Any] | None:
    """Merge the `return_digest` shortcut into the runtime block."""
    if not return_digest:
        return dict(runtime) if runtime else None
    return {**(runtime or {}), "return_digest": True}


def mismatched_cameras(observation: Observation, result: ActionResult) -> list[str]:
    """Cameras whose decoded pixels on the server differ from what was sent (needs digests)."""
    if result.digests is None:
        raise ProtocolError("the reply carries no digests; send with return_digest=True")
    return [
        name
        for name, frame in observation.images.items()
        if result.digests.get(name) != frame_digest(frame)
    ]
