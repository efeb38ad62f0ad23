"""Decide what the robot does when the policy server goes silent.

Peers either block forever or leave this to the user. Here the choice is explicit: once no new
chunk has arrived for `timeout_s`, the watchdog trips and applies one behaviour until a chunk
arrives again:

- ``hold``: stop following the (now old) chunk and repeat the last action;
- ``stop``: send `stop_action`, or raise `ServerSilentError` when none is configured;
- ``finish_chunk``: play the current chunk to its end, then repeat its last action.

Before the timeout, a tick with no action (the chunk ran out while the next one is in flight)
repeats the last action, so the robot holds rather than receiving nothing.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

import numpy as np
import numpy.typing as npt

from vla_client.control.types import Action
from vla_client.errors import ServerSilentError

log = logging.getLogger(__name__)

Behaviour = Literal["hold", "stop", "finish_chunk"]
BEHAVIOURS: tuple[Behaviour, ...] = ("hold", "stop", "finish_chunk")


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
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if timeout_s <= 0:
            raise ValueError("timeout_s must be > 0")
        if behaviour not in BEHAVIOURS:
            raise ValueError(f"behaviour must be one of {', '.join(BEHAVIOURS)}; got {behaviour!r}")
        self.timeout_s = timeout_s
        self.behaviour = behaviour
        self._stop_action = None if stop_action is None else np.asarray(stop_action, np.float32)
        self._on_trip = on_trip
        self._clock = clock
        self._started_at: float | None = None
        self._last: Action | None = None
        self.tripped = False
        self.trips = 0

    def filter(self, action: Action | None, last_chunk_at: float | None) -> Action | None:
        """The action to execute this tick, given the chunk's action and when a chunk last came.

        Silence before the first chunk counts from the first call. Returns None only when there
        is nothing to repeat yet.
        """
        now = self._clock()
        if self._started_at is None:
            self._started_at = now
        silent_s = now - (self._started_at if last_chunk_at is None else last_chunk_at)
        self._update(silent_s)
        if self.tripped and self.behaviour == "stop":
            if self._stop_action is None:
                raise ServerSilentError(f"no action chunk for {silent_s:.3f} s")
            action = self._stop_action
        elif action is None or (self.tripped and self.behaviour == "hold"):
            action = self._last
        self._last = action
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
