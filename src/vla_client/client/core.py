"""The transport-free half of the clients: options, encoding a request, reading its reply, counts.

`ActionClient` and `AsyncActionClient` differ only in how they wait for their transport; the
encoding (`vla_client.protocol.encode_request`), the reading of every reply
(`vla_client.protocol.read_reply`), the fitting, the deadline and age checks and the counters
live here once, in `RequestBook`, which every server family's session
(`vla_client.client.session`) uses around its own messages. Nothing here does I/O.

Time words: every duration is in seconds and says so (``timeout_s``, ``deadline_s``,
``max_observation_age_s``); capture times are `time.monotonic()` seconds, as the cameras stamp
them.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from functools import partial
from typing import Any, Literal
from urllib.parse import urlsplit, urlunsplit

import numpy as np

from vla_client.client.fit import MIN_SIDE, Fit, FramePreprocessor, check_camera_map
from vla_client.client.result import ActionResult, Timings
from vla_client.codecs import frame_digest
from vla_client.errors import (
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
    ENCODINGS,
    FLAT,
    GENERATIONS_PATH,
    HEALTH_PATH,
    METADATA_PATH,
    WIRES,
    ActionMetadata,
    Encoding,
    Endpoint,
    LayoutFunction,
    OpenpiLayout,
    Reply,
    Wire,
    check_endpoint,
    encode_request,
    new_request_id,
    openpi_layout,
    read_actions,
    read_reply,
)
from vla_client.protocol.endpoints import API_KEY_ENV as API_KEY_ENV
from vla_client.protocol.gr00t import check_state_split
from vla_client.protocol.ipc import encode_request_apart
from vla_client.transports.drive import Offload, Steps
from vla_client.validation import check_choice, check_positive

Resize = Literal["auto", "pad", "crop", "none"]
RESIZES: tuple[Resize, ...] = ("auto", "pad", "crop", "none")
"""How frames meet the server's image size: ``auto`` pads (as ``pad``) only when the server
refuses other sizes and leaves them otherwise; ``pad``, ``crop`` and ``none`` as
`FramePreprocessor` does them, whatever the server says."""

_TIMER_SLACK_S = 1e-3
"""How early a transport's timer may fire (event loops round to their clock's resolution): a
timeout this close to the deadline is the deadline's."""

TransportKind = Literal["http", "websocket", "zmq", "ipc"]
TRANSPORT_KINDS: tuple[TransportKind, ...] = ("http", "websocket", "zmq", "ipc")


