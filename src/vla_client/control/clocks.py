"""The two clocks of a control loop: one that stamps frames, one that schedules.

Cameras stamp `capture_times` on whatever clock they use, `time.monotonic` or the wall clock
(`time.time`, which NTP or a user may set forward or back at any moment). Observation ages must
be measured on that clock. Everything that waits or counts down (the ticks of a loop, a reply's
deadline, the watchdog's silence, a rate limit) runs on a monotonic clock, which only moves
forward: a wall clock stepped back an hour would stop a loop for an hour, and one stepped
forward would make it fire the ticks it "missed" back to back.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

log = logging.getLogger(__name__)

Clock = Callable[[], float]
"""Seconds, as `time.monotonic` gives them."""

WALL_CLOCKS: tuple[Clock, ...] = (time.time,)
"""Clocks known to be set by others, which may stamp frames but never schedule."""

STEP_S = 1.0
"""A change this large in the offset between the stamp clock and the monotonic clock, from one
reading to the next, is a step of the stamp clock (NTP slews far slower than this)."""


def clock_name(clock: Clock) -> str:
    """How an error names a clock: ``time.monotonic``, or the object's repr."""
    module, name = getattr(clock, "__module__", None), getattr(clock, "__qualname__", None)
    return f"{module}.{name}" if module and name else repr(clock)


def check_monotonic(option: str, clock: object) -> None:
    """Raise `ValueError` unless `clock` is a callable that can serve as a monotonic clock.

    Only a known wall clock can be refused (nothing tells a fake clock from a real one); a
    clock that goes back anyway is caught where it is read (`TickSchedule`)."""
    if not callable(clock):
        raise ValueError(f"{option} must be a callable giving seconds; got {clock!r}")
    if clock in WALL_CLOCKS:
        raise ValueError(
            f"{option} must be a monotonic clock (time.monotonic, or a fake one in tests), not "
            f"the wall clock {clock_name(clock)}, which can be set back or forward; a wall clock "
            "may only stamp frames (ChunkExecutor(clock=))"
        )


def shared_clock(what: str, own: Clock | None, loop: Clock, measures: str) -> Clock:
    """The clock a loop's part runs on: its own if it has one and it is the loop's, else the
    loop's; `ValueError` when it has another, since `measures` would span two clocks."""
    if own is None or own == loop:
        return loop
    raise ValueError(
        f"the {what} runs on {clock_name(own)}, the loop on {clock_name(loop)}: {measures} "
        f"would be measured across two clocks; give the {what} the loop's clock, or no clock "
        "to take the loop's"
    )


class StepWatch:
    """Notices when a stamp clock is set forward or back, by comparing it with a monotonic one.

    The two move together, so their difference stays put; a change of more than `STEP_S`
    between two readings is a step, which `read()` logs as a warning.
    """

    def __init__(self, clock: Clock, monotonic: Clock) -> None:
        self._clock = clock
        self._monotonic = monotonic
        self._offset: float | None = None

    def read(self) -> float:
        """The stamp clock's time now."""
        now = self._clock()
        if self._clock == self._monotonic:
            return now
        offset = now - self._monotonic()
        if self._offset is not None and abs(offset - self._offset) > STEP_S:
            log.warning(
                "%s stepped %+.3f s (set by NTP or by hand?): frames stamped before the step "
                "have wrong ages; the loop's timing is not affected",
                clock_name(self._clock),
                offset - self._offset,
            )
        self._offset = offset
        return now
