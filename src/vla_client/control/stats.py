"""What the control loop reports: counters, latency samples and their percentiles.

Percentiles rather than means, because a robot feels the tail: one late tick is a jerk.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field

import numpy as np

LATENCY_WINDOW = 10_000
"""Latency samples kept for the percentiles: hours of chunks, bounded memory."""

JITTER_WINDOW = 100_000
"""Jitter samples kept for the percentiles: over half an hour at 50 Hz, bounded memory."""


@dataclass(frozen=True)
class Percentiles:
    """p50 / p90 / p99 / max of a set of samples, in the samples' unit (NaN when empty)."""

    count: int
    p50: float
    p90: float
    p99: float
    max: float

    def __str__(self) -> str:
        return (
            f"n={self.count} p50={self.p50:.2f} p90={self.p90:.2f} "
            f"p99={self.p99:.2f} max={self.max:.2f}"
        )


def percentiles(samples: Iterable[float]) -> Percentiles:
    """Summarise samples; an empty set gives NaNs rather than an error, so reports still print."""
    values = np.fromiter(samples, dtype=np.float64)
    if values.size == 0:
        nan = float("nan")
        return Percentiles(0, nan, nan, nan, nan)
    p50, p90, p99 = np.percentile(values, [50, 90, 99])
    return Percentiles(int(values.size), float(p50), float(p90), float(p99), float(values.max()))


@dataclass(frozen=True)
class LatencySample:
    """Where the time went for one accepted chunk, every figure from the robot's own clock.

    No clocks are compared across machines (LeRobot's wall-clock comparison goes negative under
    skew, lerobot#2458): the observation's age is measured on the robot's clock its cameras
    stamp frames with, the inference call on the robot's monotonic clock, and the network share
    is the client round trip minus the server's own reported time.
    """

    request_id: str | None
    observation_age_ms: float
    """Capture of the oldest camera frame to the moment the request was sent."""
    infer_ms: float
    """The whole inference call as the robot saw it: encode, round trip, decode."""
    server_ms: float | None
    """The server's own `total_ms`, when it reports one."""
    network_ms: float | None
    """Client round trip minus `server_ms`."""
    ticks_elapsed: int
    """Ticks between the observation and the chunk's first use: leading rows dropped."""

    @property
    def observation_to_action_ms(self) -> float:
        """Frame capture to chunk in hand: age at send plus the inference call."""
        return self.observation_age_ms + self.infer_ms


@dataclass
class ExecutorStats:
    """Counters for what happened to each request; the loop's health at a glance."""

    requests_sent: int = 0
    chunks_received: int = 0
    stale_observations: int = 0
    """Observations not sent: older than `max_observation_age_s` (or refused by `infer`)."""
    dropped_mismatched: int = 0
    """Replies for another request: `MismatchedReplyError`, or an id already taken."""
    dropped_late: int = 0
    """Replies past `reply_deadline_s` (or `DeadlineExceededError`), or all in the past."""
    malformed_replies: int = 0
    """Replies that do not follow the action API (`ProtocolError`: a ragged or empty chunk, a
    chunk of another action dim); dropped, and the next tick tries again."""
    errors: int = 0
    """Other retryable transport or server errors (a 429 or 5xx); the next tick tries again."""
    refused: int = 0
    """Requests the server refused (any other `ServerError`: a 400, say); the next tick tries
    again, and `ChunkExecutor(max_refusals=)` of them in a row end the loop."""
    starved_ticks: int = 0
    """Ticks with no action to give: before the first chunk, or after one ran out."""
    latencies: deque[LatencySample] = field(default_factory=lambda: deque(maxlen=LATENCY_WINDOW))

    def infer_ms(self) -> Percentiles:
        """Percentiles of the inference call time."""
        return percentiles(s.infer_ms for s in self.latencies)

    def observation_to_action_ms(self) -> Percentiles:
        """Percentiles of frame capture to chunk in hand."""
        return percentiles(s.observation_to_action_ms for s in self.latencies)


@dataclass
class LoopStats:
    """Tick counts and tick-start jitter (actual minus scheduled start, seconds, never < 0)."""

    ticks: int = 0
    """Ticks run; skipped ones are not counted here."""
    applied: int = 0
    """Ticks on which `apply_action` was called."""
    idle: int = 0
    """Ticks with no action to apply (before the first chunk, with no watchdog to hold)."""
    overruns: int = 0
    """Ticks that started a whole period or more late, and so skipped the ticks they missed."""
    jitter_s: deque[float] = field(default_factory=lambda: deque(maxlen=JITTER_WINDOW))
    skipped: int = 0
    """Ticks not run because their time had passed (a stall, a clock that jumped forward): the
    loop goes on from now rather than running them back to back."""
    clock_steps: int = 0
    """Times the loop's monotonic clock went back (a fake or broken clock); the schedule
    moved back with it."""

    def jitter_ms(self) -> Percentiles:
        """Percentiles of tick-start jitter in milliseconds."""
        return percentiles(j * 1e3 for j in self.jitter_s)
