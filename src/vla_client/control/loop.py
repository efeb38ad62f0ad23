"""Run observe -> executor -> watchdog -> gate -> apply at a fixed rate.

The ticks are paced by `TickSchedule` on the executor's monotonic clock: each sleeps until its
absolute time (start + i * period), so sleep overshoots do not add up. A tick a whole period
late or more (a stall) skips the ticks it missed instead of running them back to back, and
the executor is told, because it counts ticks to align chunks: its tick count stays tied to
time. Skipped ticks are counted in `LoopStats.skipped` and logged once a run.

A loop given `record` reads the robot on every tick (not only when the executor asks for an
observation to send) and hands `record` each tick's observation with the action applied on it,
after the gate: what a dataset of the run needs. The executor is given that same observation
when it sends one, so the robot is read once a tick. A loop given `log` (a `TickLog`, such as
`vla_client.viz.RerunLog`) reads the robot on every tick too, and hands the log each tick's
time on the loop's clock, observation and action.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from vla_client.control.chunk import ChunkExecutor
from vla_client.control.clocks import clock_name
from vla_client.control.pacing import TickSchedule
from vla_client.control.safety import SafetyGate
from vla_client.control.stats import LoopStats
from vla_client.control.types import Action, ApplyAction, Observe, TickLog
from vla_client.control.watchdog import Watchdog
from vla_client.observation import Observation
from vla_client.validation import check_at_least, check_positive


class ControlLoop:
    """A fixed-rate control loop; any exception from the callables ends `run()` and propagates
    (the executor itself counts the failures a later request may not hit, and goes on).

    `run()` is for one thread at a time; `stop()` may be called from any thread, including from
    inside `apply_action`. `sleep` is injectable, with the executor's `monotonic` clock, so
    the schedule can be tested without waiting; by default the sleep wakes early when `stop()`
    is called. `reset` is called as each `run()` starts, before its first tick: a run is an
    episode, and `ActionClient.reset` there tells the server a new one begins.

    The loop uses the executor's two clocks (`ChunkExecutor(clock=, monotonic=)`). Its ticks,
    the executor's deadlines, the watchdog's silence and the gate's rate run on `monotonic`;
    the watchdog and the gate are handed it (one built with another clock is a `ValueError`).
    `clock`, the one the cameras stamp frames with (maybe the wall clock), only ages frames;
    `ControlLoop(clock=)` may be left out, and one other than the executor's is a `ValueError`.
    """

    def __init__(
        self,
        *,
        observe: Observe,
        executor: ChunkExecutor,
        apply_action: ApplyAction,
        rate_hz: float,
        gate: SafetyGate | None = None,
        watchdog: Watchdog | None = None,
        clock: Callable[[], float] | None = None,
        sleep: Callable[[float], object] | None = None,
        record: Callable[[Observation, Action], object] | None = None,
        reset: Callable[[], object] | None = None,
        log: TickLog | None = None,
    ) -> None:
        check_positive("rate_hz", rate_hz, finite=True)
        _check_hooks(reset, record, log)
        clock = _executor_clock(clock, executor)
        if watchdog is not None:
            watchdog.use_clock(executor.monotonic)
        if gate is not None:
            gate.use_clock(executor.monotonic)
        self.period_s = 1.0 / rate_hz
        if log is not None:
            log.use_clock(executor.monotonic, self.period_s)
        self._observe = observe
        self._executor = executor
        self._apply = apply_action
        self._gate = gate
        self._watchdog = watchdog
        self._record = record
        self._reset = reset
        self._log = log
        self._clock = clock
        self._stopping = threading.Event()
        self._sleep = sleep or self._stopping.wait
        self.stats = LoopStats()

    @property
    def clock(self) -> Callable[[], float]:
        """The clock frames are stamped with: the executor's `clock`."""
        return self._clock

    @property
    def monotonic(self) -> Callable[[], float]:
        """The clock the ticks run on: the executor's `monotonic`, the watchdog's, the gate's."""
        return self._executor.monotonic

    def stop(self) -> None:
        """Make `run()` return before its next tick."""
        self._stopping.set()

    def run(self, ticks: int | None = None) -> LoopStats:
        """Run `ticks` ticks (forever when None; else an integer >= 0) or until `stop()`;
        returns the stats. Skipped ticks do not count: `ticks` is how many run."""
        if ticks is not None:
            check_at_least("ticks", ticks, 0, integer=True)
        end = None if ticks is None else self.stats.ticks + ticks
        self._stopping.clear()
        if self._reset is not None:
            self._reset()
        schedule = TickSchedule(self.period_s, self.monotonic, self._sleep)
        try:
            while end is None or self.stats.ticks < end:
                tick = schedule.wait(self._stopping.is_set)
                if tick is None:
                    break
                self.stats.jitter_s.append(tick.late_s)
                if tick.skipped:
                    self.stats.overruns += 1
                    self.stats.skipped += tick.skipped
                    self._executor.skip(tick.skipped)
                self._tick()
        finally:
            self.stats.clock_steps += schedule.clock_steps
        return self.stats

    def _tick(self) -> None:
        self.stats.ticks += 1
        if self._record is None and self._log is None:
            self._act(self._observe)
            return
        observation = self._observe()
        action = self._act(lambda: observation)
        if action is not None and self._record is not None:
            self._record(observation, action)
        if self._log is not None:
            self._log.tick(self.monotonic(), observation, action)

    def _act(self, observe: Observe) -> Action | None:
        """This tick's action, through the executor, the watchdog and the gate, applied; None
        when there is none."""
        action = self._executor.tick(observe)
        if self._watchdog is not None:
            action = self._watchdog.filter(action, self._executor.last_chunk_at)
        if action is None:
            self.stats.idle += 1
            return None
        if self._gate is not None:
            action = self._gate.check(action)
        self._apply(action)
        self.stats.applied += 1
        return action


def _check_hooks(
    reset: Callable[[], object] | None,
    record: Callable[[Observation, Action], object] | None,
    log: TickLog | None,
) -> None:
    """`ValueError` for a `reset`, `record` or `log` given that cannot be called as the loop
    calls it."""
    if reset is not None and not callable(reset):
        raise ValueError(f"reset must be a callable taking nothing, or None; got {reset!r}")
    if record is not None and not callable(record):
        raise ValueError(
            f"record must be a callable taking (observation, action), or None; got {record!r}"
        )
    if log is not None and not callable(getattr(log, "tick", None)):
        raise ValueError(
            f"log must be a TickLog (vla_client.viz.RerunLog, say), or None; got {log!r}"
        )


def _executor_clock(
    clock: Callable[[], float] | None, executor: ChunkExecutor
) -> Callable[[], float]:
    """The loop's clock: the executor's, which a `clock` given must be (frames are stamped on
    one clock)."""
    if clock is None:
        return executor.clock
    if clock != executor.clock:
        raise ValueError(
            f"the loop's clock {clock_name(clock)} is not the executor's "
            f"{clock_name(executor.clock)}: frames are stamped on one clock; give "
            "ChunkExecutor the clock and leave ControlLoop's out"
        )
    return clock
