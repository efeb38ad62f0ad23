"""Run one evaluation episode: a simulated robot, the real executor and client, a clock.

Each tick the world is stepped once, whatever happened: the `ChunkExecutor` gives this tick's
action (fetching the next chunk in the background as on a robot), the `Watchdog` and
`SafetyGate`, when configured, have their say, and the world applies the action (or, with none,
goes on without one: the target keeps moving while the robot waits for its first chunk). That
is why this loop is not `ControlLoop`, which applies nothing on a tick without an action.

Time is either real (``realtime=True``: ticks on the monotonic clock, paced as `ControlLoop`
paces them, the network delay slept in the transport, as on a robot; a tick late by a period or
more, after a stall in the world, skips the ticks it missed rather than running them back to
back) or simulated (`SimulatedTime`: the clock advances one period per tick
and replies are handed over when due), which gives the same outcome for the same seed.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

import numpy as np

from vla_client.client.result import ActionResult
from vla_client.control.chunk import ChunkExecutor
from vla_client.control.names import EXECUTION_MODES, ExecutionMode
from vla_client.control.pacing import TickSchedule
from vla_client.control.safety import SafetyGate
from vla_client.control.stats import ExecutorStats
from vla_client.control.types import Action, InferFn
from vla_client.control.watchdog import Watchdog
from vla_client.errors import VLAClientError
from vla_client.observation import Observation
from vla_client.recording import ObservationWriter
from vla_client.sim.limits import RATE_RANGE_HZ
from vla_client.sim.network import NetworkDelay, SimulatedTime
from vla_client.sim.seams import SeamMeter, Seams
from vla_client.validation import check_at_least, check_choice, check_positive

if TYPE_CHECKING:
    from vla_client.protocol.models import ActionMetadata
    from vla_client.viz.rerun_log import RerunLog

T = TypeVar("T")

Mode = ExecutionMode
MODES: tuple[Mode, ...] = EXECUTION_MODES
"""How a chunk is played: from its first row however late (naive), from the row for the tick
it arrives on (aligned), aligned and cross-faded from the old chunk (blended), or continued by
the server (rtc, real-time chunking; see `ChunkExecutor`)."""
JOIN_TIMEOUT_S = 60.0
"""The longest an episode's end waits for its last request (a client timeout is shorter)."""


class World(Protocol):
    """A robot to evaluate on: the built-in `ReachTask`, or a Gymnasium environment."""

    cameras: tuple[str, ...]
    action_dim: int
    task: str
    steps: int
    success: bool
    episode_return: float

    @property
    def done(self) -> bool:
        """The episode is over (succeeded, failed or out of time)."""

    def reset(self, seed: int) -> None:
        """Start the episode `seed`."""

    def frames(self) -> dict[str, np.ndarray]:
        """What the cameras see now, by camera name."""

    def state(self) -> np.ndarray | None:
        """The state that goes with the frames."""

    def step(self, action: np.ndarray | None) -> None:
        """Apply one tick's action (None: a tick without one)."""


@dataclass(frozen=True)
class EvalConfig:
    """How the episodes run; every field is checked when given."""

    mode: Mode = "aligned"
    rate_hz: float = 10.0
    prefetch_at: int = 5
    """Ask for the next chunk when this many actions are left."""
    blend_steps: int = 3
    """Steps cross-faded into a new chunk in ``blended`` mode."""
    realtime: bool = False
    delay: NetworkDelay = field(default_factory=NetworkDelay)
    give_up_s: float = 1.0
    """An episode whose requests keep failing with no chunk for this long is marked failed."""
    max_steps: int = 10_000
    """Ticks at most per episode, for a world that never says it is done."""

    def __post_init__(self) -> None:
        check_choice("mode", self.mode, MODES)
        low, high = RATE_RANGE_HZ
        if not isinstance(self.rate_hz, int | float) or not low <= self.rate_hz <= high:
            raise ValueError(f"rate_hz must be in {low:g}..{high:g} Hz, got {self.rate_hz!r}")
        check_at_least("prefetch_at", self.prefetch_at, 0, integer=True)
        check_at_least("blend_steps", self.blend_steps, 1, integer=True)
        check_positive("give_up_s", self.give_up_s, finite=True)
        if not isinstance(self.delay, NetworkDelay):
            raise ValueError(f"delay must be a NetworkDelay; got {self.delay!r}")
        check_at_least("max_steps", self.max_steps, 1, integer=True)

    @property
    def period_s(self) -> float:
        """Seconds per tick."""
        return 1.0 / self.rate_hz


