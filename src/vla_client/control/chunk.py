"""Hand out one action per control tick from action chunks, fetching the next chunk ahead.

A policy answers an observation with a chunk of H future actions, but the answer takes longer
than a control tick. Querying only when the chunk runs out leaves the robot standing still while
the query is in flight (openpi's DROID loop), so `ChunkExecutor` starts the next inference on a
background thread once the current chunk is down to `prefetch_at` actions, and the control tick
never waits for the network.

Time is counted in ticks. Row 0 of a chunk is the action for the tick on which its observation
was taken; when the chunk arrives d ticks later, rows 0..d-1 are already in the past and are
dropped, so the robot does not replay stale actions (the backward jump at chunk boundaries users
report in GR00T#272). The first `blend_steps` of the new chunk can be cross-faded with what was
left of the old one to soften the switch.

Replies are matched to requests by id. The inference callable checks that each reply is for the
request it sent (`ActionClient` raises `MismatchedReplyError`); the executor counts those, and
also drops a reply carrying the id of a chunk it already took (an old reply delivered again), so
a chunk never replaces a newer one. Observations older than `max_observation_age_s` are not sent,
and replies slower than `reply_deadline_s` are discarded: both would only produce actions for a
world that has moved on.

With ``mode="rtc"`` (real-time chunking, Black et al. 2025) the server continues the chunk
being executed instead of starting afresh: the executor asks again every `execution_horizon`
rows, and each request carries the prefix (the rows of the current chunk not yet executed when
the observation is taken, at most the server's action horizon) and the inference delay d in
ticks, the largest of the last few measured delays (ticks run while a request was in flight:
an index difference, not a latency estimate) and never more than the prefix it describes. A
tick skipped in a stall is not counted in a measured delay (the stall is not the inference's),
and a reply dropped as late teaches nothing. The server must announce RTC in its metadata and
echo it in each reply (`vla_client.protocol.rtc`); otherwise `ModeNotSupportedError`, never a
silent aligned run. GR00T's server announces and echoes nothing: there the user declares it
(`vla_client.protocol.declare_rtc`) and no echo is asked for.

A reply that does not follow the action API (`ProtocolError`: ragged or empty actions, a chunk
of another action dim than the last one) is dropped and counted like a lost reply: one broken
reply does not end the loop, and the robot keeps doing what it does between chunks (the rest of
the current chunk, then what the watchdog is configured for). So is a request the server
refuses (a 4xx `ServerError`): the next tick asks again, and only `max_refusals` refusals in a
row end the loop (`RefusalsError`, naming the last one's reason).
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, TypeGuard

import numpy as np

from vla_client.client.result import ActionResult
from vla_client.control.clocks import StepWatch, check_monotonic
from vla_client.control.names import CLIENT_MODES, EXECUTION_MODES, MAX_REFUSALS, ExecutionMode
from vla_client.control.stats import ExecutorStats, LatencySample
from vla_client.control.types import Action, InferFn, Observe
from vla_client.errors import (
    DeadlineExceededError,
    MismatchedReplyError,
    ModeNotSupportedError,
    ProtocolError,
    RefusalsError,
    ServerError,
    StaleObservationError,
    TransportError,
)
from vla_client.observation import Observation
from vla_client.validation import check_at_least, check_choice, check_positive

if TYPE_CHECKING:
    from vla_client.protocol.models import ActionMetadata
    from vla_client.protocol.rtc import RTCRequest

log = logging.getLogger(__name__)

SEEN_IDS = 1_000
"""Request ids of accepted chunks remembered, to refuse an old reply delivered again."""
DELAY_WINDOW = 5
"""Measured inference delays remembered in ``rtc`` mode; the largest is sent as d (the paper's
conservative choice: a delay underestimated leaves executed rows unguided)."""
PAST_HINT = "chunks shorter than the round trip in ticks can only be played in mode 'naive'"
"""Logged with a reply whose chunk is wholly past when it lands (a one-action policy's, always,
outside mode 'naive')."""


@dataclass(frozen=True)
class ActionSource:
    """Where the action of a tick came from, so it can be traced to the observation behind it.

    `row` indexes the reply's chunk as the server sent it: row r is the action for the r-th tick
    after the observation was taken. Rows in the first `blend_steps` after a switch are mixed
    with the previous chunk.
    """

    request_id: str | None
    row: int


@dataclass
class _Request:
    """One inference in flight; the worker thread fills in the outcome, then sets `done`."""

    tick: int
    skipped: int
    """The executor's count of skipped ticks when it was sent."""
    age_s: float
    sent_at: float
    rtc: RTCRequest | None = None
    done: threading.Event = field(default_factory=threading.Event)
    result: ActionResult | None = None
    error: Exception | None = None
    finished_at: float = 0.0