@dataclass(frozen=True)
class ClientOptions:
    """How a client fits and encodes an observation, and when it gives up.

    Pass one as ``ActionClient(url, options=ClientOptions(...))`` (to keep a robot's settings
    in one value), or give the same names as keywords, not both: a keyword given beside
    ``options=`` is a `ValueError`, even one that repeats its default (``check_contract=True``
    would otherwise be dropped without a word). `ActionClient.options` is what the client then
    uses, resolved for its transport (`for_transport`).

    Fitting (see `FramePreprocessor`): `camera_map` renames the robot's cameras to the
    server's, frames are resized to the server's image size with `resize` (or to `image_size`
    when given), and with `check_contract` the observation is checked against the server's
    metadata before anything is encoded. Encoding: image `encoding` (None: ``raw`` on openpi's
    endpoint, else ``png``), `wire` (None: ``msgpack`` on a websocket, else ``json``),
    `jpeg_quality`, and for openpi's endpoint the request `layout` (a name such as ``droid``,
    an `OpenpiLayout` or a function; None there: ``flat``). Giving up: observations older
    than `max_observation_age_s` are not sent, and no reply is waited for past `deadline_s`.
    For GR00T's server, `state_split` (state key -> length) cuts the flat state vector into the
    named parts it reads (`vla_client.protocol.gr00t`).
    """

    encoding: Encoding | None = None
    wire: Wire | None = None
    jpeg_quality: int = 90
    layout: str | OpenpiLayout | LayoutFunction | None = None
    max_observation_age_s: float | None = None
    deadline_s: float | None = None
    camera_map: Mapping[str, str] = field(default_factory=dict)
    resize: Resize = "auto"
    image_size: tuple[int, int] | None = None
    check_contract: bool = True
    state_split: Mapping[str, int] | None = None

    def __post_init__(self) -> None:
        check_state_split(self.state_split)
        check_choice("resize", self.resize, RESIZES)
        check_camera_map(self.camera_map)
        if self.image_size is not None and (
            len(self.image_size) != 2 or not all(isinstance(n, int) for n in self.image_size)
        ):
            raise ValueError(f"image_size must be (height, width), got {self.image_size!r}")
        if self.image_size is not None and min(self.image_size) < MIN_SIDE:
            raise ValueError(f"image_size {self.image_size} is under {MIN_SIDE} pixels a side")
        if not isinstance(self.check_contract, bool):
            raise ValueError(f"check_contract must be True or False, got {self.check_contract!r}")
        if self.encoding is not None:
            check_choice("encoding", self.encoding, ENCODINGS)
        if self.wire is not None:
            check_choice("wire", self.wire, WIRES)
        if isinstance(self.jpeg_quality, bool) or not 1 <= self.jpeg_quality <= 100:
            raise ValueError(f"jpeg_quality must be in 1..100, got {self.jpeg_quality!r}")
        layout = self.layout
        if isinstance(layout, str):
            openpi_layout(layout)  # a name it knows, or `ValueError` naming them
        elif not (layout is None or isinstance(layout, OpenpiLayout) or callable(layout)):
            raise TypeError(
                f"layout must be a layout name, an OpenpiLayout or a function, got {layout!r}"
            )
        if layout is not None:
            if self.wire not in (None, "msgpack"):
                raise ValueError("openpi requests travel as msgpack only")
            if isinstance(layout, str):
                layout = openpi_layout(layout)
            raw_only = isinstance(layout, OpenpiLayout) and layout is not FLAT
            if raw_only and self.encoding not in (None, "raw"):
                raise ValueError(
                    f"openpi layout {getattr(layout, 'name', '')!r} sends raw arrays, as openpi's "
                    f"policies read them; encoding must be 'raw', got {self.encoding!r}"
                )
        for name in ("max_observation_age_s", "deadline_s"):
            check_positive(name, getattr(self, name), allow_none=True)

    def for_transport(
        self,
        *,
        websocket: bool,
        openpi: bool,
        gr00t: bool = False,
        dialect: str | None = None,
        ipc: bool = False,
    ) -> ClientOptions:
        """These options with the transport's defaults filled in: websockets carry msgpack,
        openpi's endpoint raw arrays in the flat layout (a layout name becomes its
        `OpenpiLayout`), GR00T's server and the servers with a `dialect` of their own (named)
        raw arrays in their msgpack, ``ipc://`` raw frames in shared memory beside msgpack, and
        nothing else. Raises `ValueError` for what the transport cannot carry."""
        if self.state_split is not None and not gr00t:
            raise ValueError("state_split is for GR00T's server; pass endpoint='gr00t' as well")
        if ipc:
            if self.layout is not None:
                raise ValueError("ipc:// speaks the action API; layout is for openpi's endpoint")
            if self.encoding not in (None, "raw") or self.wire not in (None, "msgpack"):
                raise ValueError(
                    "ipc:// carries raw frames in shared memory and the rest as msgpack; leave "
                    f"encoding and wire unset (got encoding={self.encoding!r}, wire={self.wire!r})"
                )
            return replace(self, encoding="raw", wire="msgpack")
        if gr00t or dialect:
            server = "GR00T's server" if gr00t else dialect
            given = [name for name in ("encoding", "wire", "layout") if getattr(self, name)]
            if given:
                raise ValueError(
                    f"{server} takes raw arrays in its own msgpack; leave {given} unset"
                )
            return replace(self, encoding="raw", wire="msgpack")
        if websocket and self.wire == "json":
            raise ValueError(
                "websocket frames are msgpack; leave wire unset or pass wire='msgpack'"
            )
        if self.layout is not None and not openpi:
            raise ValueError("layout is for openpi's endpoint; pass endpoint='openpi' as well")
        layout = self.layout
        if openpi and (layout is None or isinstance(layout, str)):
            layout = openpi_layout(layout or "flat")
        return replace(
            self,
            encoding=self.encoding or ("raw" if openpi else "png"),
            wire=self.wire or ("msgpack" if websocket else "json"),
            layout=layout,
        )


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


ROUTE_PATHS = (GENERATIONS_PATH, METADATA_PATH, HEALTH_PATH)
"""The server's own routes: a base URL ending in one is a copied request URL, not a base."""


