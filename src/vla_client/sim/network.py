"""Network delay on the robot's side, real or simulated, for closed-loop evaluation.

`NetworkDelay` says how long each one-way trip takes: a fixed delay plus uniform jitter, drawn
from a seeded generator so a run can be repeated. It is used two ways:

- in real time, `delayed` wraps the client's transport so every request waits before it leaves
  and every reply waits before it is handed back (both directions, as a slow link would), and
  the client, executor and clocks see the delay exactly as they would on a robot;
- in simulated time, `SimulatedTime` is the run's clock: it advances one control period per
  tick, never sleeps, and hands a reply to the executor at the first tick at or after the time
  it would have arrived: sent + round trip + both one-way delays. The round trip is measured
  once before the run (`measure_round_trip`), so a run's outcome depends only on the seeds and
  on how many ticks that round trip spans, not on how busy the machine is.
"""

from __future__ import annotations

import math
import statistics
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from vla_client.client.result import ActionResult
from vla_client.control.types import InferFn
from vla_client.observation import Observation
from vla_client.protocol import Reply
from vla_client.sim.limits import MAX_DELAY_S
from vla_client.transports.base import ReplyStream, Transport

_EPSILON_S = 1e-9


@dataclass(frozen=True)
class NetworkDelay:
    """One-way delay: `delay_s`, plus or minus up to `jitter_s` (uniform), never below 0."""

    delay_s: float = 0.0
    jitter_s: float = 0.0

    def __post_init__(self) -> None:
        for name, value in (("delay_s", self.delay_s), ("jitter_s", self.jitter_s)):
            if not isinstance(value, int | float) or not math.isfinite(value):
                raise ValueError(f"{name} must be a finite number of seconds, got {value!r}")
            if not 0 <= value <= MAX_DELAY_S:
                raise ValueError(f"{name} must be in 0..{MAX_DELAY_S:g} s, got {value!r}")

    def sampler(self, seed: int) -> Callable[[], float]:
        """One-way delays in seconds, the same sequence for the same seed."""
        rng = np.random.default_rng(seed)

        def draw() -> float:
            if self.jitter_s == 0:
                return self.delay_s
            return max(0.0, self.delay_s + self.jitter_s * float(rng.uniform(-1.0, 1.0)))

        return draw


class DelayedTransport:
    """A `Transport` whose every request and reply is held up by a one-way delay."""

    def __init__(
        self,
        inner: Transport,
        one_way: Callable[[], float],
        *,
        sleep: Callable[[float], object] = time.sleep,
    ) -> None:
        self.inner = inner
        self._one_way = one_way
        self._sleep = sleep

    @property
    def endpoint(self) -> Any:
        """The wrapped transport's endpoint (openpi's, say), so the client speaks its format."""
        return getattr(self.inner, "endpoint", None)

    def metadata(self, *, timeout_s: float | None = None) -> Any:
        self._sleep(self._one_way())
        document = self.inner.metadata(timeout_s=timeout_s)
        self._sleep(self._one_way())
        return document

    def exchange(
        self, body: bytes, content_type: str, accept: str, *, timeout_s: float | None = None
    ) -> Reply:
        self._sleep(self._one_way())
        reply = self.inner.exchange(body, content_type, accept, timeout_s=timeout_s)
        self._sleep(self._one_way())
        return reply

    def close(self) -> None:
        self.inner.close()


class DelayedStream(DelayedTransport):
    """`DelayedTransport` around a websocket: a reply read after a skipped one is late too."""

    inner: Any

    def receive(self, *, timeout_s: float | None = None) -> Reply:
        reply: Reply = self.inner.receive(timeout_s=timeout_s)
        self._sleep(self._one_way())
        return reply

    def reset(self) -> None:
        self.inner.reset()


def delayed(inner: Transport, one_way: Callable[[], float]) -> DelayedTransport:
    """`inner` with the delays `one_way` draws added both ways, a stream if `inner` is one."""
    if isinstance(inner, ReplyStream):
        return DelayedStream(inner, one_way)
    return DelayedTransport(inner, one_way)


def measure_round_trip(infer: InferFn, observation: Observation, *, repeat: int = 5) -> float:
    """The median seconds of `repeat` real inferences of `observation`, after one to warm up
    (which also checks the server takes the observation at all): the round trip a simulated
    run charges for every request."""
    infer(observation)
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        infer(observation)
        times.append(time.perf_counter() - started)
    return statistics.median(times)


@dataclass
class _Call:
    arrives_at: float
    released: threading.Event = field(default_factory=threading.Event)


class SimulatedTime:
    """The clock of a deterministic run, and the network it delivers replies through.

    `clock` is the time: it moves only in `advance`. `link(infer)` is the inference callable
    for the executor: it runs the real request at once, then holds the reply until `advance`
    reaches the time it would have arrived. One request may be in flight at a time, as in
    `ChunkExecutor`.
    """

    def __init__(self, round_trip_s: float, one_way: Callable[[], float]) -> None:
        if not math.isfinite(round_trip_s) or round_trip_s < 0:
            raise ValueError(f"round_trip_s must be finite and >= 0, got {round_trip_s!r}")
        self.round_trip_s = round_trip_s
        self._one_way = one_way
        self.now = 0.0
        self._changed = threading.Condition()
        self._call: _Call | None = None
        self._ended = False

    def clock(self) -> float:
        """The simulated time in seconds."""
        return self.now

    def link(self, infer: InferFn) -> InferFn:
        """`infer`, its replies (and failures) held back until they are due; keywords (the
        executor's ``rtc=``) are passed on."""

        def infer_in_time(observation: Observation, **parameters: Any) -> ActionResult:
            sent_at = observation.oldest_capture_time
            sent_at = self.now if sent_at is None else sent_at
            try:
                outcome: ActionResult | Exception = infer(observation, **parameters)
            except Exception as exc:  # delivered when due, like a reply
                outcome = exc
            latency = self._one_way() + self.round_trip_s + self._one_way()
            call = _Call(sent_at + latency)
            with self._changed:
                if self._ended:
                    call.released.set()
                self._call = call
                self._changed.notify_all()
            call.released.wait()
            if isinstance(outcome, Exception):
                raise outcome
            return outcome

        return infer_in_time

    def advance(self, seconds: float, *, in_flight: bool) -> bool:
        """Move the clock on by `seconds`; True when the reply in flight is now due and
        handed over (the caller then waits for the executor to take it: `join`).

        `in_flight` says whether the executor has a request out; its reply's arrival time is
        known once the real request is done, and is waited for here.
        """
        target = self.now + seconds
        delivered = False
        if in_flight:
            with self._changed:
                while self._call is None:
                    self._changed.wait()
                call = self._call
                if call.arrives_at <= target + _EPSILON_S:
                    self._call = None
                    call.released.set()
                    delivered = True
        self.now = target
        return delivered

    def end(self) -> None:
        """The episode is over: hand over any reply held, now or when its request finishes,
        so no thread waits on."""
        with self._changed:
            self._ended = True
            if self._call is not None:
                self._call.released.set()
                self._call = None