class ChunkExecutor:
    """One action per `tick()`, from chunks fetched in the background by `infer`.

    `tick()` must be called once per control tick from one thread (the control loop); it never
    blocks on the network. At most one inference is in flight. Failures a fresh request may not
    hit (a mismatched, stale, late or malformed reply, a `TransportError`, a `ServerError`)
    are counted in `stats`, kept in `last_error` and retried on the next tick, except that the
    `max_refusals`-th refusal (a `ServerError` other than a 429 or 5xx) in a row raises
    `RefusalsError`; any other exception from `infer` is a bug to fix and is re-raised by
    `tick()`, and so is one from `validate`.
    """

    def __init__(
        self,
        infer: InferFn,
        *,
        prefetch_at: int = 0,
        blend_steps: int = 0,
        max_observation_age_s: float | None = None,
        reply_deadline_s: float | None = None,
        validate: Callable[[Action], None] | None = None,
        clock: Callable[[], float] = time.monotonic,
        monotonic: Callable[[], float] = time.monotonic,
        align: bool = True,
        mode: ExecutionMode | None = None,
        execution_horizon: int | None = None,
        server: ActionMetadata | None = None,
        max_refusals: int = MAX_REFUSALS,
    ) -> None:
        """Configure the executor.

        `prefetch_at`: start the next inference when the current chunk has this many actions
        left, counting the one about to run (0 waits until it has run out). `blend_steps`:
        cross-fade this many steps from the old chunk into the new one.
        `max_observation_age_s`: do not send an observation whose oldest frame is older (one
        without capture times is aged from the `observe` call). `reply_deadline_s`: discard a
        reply that took longer than this from sending. `validate` sees each accepted chunk
        before it is used (`SafetyGate.check_chunk`, say) and may raise. `clock` must be the
        clock the observations' `capture_times` come from (`time.time` for cameras that stamp
        wall time); only observation ages are measured on it. `monotonic` times everything
        else (replies, deadlines, `last_chunk_at`), and a `ControlLoop` schedules its ticks,
        its `Watchdog` measures silence and its `SafetyGate` its rate on it: it must never go
        back, so the wall clock is refused (tests and simulations give a fake one; a test's
        fake `clock` is usually given as both). `align=False` plays each chunk from its first
        row however late it arrived (the naive execution some clients do, kept to measure what
        aligning is worth). The counts are integers >= 0, the times finite numbers > 0 (or
        None), the clocks callables and `align` a bool, else `ValueError`.

        `mode` names the execution instead (`EXECUTION_MODES`): ``naive`` is ``align=False``,
        ``blended`` needs `blend_steps`, and ``rtc`` asks the server for real-time chunking:
        `server` must be its metadata (``client.metadata()``) and announce it, else
        `ModeNotSupportedError` naming the modes it does support; the next request starts
        once `execution_horizon` rows of the current chunk have run (default: half the
        announced action horizon; `prefetch_at` and `blend_steps` do not apply and must stay 0),
        and `infer` is called with an ``rtc=`` keyword (`ActionClient.infer` puts it in the
        request's parameters). Each reply must echo it, unless the announcement says
        ``"echo": false`` (a GR00T server declared with
        `vla_client.protocol.declare_rtc`). Its capabilities are read strictly: a
        ``supported`` or ``echo`` that is not true or false is a `ProtocolError`.

        `max_refusals` (an integer >= 1): how many requests in a row the server may refuse (a
        4xx other than 429) before `tick()` raises `RefusalsError`, naming the last reason;
        until then each refusal is counted in ``stats.refused`` and the next tick asks again.
        """
        check_at_least("prefetch_at", prefetch_at, 0, integer=True)
        check_at_least("blend_steps", blend_steps, 0, integer=True)
        check_positive("max_observation_age_s", max_observation_age_s, allow_none=True, finite=True)
        check_positive("reply_deadline_s", reply_deadline_s, allow_none=True, finite=True)
        check_at_least("max_refusals", max_refusals, 1, integer=True)
        if not isinstance(align, bool):
            raise ValueError(f"align must be True or False; got {align!r}")
        if not callable(clock):
            raise ValueError(f"clock must be a callable giving seconds; got {clock!r}")
        check_monotonic("monotonic", monotonic)
        self._execution_horizon: int | None = None
        if mode is not None:
            align = _check_mode(mode, align, blend_steps, prefetch_at)
        if mode == "rtc":
            self._execution_horizon = _rtc_horizon(server, execution_horizon)
        elif execution_horizon is not None or server is not None:
            raise ValueError("execution_horizon and server are for mode='rtc'")
        # The most rows a prefix may have: the server's chunk (None outside rtc mode).
        self._rtc_rows = None if server is None else server.output.action_horizon
        self._rtc_echoed = _rtc_echoed(server)  # False outside rtc mode: there is no server
        self._delays: deque[int] = deque(maxlen=DELAY_WINDOW)
        self._infer = infer
        self._prefetch_at = prefetch_at
        self._blend_steps = blend_steps
        self._max_age = max_observation_age_s
        self._deadline = reply_deadline_s
        self._validate = validate
        self._clock = clock
        self._monotonic = monotonic
        self._stamps = StepWatch(clock, monotonic)
        self._align = align
        self._seen_ids: deque[str] = deque(maxlen=SEEN_IDS)
        self._tick = 0
        self._skipped = 0
        self._max_refusals = max_refusals
        self._refusals_in_row = 0
        self._chunk: Action | None = None
        self._chunk_start = 0
        self._chunk_offset = 0
        self._pending: _Request | None = None
        self._closed = False
        self.stats = ExecutorStats()
        self.last_error: Exception | None = None
        self._failures_in_row = 0
        self.last_chunk_at: float | None = None
        """`monotonic` time the last chunk was accepted; a watchdog measures silence from it."""
        self.chunk_request_id: str | None = None
        """The request id of the chunk being played, to trace an action to its request."""
        self.source: ActionSource | None = None
        """Where the action the last `tick()` returned came from; None when it returned None."""

    @property
    def clock(self) -> Callable[[], float]:
        """The clock capture times are stamped on, which observation ages are measured on."""
        return self._clock

    @property
    def monotonic(self) -> Callable[[], float]:
        """The clock everything else is timed on: replies, deadlines, `last_chunk_at`."""
        return self._monotonic

    @property
    def in_flight(self) -> bool:
        """Whether an inference is running."""
        return self._pending is not None

    @property
    def remaining(self) -> int:
        """Actions left in the current chunk, counting the one for this tick."""
        if self._chunk is None:
            return 0
        return max(0, len(self._chunk) - (self._tick - self._chunk_start))

    @property
    def upcoming(self) -> Action:
        """The rows of the current chunk still to run (a copy, ``[0, 0]`` before the first
        chunk): after a `tick()`, the actions of the ticks after the one it gave, in order."""
        rows: Action = self._upcoming().copy()
        return rows

    def tick(self, observe: Observe) -> Action | None:
        """The action for this tick, or None when there is none yet (or any more).

        Takes in a reply that has arrived, picks this tick's action, and, when the chunk is
        running low and nothing is in flight, calls `observe` and starts the next inference.
        """
        self._collect()
        action = self._upcoming()[0].copy() if self.remaining else None
        if action is None:
            self.stats.starved_ticks += 1
            self.source = None
        else:
            row = self._chunk_offset + self._tick - self._chunk_start
            self.source = ActionSource(self.chunk_request_id, row)
        if self._pending is None and not self._closed and self._due():
            self._send(observe)
        self._tick += 1
        return action

    def skip(self, ticks: int) -> None:
        """Let `ticks` ticks pass without their actions (a late loop skipped them, an integer
        >= 0), so that the tick count, which chunks are aligned by, keeps up with time."""
        check_at_least("ticks", ticks, 0, integer=True)
        self._tick += ticks
        self._skipped += ticks

    def join(self, timeout: float | None = None) -> bool:
        """Wait for the inference in flight to finish; False if it is still running."""
        pending = self._pending
        return pending is None or pending.done.wait(timeout)

    def close(self, timeout: float | None = None) -> bool:
        """Start no more inferences; wait up to `timeout` for the one in flight, as `join`."""
        self._closed = True
        return self.join(timeout)

    def _due(self) -> bool:
        """Whether to ask for the next chunk this tick."""
        if self._execution_horizon is None:
            return self.remaining <= self._prefetch_at
        row = self._chunk_offset + self._tick - self._chunk_start
        return self.remaining == 0 or row >= self._execution_horizon

    def _rtc_request(self) -> RTCRequest | None:
        """The prefix, d and s for a request built now; None outside ``rtc`` mode or with no
        chunk left to continue (nothing to inpaint).

        Bounded by what they describe: the prefix is the rest of the chunk, at most the rows
        the server announces, and d at most the prefix (rows it will have executed)."""
        if self._execution_horizon is None or not self.remaining or not self._delays:
            return None
        from vla_client.protocol.rtc import RTCRequest  # deferred: rtc mode only

        prefix = self._upcoming()[: self._rtc_rows].copy()
        delay = min(max(self._delays), len(prefix))
        return RTCRequest(prefix, delay, self._execution_horizon)

    def _upcoming(self) -> Action:
        if self._chunk is None:
            return np.empty((0, 0), dtype=np.float32)
        return self._chunk[self._tick - self._chunk_start :]

    def _send(self, observe: Observe) -> None:
        observed_at = self._clock()
        observation = observe()
        oldest = observation.oldest_capture_time
        age_s = self._stamps.read() - (observed_at if oldest is None else oldest)
        if self._max_age is not None and not age_s <= self._max_age:  # NaN: not sent either
            self.stats.stale_observations += 1
            log.debug("observation %.1f ms old, not sent", age_s * 1e3)
            return
        request = _Request(self._tick, self._skipped, age_s, self._monotonic(), self._rtc_request())
        self._pending = request
        self.stats.requests_sent += 1
        threading.Thread(
            target=self._run, args=(request, observation), name="vla-infer", daemon=True
        ).start()

    def _run(self, request: _Request, observation: Observation) -> None:
        try:
            if request.rtc is None:
                request.result = self._infer(observation)
            else:  # an `ActionClient.infer`, say: the keyword becomes the request's parameters.rtc
                infer: Callable[..., ActionResult] = self._infer
                request.result = infer(observation, rtc=request.rtc.parameters())
        except Exception as exc:  # handed to the control thread, which decides what to do
            request.error = exc
        finally:
            request.finished_at = self._monotonic()
            request.done.set()

    def _collect(self) -> None:
        request = self._pending
        if request is None or not request.done.is_set():
            return
        self._pending = None
        if not _refused(request.error):
            self._refusals_in_row = 0  # any other outcome ends a run of refusals
        if request.error is not None:
            self._count_failure(request.error)
            return
        assert request.result is not None
        try:
            self._take(request, request.result)
        except ProtocolError as malformed:
            self._count_failure(malformed)

    def _take(self, request: _Request, result: ActionResult) -> None:
        """Align, blend and install a reply's chunk, unless it is stale, late or unusable."""
        if result.request_id is not None and result.request_id in self._seen_ids:
            self.stats.dropped_mismatched += 1
            log.warning("dropped reply %r: that chunk was already taken", result.request_id)
            return
        elapsed = self._tick - request.tick
        if request.rtc is not None and self._rtc_echoed:
            _check_applied(request.rtc, result)
        skip = elapsed if self._align else 0
        actions = _as_chunk(result.actions, None if self._chunk is None else self._chunk.shape[1])
        took = request.finished_at - request.sent_at
        too_slow = self._deadline is not None and took > self._deadline
        if too_slow or skip >= len(actions):
            self.stats.dropped_late += 1
            # A chunk no longer than the ticks its reply took is all past when it lands: every
            # reply of a one-action policy (OpenVLA) in aligned mode. Say how to play them.
            why = (
                f"it took {took:.3g} s, over reply_deadline_s={self._deadline:g}"
                if too_slow
                else f"all its actions are past: {PAST_HINT}"
            )
            log.warning("dropped late reply %s (%d ticks old; %s)", result.request_id, elapsed, why)
            return
        if self._execution_horizon is not None:  # the ticks run while it was in flight
            self._delays.append(elapsed - (self._skipped - request.skipped))
        if self._validate is not None:
            self._validate(actions)
        self._chunk = cross_fade(self._upcoming(), actions[skip:], self._blend_steps)
        self._chunk_start = self._tick
        self._chunk_offset = skip
        self.chunk_request_id = result.request_id
        if result.request_id is not None:
            self._seen_ids.append(result.request_id)
        self.last_chunk_at = self._monotonic()
        self.stats.chunks_received += 1
        if self._failures_in_row:
            log.info("inference back after %d failed requests", self._failures_in_row)
            self._failures_in_row = 0
        self.stats.latencies.append(_latency(request, result, elapsed))

    def _count_failure(self, error: Exception) -> None:
        if isinstance(error, MismatchedReplyError):
            self.stats.dropped_mismatched += 1
        elif isinstance(error, ProtocolError):
            self.stats.malformed_replies += 1
        elif isinstance(error, StaleObservationError):
            self.stats.stale_observations += 1
        elif isinstance(error, DeadlineExceededError):
            self.stats.dropped_late += 1
        elif _retryable(error):
            self.stats.errors += 1
        elif _refused(error):
            self._count_refusal(error)
        else:
            raise error
        self.last_error = error
        self._failures_in_row += 1
        # A server that is down fails every tick: say so once, not at the control rate.
        level = logging.WARNING if self._failures_in_row == 1 else logging.DEBUG
        log.log(level, "inference failed, trying again: %s", error)

    def _count_refusal(self, error: ServerError) -> None:
        """Count a request the server refused; `RefusalsError` once `max_refusals` came in a
        row, with no other outcome in between."""
        self.stats.refused += 1
        self._refusals_in_row += 1
        if self._refusals_in_row >= self._max_refusals:
            raise RefusalsError(error, self._refusals_in_row) from error


