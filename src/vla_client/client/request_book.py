"""The transport-free half of the clients: encoding a request, reading its reply, counting.

`ActionClient` and `AsyncActionClient` differ only in how they wait for their transport; the
encoding (`vla_client.protocol.encode_request`), the reading of every reply
(`vla_client.protocol.read_reply`), the fitting, the deadline and age checks and the counters
live here once, in `RequestBook`, which every server family's session
(`vla_client.client.session`) uses around its own messages. Nothing here does I/O. The options
it works by are `vla_client.client.options`'s.

Time words: every duration is in seconds and says so (``timeout_s``, ``deadline_s``,
``max_observation_age_s``); capture times are `time.monotonic()` seconds, as the cameras stamp
them.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from functools import partial
from typing import Any

import numpy as np

from vla_client.client.fit import Fit, FramePreprocessor
from vla_client.client.options import ClientOptions, fill_in
from vla_client.client.result import ActionResult, Timings
from vla_client.codecs import frame_digest
from vla_client.errors import (
    CodecError,
    ConnectError,
    ContractError,
    DeadlineExceededError,
    MismatchedReplyError,
    ProtocolError,
    RequestTimeoutError,
    StaleObservationError,
)
from vla_client.observation import Observation
from vla_client.protocol import (
    ActionMetadata,
    Encoding,
    LayoutFunction,
    OpenpiLayout,
    Reply,
    Wire,
    encode_request,
    new_request_id,
    read_actions,
    read_reply,
)
from vla_client.protocol.ipc import SharedFrames, encode_request_apart
from vla_client.transports.drive import Offload, Steps

_TIMER_SLACK_S = 1e-3
"""How early a transport's timer may fire (event loops round to their clock's resolution): a
timeout this close to the deadline is the deadline's."""