@dataclass
class EpisodeResult:
    """What one episode gave: the outcome, and what the loop saw on the way."""

    seed: int
    success: bool
    steps: int
    episode_return: float
    error: str | None
    """Why the episode was cut short (a server that went away or kept answering malformed
    chunks, an unsafe action, an environment that raised), or None."""
    duration_s: float
    """Episode time on the run's clock (simulated or real)."""
    wall_s: float
    requests: int
    chunks: int
    starved_ticks: int
    failed_requests: int
    """Requests that gave no chunk: errors, late or mismatched replies, malformed chunks."""
    staleness_ticks: float
    """Mean ticks between an accepted chunk's observation and its first use."""
    observation_to_action_ms: float
    """Median capture-to-chunk time on the run's clock (includes the injected delay)."""
    last_failure: str | None = None
    """Why the last failed request failed (None when none did), even in an episode that
    went on to succeed."""
    skipped_ticks: int = 0
    """Ticks skipped in real time because the loop was a period or more late (a stall in
    the world's step, say), rather than run back to back; always 0 in simulated time."""
    results: list[ActionResult] = field(default_factory=list, repr=False)
    """Every reply, for per-stage latency."""
    seams: Seams = field(default_factory=Seams)
    """Jumps at chunk switches and steps within chunks (`vla_client.sim.seams`)."""

    def summary(self) -> dict[str, object]:
        """The result as plain values (no replies), for JSON."""
        document = dict(vars(self))
        document.pop("results")
        document["seams"] = self.seams.summary()
        return document


def run_episode(
    world: World,
    infer: InferFn,
    seed: int,
    config: EvalConfig,
    *,
    round_trip_s: float = 0.0,
    gate: SafetyGate | None = None,
    make_watchdog: Callable[[Callable[[], float]], Watchdog] | None = None,
    record: Path | None = None,
    record_every: int = 1,
    reset: Callable[[], object] | None = None,
    log: RerunLog | None = None,
    server: ActionMetadata | None = None,
) -> EpisodeResult:
    """Play episode `seed` of `world` through `infer` (an `ActionClient.infer`, say).

    In simulated time every request is charged `round_trip_s` plus the two one-way delays of
    `config.delay` (drawn from a generator seeded with `seed`); in real time the delay must
    already be in `infer`'s transport (`vla_client.sim.network.delayed`). `make_watchdog`
    builds the episode's watchdog on the episode's clock. `record` is a file to write each
    tick's observation to with the action applied on it (``vla-client view`` shows it,
    ``vla-client export`` makes it a LeRobot dataset), or only every `record_every` ticks'.
    `reset` starts the server's episode (`ActionClient.reset`), after the world's. An exception
    from `world` (its reset, frames, state or step) ends the episode with the reason in
    `EpisodeResult.error`. `log` logs the episode to Rerun under ``MODE-DELAYms-seedN/``, on the
    episode's clock.
    `server` is the server's metadata, which mode ``rtc`` needs (it must announce real-time
    chunking); the execution horizon is then the announced horizon less `config.prefetch_at`,
    so rtc asks as often as the others.
    """
    check_at_least("record_every", record_every, 1, integer=True)
    episode = _Episode(
        world, infer, seed, config, round_trip_s=round_trip_s, gate=gate,
        make_watchdog=make_watchdog, record=record, record_every=record_every, log=log,
        server=server,
    )  # fmt: skip
    error = episode.play(reset)
    return episode.result(error)


