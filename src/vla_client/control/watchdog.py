"""Decide what the robot does when the policy server goes silent.

Peers either block forever or leave this to the user. Here the choice is explicit: once no new
chunk has arrived for `timeout_s`, the watchdog trips and applies one behaviour until a chunk
arrives again:

- ``hold``: stop following the (now old) chunk and repeat the last action. Right for position
  control, where the last command is a target the robot stays at;
- ``zero``: command zero in every dimension (shaped like the last action). Right for velocity
  control, where repeating the last command would keep the robot moving through the outage;
- ``stop``: send `stop_action` (a brake, a home pose: the robot's own safe command), or raise
  `ServerSilentError` when none is configured, which ends the control loop;
- ``finish_chunk``: play the current chunk to its end, then repeat its last action (so, like
  ``hold``, for position control).

Before the timeout, a tick with no action (the chunk ran out while the next one is in flight)
repeats the last action, so the robot holds rather than receiving nothing.

Silence is measured from the executor's `last_chunk_at`, so the watchdog must read the same
monotonic clock as the executor: in a `ControlLoop` it is handed the loop's (and the loop
refuses a watchdog built with another one); on its own it reads `time.monotonic`. The wall
clock is refused: set back an hour, it would hide an hour of silence.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from vla_client.control.clocks import check_monotonic, shared_clock
from vla_client.control.names import BEHAVIOURS, Behaviour
from vla_client.control.types import Action
from vla_client.errors import ServerSilentError
from vla_client.validation import check_choice, check_positive

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class WatchdogTrip:
    """What `on_trip` is told: how long the server had been silent, and what happens now."""

    silent_s: float
    behaviour: Behaviour


class Watchdog:
    """Filters each tick's action according to how long the server has been silent."""

    def __init__(
        self,
        timeout_s: float,
        behaviour: Behaviour = "hold",
        *,
        stop_action: npt.ArrayLike | None = None,
        on_trip: Callable[[WatchdogTrip], None] | None = None,
        clock: Callable[[], float] | None = None,
    ) -> None:
        """`clock`: None (the default) runs on the monotonic clock of the `ControlLoop` the
        watchdog is given to, or on `time.monotonic` when used on its own; a wall clock
        (`time.time`) is a `ValueError`."""
        check_positive("timeout_s", timeout_s, finite=True)
        if clock is not None:
            check_monotonic("the watchdog's clock", clock)
        check_choice("behaviour", behaviour, BEHAVIOURS)
        if stop_action is not None and behaviour != "stop":
            raise ValueError(f"stop_action is only used by behaviour 'stop', not {behaviour!r}")
        self.timeout_s = timeout_s
        self.behaviour = behaviour
        self._stop_action = None if stop_action is None else np.asarray(stop_action, np.float32)
        if self._stop_action is not None and not np.isfinite(self._stop_action).all():
            raise ValueError("stop_action must be finite")
        self._on_trip = on_trip
        self._clock = clock
        self._started_at: float | None = None
        self._last: Action | None = None
        self.tripped = False
        self.trips = 0

    @property
    def clock(self) -> Callable[[], float] | None:
        """The clock silence is measured on; None until given one or first used."""
        return self._clock

    def use_clock(self, clock: Callable[[], float]) -> None:
        """Measure silence on `clock` (a control loop's); `ValueError` if the watchdog already
        has another one, given when it was built or taken by an earlier loop or call."""
        self._clock = shared_clock("watchdog", self._clock, clock, "silence")

    def filter(self, action: Action | None, last_chunk_at: float | None) -> Action | None:
        """The action to execute this tick, given the chunk's action and when a chunk last came.

        Silence before the first chunk counts from the first call. Returns None only when there
        is nothing to repeat yet (with ``zero``: when no action was ever sent, so the robot has
        not been told to move).
        """
        if self._clock is None:
            self._clock = time.monotonic
        now = self._clock()
        if self._started_at is None:
            self._started_at = now
        silent_s = now - (self._started_at if last_chunk_at is None else last_chunk_at)
        self._update(silent_s)
        action = self._chosen(action, silent_s)
        self._last = action
        return action

    def _chosen(self, action: Action | None, silent_s: float) -> Action | None:
        """This tick's action: the chunk's, or once tripped what `behaviour` says (the stop
        action, zeros, or the last action held); the last action when the chunk has none."""
        if self.tripped and self.behaviour == "stop":
            if self._stop_action is None:
                raise ServerSilentError(f"no action chunk for {silent_s:.3f} s")
            return self._stop_action
        if self.tripped and self.behaviour == "zero":
            return None if self._last is None else np.zeros_like(self._last)
        if action is None or (self.tripped and self.behaviour == "hold"):
            return self._last
        return action

    def _update(self, silent_s: float) -> None:
        silent = silent_s > self.timeout_s
        if silent and not self.tripped:
            self.tripped = True
            self.trips += 1
            log.warning("server silent for %.3f s: %s", silent_s, self.behaviour)
            if self._on_trip is not None:
                self._on_trip(WatchdogTrip(silent_s, self.behaviour))
        elif not silent and self.tripped:
            self.tripped = False
            log.info("server back after %d watchdog trip(s)", self.trips)
