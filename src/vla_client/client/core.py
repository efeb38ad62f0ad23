"""The transport-free half of the clients: options, encoding a request, reading its reply, counts.

`ActionClient` and `AsyncActionClient` differ only in how they wait for their transport; the
encoding (`vla_client.protocol.encode_request`), the reading of every reply
(`vla_client.protocol.read_reply`), the deadline and age checks and the counters live here once.

Time words: every duration is in seconds and says so (``timeout_s``, ``deadline_s``,
``max_observation_age_s``); capture times are `time.monotonic()` seconds, as the cameras stamp
them.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Literal

from vla_client.client.result import ActionResult, Timings
from vla_client.errors import (
    DeadlineExceededError,
    MismatchedReplyError,
    RequestTimeoutError,
    StaleObservationError,
)
from vla_client.observation import Observation
from vla_client.protocol import (
    ENCODINGS,
    WIRES,
    Encoding,
    Reply,
    Wire,
    encode_request,
    new_request_id,
    read_actions,
    read_reply,
)

TransportKind = Literal["http", "websocket"]
TRANSPORT_KINDS: tuple[TransportKind, ...] = ("http", "websocket")


@dataclass(frozen=True)
class ClientOptions:
    """How a client encodes (image encoding, wire, JPEG quality, openpi's flat form) and when it
    gives up: observations older than `max_observation_age_s` are not sent, and a reply more
    than `deadline_s` after `infer` was called is not used."""

    encoding: Encoding = "png"
    wire: Wire = "json"
    jpeg_quality: int = 90
    flat: bool = False
    max_observation_age_s: float | None = None
    deadline_s: float | None = None

    def __post_init__(self) -> None:
        if self.encoding not in ENCODINGS:
            raise ValueError(
                f"encoding must be one of {', '.join(ENCODINGS)}; got {self.encoding!r}"
            )
        if self.wire not in WIRES:
            raise ValueError(f"wire must be one of {', '.join(WIRES)}; got {self.wire!r}")
        if isinstance(self.jpeg_quality, bool) or not 1 <= self.jpeg_quality <= 100:
            raise ValueError(f"jpeg_quality must be in 1..100, got {self.jpeg_quality!r}")
        if self.flat and self.wire != "msgpack":
            raise ValueError("openpi's flat observation travels as msgpack only")
        for name in ("max_observation_age_s", "deadline_s"):
            check_seconds(name, getattr(self, name), optional=True)


def check_seconds(name: str, value: float | None, *, optional: bool = False) -> None:
    """`ValueError` unless `value` is a positive number of seconds (or None, if `optional`)."""
    if value is None and optional:
        return
    if isinstance(value, bool) or not isinstance(value, int | float) or not value > 0:
        raise ValueError(f"{name} must be a positive number of seconds, got {value!r}")


@dataclass
class ClientStats:
    """What a client refused or threw away, so a control loop can see it happening.

    `late_replies` counts requests whose reply missed the deadline: discarded on arrival, or
    not waited for (a websocket connection is then replaced so that reply is never read).
    """

    sent: int = 0
    stale_observations: int = 0
    mismatched_replies: int = 0
    late_replies: int = 0
    retries: int = 0


def transport_kind(scheme: str, transport: str | None, endpoint: str | None) -> TransportKind:
    """`transport` if given, else websocket for ``ws(s)://`` URLs or a websocket `endpoint`."""
    if transport is not None:
        if transport not in TRANSPORT_KINDS:
            raise ValueError(
                f"transport must be one of {', '.join(TRANSPORT_KINDS)}; got {transport!r}"
            )
        if transport == "http" and endpoint is not None:
            raise ValueError("endpoint names a websocket endpoint; it does not apply to HTTP")
        return transport
    return "websocket" if scheme in ("ws", "wss") or endpoint is not None else "http"


def resolve_options(
    *,
    websocket: bool,
    flat: bool,
    encoding: Encoding | None,
    wire: Wire | None,
    jpeg_quality: int,
    max_observation_age_s: float | None,
    deadline_s: float | None,
) -> ClientOptions:
    """Defaults per transport: websockets carry msgpack, openpi's endpoint raw ndarrays."""
    if websocket and wire == "json":
        raise ValueError("websocket frames are msgpack; leave wire unset or pass wire='msgpack'")
    return ClientOptions(
        encoding=encoding or ("raw" if flat else "png"),
        wire=wire or ("msgpack" if websocket else "json"),
        jpeg_quality=jpeg_quality,
        flat=flat,
        max_observation_age_s=max_observation_age_s,
        deadline_s=deadline_s,
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


@dataclass(frozen=True)
class Received:
    """A reply that passed `read_reply`: the reply, its parsed document, and the parse time."""

    reply: Reply
    document: Any
    read_ms: float


def check_age(observation: Observation, max_age_s: float | None) -> None:
    """Raise `StaleObservationError` if the oldest frame is older than `max_age_s`."""
    oldest = observation.oldest_capture_time
    if max_age_s is None or oldest is None:
        return
    age_s = time.monotonic() - oldest
    if age_s > max_age_s:
        raise StaleObservationError(age_s, max_age_s)


def runtime_block(runtime: Mapping[str, Any] | None, return_digest: bool) -> dict[str, Any] | None:
    """The request's runtime block: `runtime`, with the `return_digest` shortcut merged in."""
    if not return_digest:
        return dict(runtime) if runtime else None
    return {**(runtime or {}), "return_digest": True}


class RequestBook:
    """What both clients do around a transport: encode, bound the waits, read, count.

    `timeout_s` is the client's own wait for a reply; a request with a deadline waits at most
    until its deadline, and a timeout that the deadline cut short is a `DeadlineExceededError`.
    """

    def __init__(self, options: ClientOptions, timeout_s: float) -> None:
        self.options = options
        self.timeout_s = timeout_s
        self.stats = ClientStats()

    def prepare(
        self,
        observation: Observation,
        parameters: Mapping[str, Any],
        runtime: Mapping[str, Any] | None,
        request_id: str | None,
    ) -> PreparedRequest:
        """Encode `observation`; the request gets `request_id` or a fresh id.

        Raises `StaleObservationError` for an observation older than ``max_observation_age_s``
        (counted), before anything is encoded.
        """
        if not isinstance(observation, Observation):
            raise TypeError(f"infer() takes an Observation, got {type(observation).__name__}")
        options = self.options
        try:
            check_age(observation, options.max_observation_age_s)
        except StaleObservationError:
            self.stats.stale_observations += 1
            raise
        start = time.perf_counter()
        deadline_at = None if options.deadline_s is None else time.monotonic() + options.deadline_s
        request_id = request_id or new_request_id()
        body, content_type = encode_request(
            observation,
            encoding=options.encoding,
            wire=options.wire,
            request_id=request_id,
            parameters=parameters,
            runtime=runtime,
            jpeg_quality=options.jpeg_quality,
            flat=options.flat,
        )
        self.stats.sent += 1
        return PreparedRequest(
            body=body,
            content_type=content_type,
            accept=content_type if options.wire == "msgpack" else "application/json",
            request_id=request_id,
            encode_ms=(time.perf_counter() - start) * 1000,
            deadline_at=deadline_at,
        )

    def budget(self, prepared: PreparedRequest) -> float | None:
        """Seconds left before the deadline (None: no deadline); raises once it has passed."""
        if prepared.deadline_at is None:
            return None
        left = prepared.deadline_at - time.monotonic()
        if left <= 0:
            self.stats.late_replies += 1
            raise DeadlineExceededError(
                f"request {prepared.request_id} is past its deadline",
                request_id=prepared.request_id,
            )
        return left

    @contextmanager
    def waiting(self, prepared: PreparedRequest) -> Iterator[float | None]:
        """Yield the wait for one reply: None (the transport's timeout) or the time left
        before the deadline when that is shorter; a timeout that hits the deadline is counted
        and raised as `DeadlineExceededError`."""
        budget = self.budget(prepared)
        limited = budget is not None and budget < self.timeout_s
        try:
            yield budget if limited else None
        except RequestTimeoutError as exc:
            if not limited:
                raise
            self.stats.late_replies += 1
            raise DeadlineExceededError(
                f"no reply to {prepared.request_id} within its deadline of "
                f"{self.options.deadline_s:.3g} s",
                request_id=prepared.request_id,
            ) from exc

    def retried(self, error: Exception) -> None:
        """`on_retry` hook: count a retried attempt."""
        self.stats.retries += 1

    def read(self, prepared: PreparedRequest, reply: Reply) -> Received:
        """The reply's document; `ServerError` or `ProtocolError` (see `read_reply`)."""
        start = time.perf_counter()
        document = read_reply(reply, request_id=prepared.request_id)
        return Received(reply, document, (time.perf_counter() - start) * 1000)

    def finish(
        self, prepared: PreparedRequest, received: Received, round_trip_ms: float
    ) -> ActionResult:
        """The `ActionResult` for the reply to `prepared`.

        Raises `MismatchedReplyError` for a reply to another request and
        `DeadlineExceededError` for one that came too late (both counted), `ProtocolError` for
        a reply without a usable chunk.
        """
        start = time.perf_counter()
        document = received.document
        actions, request_id = read_actions(document)
        if request_id is not None and request_id != prepared.request_id:
            self.stats.mismatched_replies += 1
            raise MismatchedReplyError(
                f"reply is for request {request_id!r}, not the one sent ({prepared.request_id!r})",
                request_id=prepared.request_id,
            )
        if prepared.deadline_at is not None and time.monotonic() > prepared.deadline_at:
            self.stats.late_replies += 1
            raise DeadlineExceededError(
                f"reply to {prepared.request_id} came after its deadline of "
                f"{self.options.deadline_s:.3g} s; discarded",
                request_id=prepared.request_id,
            )
        server_timings = {
            **(document.get("timings") or {}),
            **(document.get("server_timing") or {}),
        }
        return ActionResult(
            actions=actions,
            request_id=prepared.request_id,
            timings=Timings(
                encode_ms=prepared.encode_ms,
                round_trip_ms=round_trip_ms,
                decode_ms=received.read_ms + (time.perf_counter() - start) * 1000,
                bytes_sent=len(prepared.body),
                bytes_received=len(received.reply.content),
                server={
                    k: float(v) for k, v in server_timings.items() if isinstance(v, int | float)
                },
            ),
            raw=document,
            digests=document.get("digests"),
        )