class _Episode:
    """One episode's parts and what happens to them: the clock (simulated or real) and the
    executor that fetches through it, the gate, watchdog, log and recording around it, and the
    counts its result reports."""

    def __init__(
        self,
        world: World,
        infer: InferFn,
        seed: int,
        config: EvalConfig,
        *,
        round_trip_s: float,
        gate: SafetyGate | None,
        make_watchdog: Callable[[Callable[[], float]], Watchdog] | None,
        record: Path | None,
        record_every: int,
        log: RerunLog | None,
        server: ActionMetadata | None,
    ) -> None:
        self.world, self.seed, self.config, self.gate, self.log = world, seed, config, gate, log
        self._infer = infer
        self.results: list[ActionResult] = []
        self.simulated: SimulatedTime | None = None
        self.clock: Callable[[], float] = time.monotonic
        fetch: InferFn = self._collecting if log is None else log.infer(self._collecting)
        if not config.realtime:
            self.simulated = SimulatedTime(round_trip_s, config.delay.sampler(seed))
            self.clock, fetch = self.simulated.clock, self.simulated.link(fetch)
        self.executor = ChunkExecutor(
            fetch,
            prefetch_at=config.prefetch_at if config.mode != "rtc" else 0,
            blend_steps=config.blend_steps if config.mode == "blended" else 0,
            validate=gate.check_chunk if gate is not None else None,
            clock=self.clock,
            monotonic=self.clock,
            mode=config.mode,
            **_rtc_options(config, server),
        )
        self.seams = SeamMeter()
        if gate is not None:
            gate.reset()
        self.watchdog = make_watchdog(self.clock) if make_watchdog is not None else None
        if log is not None:
            name = f"{config.mode}-{config.delay.delay_s * 1e3:g}ms-seed{seed}"
            log.start(name, gate=gate, watchdog=self.watchdog)
            log.use_clock(self.clock, config.period_s)
        self.writer = _writer(record, world, seed, config, record_every)
        self.record_every = record_every
        self.wall_start = time.time()
        self.started = self.clock()
        self.current: Observation | None = None
        self.in_world = _WorldCalls()
        self.patience = _Patience(self.executor, self.started, config.give_up_s)
        self.schedule = TickSchedule(config.period_s, self.clock, time.sleep)
        self.skipped = 0
        self.world_reset = False

    def _collecting(self, observation: Observation, **parameters: Any) -> ActionResult:
        result = self._infer(observation, **parameters)
        self.results.append(result)
        return result

    def observe(self) -> Observation:
        """This tick's observation, read from the world once (the first time it is asked)."""
        if self.current is None:
            images = self.in_world(self.world.frames)
            self.current = Observation(
                images,
                state=self.in_world(self.world.state),
                task=self.world.task,
                capture_times=dict.fromkeys(images, self.clock()),
            )
        return self.current

    def play(self, reset: Callable[[], object] | None) -> str | None:
        """Reset the world (and the server, with `reset`) and tick until it is done, the
        requests have failed for too long or `max_steps`: why it ended early, or None."""
        try:
            self.in_world(self.world.reset, self.seed)
            self.world_reset = True
            if reset is not None:
                reset()
            for tick in range(self.config.max_steps):
                self._tick(tick)
                if self.in_world(lambda: self.world.done):
                    return None
                error = self.patience.exhausted(self.clock())
                if error is not None:
                    return error
            return None
        except Exception as exc:  # the episode fails; the run goes on
            error = self._failure(exc)
            if error is None:
                raise
            return error
        finally:
            if self.simulated is not None:
                self.simulated.end()
            self.executor.close(JOIN_TIMEOUT_S)
            if self.writer is not None:
                self.writer.close()

    def _tick(self, tick: int) -> None:
        """Wait for tick `tick`, then act, record and step the world once."""
        self._wait(tick)
        self.current = None
        action = _action(self.executor, self.observe, self.watchdog, self.gate)
        if self.writer is not None and tick % self.record_every == 0:  # with the action it takes
            wall_time = self.wall_start + self.clock() - self.started
            self.writer.write(self.observe(), wall_time=wall_time, applied_action=action)
        if self.log is not None:  # the tick's reading, before the action moves the world
            self.log.tick(self.clock(), self.observe(), action)
        self.seams.add(action, self.executor.source)
        self.in_world(self.world.step, action)

    def _wait(self, tick: int) -> None:
        """Until tick `tick` is due: a period of simulated time (handing over a reply that
        came due), or of real time, skipping the ticks a stall missed."""
        if self.simulated is not None:
            in_flight = self.executor.in_flight
            if tick and self.simulated.advance(self.config.period_s, in_flight=in_flight):
                self.executor.join(JOIN_TIMEOUT_S)
            return
        due = self.schedule.wait(lambda: False)
        assert due is not None  # None only once stopping, which it never is here
        if due.skipped:
            self.skipped += due.skipped
            self.executor.skip(due.skipped)

    def _failure(self, exc: Exception) -> str | None:
        """Why `exc` ended the episode, or None for an exception that is a bug to raise."""
        if exc is self.in_world.failure:
            return f"the environment failed: {_one_line(exc)}"
        if isinstance(exc, VLAClientError | ValueError):
            return _one_line(exc)
        return None

    def result(self, error: str | None) -> EpisodeResult:
        """What the episode gave, `error` the reason it ended early (or None)."""
        world, executor = self.world, self.executor
        stats = executor.stats
        samples = list(stats.latencies)
        staleness = float(np.mean([s.ticks_elapsed for s in samples])) if samples else math.nan
        return EpisodeResult(
            seed=self.seed,
            success=self.world_reset and bool(world.success) and error is None,
            steps=world.steps if self.world_reset else 0,
            episode_return=float(world.episode_return) if self.world_reset else 0.0,
            error=error,
            duration_s=self.clock() - self.started,
            wall_s=time.time() - self.wall_start,
            requests=stats.requests_sent,
            chunks=stats.chunks_received,
            starved_ticks=stats.starved_ticks,
            failed_requests=_failed_requests(stats),
            skipped_ticks=self.skipped,
            staleness_ticks=staleness,
            observation_to_action_ms=stats.observation_to_action_ms().p50,
            last_failure=None if executor.last_error is None else _one_line(executor.last_error),
            results=self.results,
            seams=self.seams.seams,
        )