def route_in_url(base_url: str) -> str | None:
    """Why `base_url` cannot be a server's base URL, when its path ends in one of the
    server's routes (the client appends those itself, so ``.../v1/actions/generations`` would
    be posted to twice over); None when it can. The message names the base URL to give."""
    parts = urlsplit(base_url)
    path = parts.path.rstrip("/")
    route = next((route for route in ROUTE_PATHS if path.endswith(route)), None)
    if route is None:
        return None
    base = urlunsplit((parts.scheme, parts.netloc, path.removesuffix(route), "", ""))
    return f"{base_url} ends in the server's route {route}; give the server's base URL, {base}"


def resolve_api_key(api_key: str | None) -> str | None:
    """`api_key` when given, else the `API_KEY_ENV` variable's value (stripped), else None.

    A variable set to nothing or spaces is a `ValueError`, as ``vla-client serve`` refuses it:
    it is what an unset shell variable gives, and reading it as "no key" would send requests
    without the key that was meant.
    """
    if api_key is not None:
        return api_key
    value = os.environ.get(API_KEY_ENV)
    if value is None:
        return None
    if not value.strip():
        raise ValueError(f"{API_KEY_ENV} is set but empty; unset it to send without a key")
    return value.strip()


def chosen_endpoint(endpoint: Endpoint | None, layout: object) -> Endpoint | None:
    """The websocket endpoint a client speaks: `endpoint` when given (checked), openpi's when
    only a `layout` is given (layouts are openpi's, whatever path the URL has), else None (the
    URL's path decides). The one rule for `ActionClient` and the ``--layout`` of the CLI."""
    if endpoint is not None:
        return check_endpoint(endpoint)
    return "openpi" if layout is not None else None


def transport_kind(scheme: str, transport: str | None, endpoint: str | None) -> TransportKind:
    """`transport` if given, else ZeroMQ for ``tcp://`` URLs (GR00T's server), websocket for
    ``ws(s)://`` URLs or a websocket `endpoint`, else HTTP. GR00T's `endpoint` is ZeroMQ's
    only, on a ``tcp://`` URL."""
    zmq = scheme == "tcp" or endpoint == "gr00t"
    if zmq and (
        scheme != "tcp" or endpoint not in (None, "gr00t") or transport not in (None, "zmq")
    ):
        raise ValueError(
            f"GR00T's server is at tcp://host:port with endpoint='gr00t' over ZeroMQ; got a "
            f"{scheme}:// URL, endpoint={endpoint!r}, transport={transport!r}"
        )
    ipc = scheme == "ipc"
    if ipc or transport == "ipc":
        if not ipc or endpoint is not None or transport not in (None, "ipc"):
            raise ValueError(
                f"ipc is the action API over a Unix socket, an ipc://PATH URL with no endpoint; "
                f"got a {scheme}:// URL, endpoint={endpoint!r}, transport={transport!r}"
            )
        return "ipc"
    if transport is not None:
        check_choice("transport", transport, TRANSPORT_KINDS)
        if transport == "http" and endpoint is not None:
            raise ValueError("endpoint names a websocket endpoint; it does not apply to HTTP")
        if transport == "zmq" and not zmq:
            raise ValueError("ZeroMQ is GR00T's transport: a tcp:// URL")
        return transport  # type: ignore[return-value]
    if zmq:
        return "zmq"
    return "websocket" if scheme in ("ws", "wss") or endpoint is not None else "http"


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
    frames: Mapping[str, np.ndarray] | None = None
    """Over ``ipc://``: the fitted frames, which travel apart from `body` (in shared memory)."""


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
        gr00t: bool = False,
        dialect: str | None = None,
        ipc: bool = False,
    ) -> None:
        self.options = options = options.for_transport(
            websocket=websocket, openpi=openpi, gr00t=gr00t, dialect=dialect, ipc=ipc
        )
        self._frames_apart = ipc
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
                {name: frame_digest(frame) for name, frame in observation.images.items()}
                if digested
                else None
            ),
            frames=observation.images if frames_apart else None,
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
        and the answer read by `read` (the actions, their keys, the reply as `raw`)."""
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
                + sum(frame.nbytes for frame in (prepared.frames or {}).values()),
                bytes_received=bytes_received,
                server=server or {},
            ),
            raw=raw,
            digests=digests,
            action_keys=action_keys,
            sent_digests=prepared.sent_digests,
        )
