"""When the ticks of a fixed-rate loop happen, on a monotonic clock.

Pacing with ``sleep(period - elapsed)`` after each tick lets every overshoot of the sleep add
up, so a loop drifts slower than its rate. `TickSchedule` instead sleeps until the absolute time
of the next tick (start + k * period): a tick that starts a little late runs at once, and the
next one is back on the schedule.

A tick a whole period late or more (a stall in `apply_action`: a driver hiccup, a GC pause, a
slow disk write) has missed its slot, and so have the ones after it. Running the missed ticks
then would command the robot at CPU speed, many actions a fraction of a millisecond apart, so
they are skipped: the late tick runs now, as the tick of the slot it is in, and the schedule
starts again from it. Each tick says how many were skipped before it, so a chunk executor told
(`ChunkExecutor.skip`) stays aligned to time.

The clock is read every time and never trusted to go only forward: one that goes back (a fake
clock, a clock that is not monotonic after all) moves the schedule back with it, with a
warning, instead of sleeping until it catches up; one that jumps forward is a late tick. One
that stands still while the loop sleeps (a broken clock source) would keep the loop asleep
forever, its watchdog, which reads the same clock, never tripping: once the loop has waited
`STILL_S` real seconds (on `time.perf_counter`) without the clock advancing, the wait raises
`ClockStoppedError`. A fake sleep that advances a fake clock never comes near it.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass

from vla_client.control.clocks import Clock, clock_name
from vla_client.errors import ClockStoppedError

log = logging.getLogger(__name__)

STILL_S = 1.0
"""Real seconds of waiting for a tick, with the schedule's clock standing still all along,
after which the clock is taken for broken."""


@dataclass(frozen=True)
class Tick:
    """A tick that is due: how many were skipped before it, and how late it is."""

    skipped: int
    """Ticks skipped just before this one, because their time had passed."""
    late_s: float
    """How long after the first tick not yet run was due this one starts (>= 0); a whole
    period or more means ticks were skipped."""


class TickSchedule:
    """The ticks of one run of a loop at `period_s` on a monotonic `clock`, slept to with
    `sleep`. The first `wait()` starts the schedule: the first tick is due at once."""

    def __init__(self, period_s: float, clock: Clock, sleep: Callable[[float], object]) -> None:
        self.period_s = period_s
        self._clock = clock
        self._sleep = sleep
        self._due: float | None = None
        self._last_read: float | None = None
        self._still_since: float | None = None
        """`time.perf_counter` when the clock was last seen to stand still across a sleep,
        from the start of that sleep; None while it advances."""
        self._warned = False
        self.clock_steps = 0
        """Times the clock went back."""

    def wait(self, stopping: Callable[[], bool]) -> Tick | None:
        """Sleep until the next tick is due and return it; None once `stopping()` is true.
        `ClockStoppedError` when the clock stands still while it sleeps (`STILL_S`)."""
        now = self._now()
        if self._due is None:
            self._due = now
        while not stopping() and now < self._due:
            slept_at = time.perf_counter()
            self._sleep(self._due - now)  # a timed wait may wake early: check again
            before, now = now, self._now()
            self._check_advanced(before, now, slept_at)
        if stopping():
            return None
        late_s = now - self._due
        skipped = int(late_s // self.period_s)
        if skipped:
            self._skip(skipped, late_s)
            self._due = now  # pace from now: the next tick is a whole period after this one
        self._due += self.period_s
        return Tick(skipped, late_s)

    def _check_advanced(self, before: float, now: float, slept_at: float) -> None:
        """Raise `ClockStoppedError` once the clock has read no later than `before` across
        sleeps that took `STILL_S` real seconds, the first starting at `slept_at`."""
        if now > before:
            self._still_since = None
            return
        if self._still_since is None:
            self._still_since = slept_at
        still_s = time.perf_counter() - self._still_since
        if still_s >= STILL_S:
            raise ClockStoppedError(
                f"{clock_name(self._clock)} stood still at {now!r} for {still_s:.1f} s of real "
                "time while the control loop waited for its next tick: the ticks, the reply "
                "deadlines and the watchdog all run on it; give ChunkExecutor(monotonic=) a "
                "clock that advances (time.monotonic), or a fake sleep that advances a fake clock"
            )

    def _skip(self, ticks: int, late_s: float) -> None:
        # Once a run at warning level: a loop that keeps stalling says so in its stats.
        level = logging.DEBUG if self._warned else logging.WARNING
        self._warned = True
        log.log(
            level,
            "control loop %.1f ms late: skipped %d tick(s) rather than run them back to back "
            "(more are counted in LoopStats.skipped, not logged)",
            late_s * 1e3,
            ticks,
        )

    def _now(self) -> float:
        now = self._clock()
        last, self._last_read = self._last_read, now
        if last is not None and now < last:
            self.clock_steps += 1
            log.warning(
                "%s went back %.3f s: the schedule moves back with it",
                clock_name(self._clock),
                last - now,
            )
            if self._due is not None:
                self._due -= last - now
        return now