@dataclass
class ClientStats:
    """What a client refused or threw away, so a control loop can see it happening.

    `late_replies` counts requests whose reply missed the deadline: discarded on arrival, or
    not waited for (a websocket connection is then replaced so that reply is never read).
    `dropped_connections` counts the websocket connections dropped (or found closed by the
    server) and opened again, by reason (`vla_client.transports.websocket.DropReason`): on a
    connection whose replies carry no request id, a frame that arrived unasked, an error frame
    or a reply that could not be read; on any, a timeout, a cancelled call, a server's close.
    """

    sent: int = 0
    stale_observations: int = 0
    mismatched_replies: int = 0
    late_replies: int = 0
    retries: int = 0
    dropped_connections: dict[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class PreparedRequest:
    """An encoded request, ready for any transport."""

    body: bytes
    content_type: str
    accept: str
    request_id: str
    fit_ms: float
    encode_ms: float
    deadline_at: float | None = None
    """`time.monotonic()` after which a reply is not used."""
    sent_digests: dict[str, dict[str, Any]] | None = None
    """With ``return_digest``: the digest of each frame as sent, after the fit (renamed and
    resized), which is what the server's digests are of."""
    frames: SharedFrames | None = None
    """Over ``ipc://``: the fitted frames (colour and depth), which travel apart from `body`, in
    shared memory."""


@dataclass
class Exchange:
    """One exchange as `RequestBook.exchanging` times it: the most it may take (None: no
    deadline), its `time.perf_counter()` start, and, once it has ended, its round trip."""

    timeout_s: float | None
    started: float
    round_trip_ms: float = 0.0


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


def refuse_runtime(runtime: Mapping[str, Any] | None) -> None:
    """`ValueError` for a runtime block (`runtime_block`) sent to a server family that has no
    place for one (every family but the action API's)."""
    if runtime:
        raise ValueError("this server takes no runtime options or digests")


class RequestBook:
    """What every server family's session does around its messages: fit, encode, bound the
    waits, read, count. Nothing here does I/O.

    A request with a deadline gives its transport the time left, which bounds the whole
    exchange; a timeout at the deadline is a `DeadlineExceededError`.
    """

    def __init__(
        self,
        options: ClientOptions,
        *,
        websocket: bool = False,
        openpi: bool = False,
        own_msgpack: str | None = None,
        ipc: bool = False,
    ) -> None:
        self.options = options = fill_in(
            options, websocket=websocket, openpi=openpi, own_msgpack=own_msgpack, ipc=ipc
        )
        self._frames_apart = ipc
        """``ipc://``: the frames travel in shared memory, the body without them."""
        self.stats = ClientStats()
        layout = options.layout
        assert options.encoding and options.wire and not isinstance(layout, str)  # resolved
        self._encode_as: tuple[Encoding, Wire, OpenpiLayout | LayoutFunction | None] = (
            options.encoding, options.wire, layout,
        )  # fmt: skip
        self._layout_size = layout.image_size if isinstance(layout, OpenpiLayout) else None
        """The size openpi's example client for the layout resizes to: used by an explicit
        ``resize`` when neither `image_size` nor the server gives one."""
        self._own_fit = FramePreprocessor(
            size=options.image_size or self._layout_fallback(),
            fit="pad" if options.resize == "auto" else options.resize,
            camera_map=options.camera_map,
        )
        self._fitted: tuple[ActionMetadata, FramePreprocessor] | None = None

    def deadline_at(self) -> float | None:
        """`time.monotonic()` after which a request starting now gets no reply."""
        deadline_s = self.options.deadline_s
        return None if deadline_s is None else time.monotonic() + deadline_s

    def fitter(self, metadata: ActionMetadata | None) -> FramePreprocessor:
        """What fits observations to the server's `metadata` (None: to the options alone).

        Built once per metadata document, so once per connection on a websocket. Raises
        `ContractError` when ``resize`` is ``pad`` or ``crop`` and no size is known from
        anywhere (the options, the server, the openpi layout): resizing to nothing would send
        the frames as they are, unasked.
        """
        if metadata is None:
            return self._checked(self._own_fit)
        if self._fitted is not None and self._fitted[0] is metadata:
            return self._fitted[1]
        options = self.options
        fitter = FramePreprocessor.from_metadata(metadata, options.camera_map, "none")
        fit: Fit = options.resize if options.resize != "auto" else "none"
        if options.resize == "auto" and (fitter.size_required or options.image_size):
            fit = "pad"
        size = options.image_size or fitter.size or self._layout_fallback()
        fitter = self._checked(replace(fitter, fit=fit, size=size))
        self._fitted = (metadata, fitter)
        return fitter

    def _layout_fallback(self) -> tuple[int, int] | None:
        """The layout's size when ``resize`` asks for a resize explicitly (``auto`` resizes only
        to a size the options or the server give), else None."""
        return self._layout_size if self.options.resize in ("pad", "crop") else None

    def _checked(self, fitter: FramePreprocessor) -> FramePreprocessor:
        """`fitter`, unless ``resize`` asks for a resize it has no size for (`ContractError`)."""
        resize = self.options.resize
        if resize in ("pad", "crop") and fitter.size is None:
            raise ContractError(
                "input.image_size",
                "an image size to resize to",
                f"none known (resize={resize!r})",
                "the server announces none and neither image_size nor the openpi layout gives "
                "one; pass image_size=(height, width), or resize='none' to send frames as they are",
            )
        return fitter

    def prepare(
        self,
        observation: Observation,
        parameters: Mapping[str, Any],
        runtime: Mapping[str, Any] | None,
        request_id: str | None,
        *,
        fitter: FramePreprocessor,
        deadline_at: float | None,
    ) -> PreparedRequest:
        """Fit `observation` with `fitter`, encode it; the request gets `request_id` or a
        fresh id.

        Raises `StaleObservationError` for an observation older than ``max_observation_age_s``
        (counted) and `ContractError` for one that does not fit, before anything is encoded.
        """
        encoding, wire, layout = self._encode_as
        request_id = request_id or new_request_id()
        digested = runtime is not None and runtime.get("return_digest") is True
        if self._frames_apart:
            apart = partial(
                encode_request_apart, request_id=request_id, parameters=parameters,
                runtime=runtime,
            )  # fmt: skip
            return self.prepare_message(
                observation, fitter, apart, request_id, deadline_at, digested=digested,
                frames_apart=True,
            )  # fmt: skip
        encode = partial(
            encode_request,
            encoding=encoding,
            wire=wire,
            # openpi's requests have no place for an id: they carry the layout's keys only, and
            # its replies are matched by their order on the connection
            request_id=None if layout is not None else request_id,
            parameters=parameters,
            runtime=runtime,
            jpeg_quality=self.options.jpeg_quality,
            openpi=layout,
        )
        return self.prepare_message(
            observation, fitter, encode, request_id, deadline_at, digested=digested
        )

    def prepare_message(
        self,
        observation: Observation,
        fitter: FramePreprocessor,
        encode: Callable[[Observation], tuple[bytes, str]],
        request_id: str | None,
        deadline_at: float | None,
        *,
        digested: bool = False,
        frames_apart: bool = False,
    ) -> PreparedRequest:
        """`observation` fitted with `fitter` and made a request body by `encode` (which
        returns the body and its content type: the action API's `encode_request`, a server
        family's own message); the request gets `request_id` or a fresh id, and with
        `digested` the digests of the frames as sent. With `frames_apart` the fitted frames
        travel beside the body (``ipc://``: `encode` leaves them out).

        Raises `StaleObservationError` for an observation older than ``max_observation_age_s``
        (counted) and `ContractError` for one that does not fit, before anything is encoded.
        """
        observation, fit_ms = self.fitted(observation, fitter)
        start = time.perf_counter()
        body, content_type = encode(observation)
        self.stats.sent += 1
        return PreparedRequest(
            body=body,
            content_type=content_type,
            accept=content_type,
            request_id=request_id or new_request_id(),
            fit_ms=fit_ms,
            encode_ms=(time.perf_counter() - start) * 1000,
            deadline_at=deadline_at,
            sent_digests=(
                {
                    name: frame_digest(frame)
                    for name, frame in {**observation.images, **observation.depth}.items()
                }
                if digested
                else None
            ),
            frames=(SharedFrames(observation.images, observation.depth) if frames_apart else None),
        )

    def fitted(
        self, observation: Observation, fitter: FramePreprocessor
    ) -> tuple[Observation, float]:
        """`observation` fitted with `fitter`, and the milliseconds that took; refused first
        when it is not an `Observation` (`TypeError`) or is older than
        ``max_observation_age_s`` (`StaleObservationError`, counted)."""
        if not isinstance(observation, Observation):
            raise TypeError(f"infer() takes an Observation, got {type(observation).__name__}")
        try:
            check_age(observation, self.options.max_observation_age_s)
        except StaleObservationError:
            self.stats.stale_observations += 1
            raise
        start = time.perf_counter()
        fitted = fitter(observation)
        return fitted, (time.perf_counter() - start) * 1000

    def check_in_time(self, prepared: PreparedRequest) -> None:
        """`DeadlineExceededError` (counted) for a reply to `prepared` that came after its
        deadline: it is discarded."""
        if prepared.deadline_at is not None and time.monotonic() > prepared.deadline_at:
            self.stats.late_replies += 1
            raise DeadlineExceededError(
                f"reply to {prepared.request_id} came after its deadline of "
                f"{self.options.deadline_s:.3g} s; discarded",
                request_id=prepared.request_id,
            )

    def wait_until(self, deadline_at: float | None) -> float | None:
        """The most a call may take before `deadline_at` (None: no deadline, the transport's
        timeouts alone); raises `DeadlineExceededError` once the deadline has passed."""
        if deadline_at is None:
            return None
        left = deadline_at - time.monotonic()
        if left <= 0:
            self.stats.late_replies += 1
            raise DeadlineExceededError("the request's deadline passed before it was sent")
        return left

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
        """Yield the most one exchange may take: None without a deadline, else the time left
        before it, which the transport holds the whole exchange to (body included; its own
        timeout still bounds each read). A timeout at the deadline is a
        `DeadlineExceededError` (see `bounded_by`)."""
        budget = self.budget(prepared)
        with self.bounded_by(prepared.deadline_at, f"reply to {prepared.request_id}",
                             request_id=prepared.request_id):  # fmt: skip
            yield budget

    @contextmanager
    def bounded_by(
        self, deadline_at: float | None, awaited: str, *, request_id: str | None = None
    ) -> Iterator[None]:
        """Run a call the transport was given the time left before `deadline_at` for: a
        timeout, or a connection that did not open in time (a silent websocket handshake),
        raised once the deadline has passed is counted and raised as `DeadlineExceededError`
        ("no `awaited` within its deadline"); one raised before it as it came, since the
        transport's own timeout ended it (a read that timed out, a refused connection)."""
        try:
            yield
        except (RequestTimeoutError, ConnectError) as exc:
            if deadline_at is None or time.monotonic() < deadline_at - _TIMER_SLACK_S:
                raise
            self.stats.late_replies += 1
            raise DeadlineExceededError(
                f"no {awaited} within its deadline of {self.options.deadline_s:.3g} s",
                request_id=request_id,
            ) from exc

    def message_round(
        self,
        observation: Observation,
        metadata: ActionMetadata,
        request_id: str | None,
        deadline_at: float | None,
        encode: Callable[[Observation], tuple[bytes, str]],
        exchange: Callable[[bytes, float | None], Steps[tuple[Any, int]]],
        read: Callable[[Any], tuple[np.ndarray, dict[str, slice] | None, dict[str, Any]]],
    ) -> Steps[ActionResult]:
        """One request to a server family with messages of its own (GR00T's, the dialects'),
        as steps: `observation` fitted to `metadata` (unless ``check_contract`` is off) and
        made a message by `encode` (in a worker thread, under asyncio), sent and answered by
        the family's `exchange` steps (the answer and its size in bytes) within the deadline,
        and the answer read by `read` (the actions, their keys, the reply as `raw`). These
        messages carry no depth: an observation with depth frames is refused (`CodecError`)."""
        if isinstance(observation, Observation) and observation.depth:
            raise CodecError(
                "this server family's messages carry no depth frames "
                f"({', '.join(observation.depth)}); depth travels on the action API (HTTP, "
                "the /v1/actions/realtime websocket or ipc://)"
            )
        fitter = self.fitter(metadata if self.options.check_contract else None)
        prepared = yield Offload(
            partial(self.prepare_message, observation, fitter, encode, request_id, deadline_at)
        )
        with self.exchanging(prepared) as timed:
            answer, bytes_received = yield from exchange(prepared.body, timed.timeout_s)
        start = time.perf_counter()
        actions, action_keys, raw = read(answer)
        return self.result(
            prepared,
            actions,
            round_trip_ms=timed.round_trip_ms,
            decode_ms=(time.perf_counter() - start) * 1000,
            bytes_received=bytes_received,
            raw=raw,
            action_keys=action_keys,
        )

    @contextmanager
    def exchanging(self, prepared: PreparedRequest) -> Iterator[Exchange]:
        """One timed exchange of `prepared`: `waiting`'s bound (the `Exchange`'s
        `timeout_s`), its `round_trip_ms` set when it ends, and an answer that came after the
        deadline counted and raised (`check_in_time`)."""
        with self.waiting(prepared) as timeout_s:
            exchange = Exchange(timeout_s, time.perf_counter())
            yield exchange
        exchange.round_trip_ms = (time.perf_counter() - exchange.started) * 1000
        self.check_in_time(prepared)

    def retried(self, error: Exception) -> None:
        """`on_retry` hook: count a retried attempt."""
        self.stats.retries += 1

    def dropped(self, reason: str) -> None:
        """A websocket transport's `on_drop` hook: count a connection dropped for `reason`."""
        counts = self.stats.dropped_connections
        counts[reason] = counts.get(reason, 0) + 1

    def read(self, prepared: PreparedRequest, reply: Reply) -> Received:
        """The reply's document; `ServerError` or `ProtocolError` (see `read_reply`)."""
        start = time.perf_counter()
        document = read_reply(reply, request_id=prepared.request_id)
        return Received(reply, document, (time.perf_counter() - start) * 1000)

    def result_for(
        self,
        prepared: PreparedRequest,
        received: Received,
        round_trip_ms: float,
        *,
        can_skip: bool = False,
    ) -> ActionResult | None:
        """The `ActionResult` for the reply to `prepared`, or None for a reply to another
        request that the connection can read past (`can_skip`: a websocket, whose replies
        arrive in order, so the one for `prepared` may still come).

        A reply must carry the request's id, except on openpi's endpoint, whose protocol has
        none (a reply there with an id must carry this one). A reply to another request is
        counted in ``mismatched_replies`` and, where it cannot be skipped, raised as
        `MismatchedReplyError`; one that came too late is counted and raised as
        `DeadlineExceededError`; one without a usable chunk is a `ProtocolError`.
        """
        start = time.perf_counter()
        document = received.document
        actions, request_id = read_actions(document)
        if self.options.layout is None:  # openpi's endpoint carries no id: order matches there
            if request_id is None:
                raise ProtocolError(
                    f"reply carries no request id; request {prepared.request_id} sent one, and "
                    "a reply that cannot say which request it answers is not used",
                    request_id=prepared.request_id,
                )
            if request_id != prepared.request_id:
                self.stats.mismatched_replies += 1
                if can_skip:
                    return None
                raise MismatchedReplyError(
                    f"reply is for request {request_id!r}, not the one sent "
                    f"({prepared.request_id!r})",
                    request_id=prepared.request_id,
                )
        self.check_in_time(prepared)
        server_timings = {
            **(document.get("timings") or {}),
            **(document.get("server_timing") or {}),
        }
        return self.result(
            prepared,
            actions,
            round_trip_ms=round_trip_ms,
            decode_ms=received.read_ms + (time.perf_counter() - start) * 1000,
            bytes_received=len(received.reply.content),
            raw=document,
            server={k: float(v) for k, v in server_timings.items() if isinstance(v, int | float)},
            digests=document.get("digests"),
        )

    @staticmethod
    def result(
        prepared: PreparedRequest,
        actions: np.ndarray,
        *,
        round_trip_ms: float,
        decode_ms: float,
        bytes_received: int,
        raw: dict[str, Any],
        server: dict[str, float] | None = None,
        digests: dict[str, dict[str, Any]] | None = None,
        action_keys: dict[str, slice] | None = None,
    ) -> ActionResult:
        """The `ActionResult` of `prepared`'s reply: its `actions`, what each stage took (the
        server's own `server` timings among them) and what was sent and received."""
        return ActionResult(
            actions=actions,
            request_id=prepared.request_id,
            timings=Timings(
                fit_ms=prepared.fit_ms,
                encode_ms=prepared.encode_ms,
                round_trip_ms=round_trip_ms,
                decode_ms=decode_ms,
                bytes_sent=len(prepared.body)
                + (prepared.frames.nbytes if prepared.frames is not None else 0),
                bytes_received=bytes_received,
                server=server or {},
            ),
            raw=raw,
            digests=digests,
            action_keys=action_keys,
            sent_digests=prepared.sent_digests,
        )