def _check_mode(mode: object, align: bool, blend_steps: int, prefetch_at: int) -> bool:
    """`align` for `mode`, after checking it agrees with the other options."""
    check_choice("mode", mode, EXECUTION_MODES)
    if not align and mode != "naive":
        raise ValueError(f"align=False is mode 'naive', not {mode!r}; pass one of them")
    if mode == "blended" and blend_steps == 0:
        raise ValueError("mode 'blended' needs blend_steps >= 1")
    if mode != "blended" and blend_steps:
        raise ValueError(f"blend_steps is for mode 'blended', not {mode!r}")
    if mode == "rtc" and prefetch_at:
        raise ValueError("mode 'rtc' asks again every execution_horizon rows; leave prefetch_at 0")
    return mode != "naive"


def _rtc_horizon(server: ActionMetadata | None, execution_horizon: int | None) -> int:
    """The execution horizon for ``rtc`` mode, once `server` is known to announce RTC."""
    from vla_client.protocol.families import rtc_declaration_hint
    from vla_client.protocol.rtc import announced, where_to_find

    if server is None:
        raise ValueError(
            "mode 'rtc' needs server=client.metadata(), to check the server does real-time chunking"
        )
    if announced(server.capabilities) is None:
        found = where_to_find(server.server)
        hint = f" ({found})" if found else rtc_declaration_hint(server)
        raise ModeNotSupportedError(
            f"mode 'rtc': the server ({server.model or 'unnamed'}) announces no real-time "
            f"chunking; it supports modes {', '.join(CLIENT_MODES)}{hint}"
        )
    horizon = server.output.action_horizon
    if execution_horizon is None:
        if horizon is None:
            raise ValueError("mode 'rtc' needs execution_horizon: the server announces no horizon")
        execution_horizon = max(1, horizon // 2)
    check_at_least("execution_horizon", execution_horizon, 1, integer=True)
    if horizon is not None and execution_horizon > horizon:
        raise ValueError(
            f"execution_horizon must be in 1..{horizon} (the server's action horizon); "
            f"got {execution_horizon}"
        )
    return execution_horizon


def _rtc_echoed(server: ActionMetadata | None) -> bool:
    """Whether the RTC `server` announces is echoed in its replies (not so for a GR00T server
    the user declared: it says nothing either way)."""
    from vla_client.protocol.rtc import echoed

    return server is not None and echoed(server.capabilities)


def _check_applied(sent: RTCRequest, result: ActionResult) -> None:
    """`ModeNotSupportedError` unless the reply echoes the RTC request it answers."""
    from vla_client.protocol.rtc import applied

    echo = applied(result.raw)
    if echo is None:
        raise ModeNotSupportedError(
            f"mode 'rtc': the reply to {result.request_id} does not say it applied real-time "
            "chunking (the server dropped parameters.rtc); run mode 'aligned' against it"
        )
    if (
        echo.get("inference_delay_steps") != sent.inference_delay_steps
        or echo.get("prefix_steps") != sent.prefix_steps
    ):
        raise ModeNotSupportedError(
            f"mode 'rtc': the reply to {result.request_id} applied {dict(echo)}, not the "
            f"{sent.prefix_steps}-row prefix with delay {sent.inference_delay_steps} sent"
        )


def _as_chunk(values: object, action_dim: int | None) -> Action:
    """`values` as a float32 ``[H, D]`` chunk with H, D >= 1 (and D equal to `action_dim` when
    given: the dim of the chunk being played), else `ProtocolError`."""
    try:
        actions = np.array(values, dtype=np.float32)
    except (TypeError, ValueError) as exc:
        raise ProtocolError(f"actions are not a numeric array: {exc}") from None
    if actions.ndim != 2 or 0 in actions.shape:
        raise ProtocolError(f"expected an action chunk [H, D], got shape {actions.shape}")
    if action_dim is not None and actions.shape[1] != action_dim:
        raise ProtocolError(f"action dim changed from {action_dim} to {actions.shape[1]}")
    return actions


def cross_fade(old: Action, new: Action, steps: int) -> Action:
    """`new`, with its first steps blended linearly from `old`'s overlapping actions.

    Over n = min(steps, overlap) steps the new chunk's weight rises as 1/(n+1) ... n/(n+1), so
    the switch is spread evenly and the step after the fade is purely the new chunk.
    """
    n = min(steps, len(old), len(new))
    if n == 0:
        return new
    if old.shape[1] != new.shape[1]:
        raise ProtocolError(f"action dim changed from {old.shape[1]} to {new.shape[1]}")
    weight = (np.arange(1, n + 1, dtype=np.float32) / (n + 1))[:, None]
    blended: Action = new.copy()
    blended[:n] = (1 - weight) * old[:n] + weight * new[:n]
    return blended


def _retryable(exc: Exception) -> bool:
    """Failures of the network or of a busy or broken server, which a later request may not
    hit: counted as errors however many come (a refusal is counted apart, and bounded)."""
    if isinstance(exc, TransportError):
        return True
    return isinstance(exc, ServerError) and (exc.status_code >= 500 or exc.status_code == 429)


def _refused(exc: Exception | None) -> TypeGuard[ServerError]:
    """A request the server refused: an error status other than busy or broken (a 400, say)."""
    return isinstance(exc, ServerError) and not _retryable(exc)


def _latency(request: _Request, result: ActionResult, elapsed: int) -> LatencySample:
    server_ms = result.timings.server.get("total_ms")
    return LatencySample(
        request_id=result.request_id,
        observation_age_ms=request.age_s * 1e3,
        infer_ms=(request.finished_at - request.sent_at) * 1e3,
        server_ms=server_ms,
        network_ms=result.timings.network_ms,
        ticks_elapsed=elapsed,
    )