def _failed_requests(stats: ExecutorStats) -> int:
    """Requests that gave no chunk to play: retryable errors, late or mismatched replies, and
    replies that broke the action API (a malformed chunk reads as a failure, never as a
    policy that is slow to answer)."""
    return stats.errors + stats.dropped_late + stats.dropped_mismatched + stats.malformed_replies


class _WorldCalls:
    """Calls into the world (an environment: its code, not this package's), remembering the
    exception one raised, so the episode can tell the world's failure from its own."""

    def __init__(self) -> None:
        self.failure: Exception | None = None

    def __call__(self, call: Callable[..., T], *args: object) -> T:
        try:
            return call(*args)
        except Exception as exc:  # an environment's own bug or refusal, whatever its type
            self.failure = exc
            raise


def _rtc_options(config: EvalConfig, server: ActionMetadata | None) -> dict[str, Any]:
    """The executor's real-time chunking options for `config`'s mode (none but for rtc)."""
    if config.mode != "rtc":
        return {}
    horizon = server.output.action_horizon if server is not None else None
    execution_horizon = max(1, horizon - config.prefetch_at) if horizon is not None else None
    return {"server": server, "execution_horizon": execution_horizon}


def _action(
    executor: ChunkExecutor,
    observe: Callable[[], Observation],
    watchdog: Watchdog | None,
    gate: SafetyGate | None,
) -> Action | None:
    action = executor.tick(observe)
    if watchdog is not None:
        action = watchdog.filter(action, executor.last_chunk_at)
    if action is not None and gate is not None:
        action = gate.check(action)
    return action


class _Patience:
    """Says when an episode's requests have failed for `give_up_s` with no chunk since."""

    def __init__(self, executor: ChunkExecutor, started: float, give_up_s: float) -> None:
        self._executor = executor
        self._started = started
        self._give_up_s = give_up_s
        self._chunks = 0
        self._failures_then = 0

    def exhausted(self, now: float) -> str | None:
        """Why to stop now, or None to go on."""
        executor = self._executor
        stats = executor.stats
        failures = _failed_requests(stats)
        if stats.chunks_received != self._chunks:
            self._chunks, self._failures_then = stats.chunks_received, failures
        last = self._started if executor.last_chunk_at is None else executor.last_chunk_at
        silent_s = now - last
        if failures == self._failures_then or silent_s <= self._give_up_s:
            return None
        return f"no chunk for {silent_s:.1f} s, requests failing: {_one_line(executor.last_error)}"


def _one_line(exc: BaseException | None) -> str:
    if exc is None:
        return "no error"
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0]}" if text else type(exc).__name__


def _writer(
    record: Path | None, world: World, seed: int, config: EvalConfig, record_every: int
) -> ObservationWriter | None:
    if record is None:
        return None
    return ObservationWriter(
        record,
        source="eval",
        fps=config.rate_hz / record_every,
        seed=seed,
        mode=config.mode,
        rate_hz=config.rate_hz,
        delay_s=config.delay.delay_s,
        jitter_s=config.delay.jitter_s,
        cameras=list(world.cameras),
    )
