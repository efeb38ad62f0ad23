"""The callable shapes the control package plugs together, so any transport fits."""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

import numpy as np
import numpy.typing as npt

from vla_client.client.result import ActionResult
from vla_client.observation import Observation

Action = npt.NDArray[np.float32]
"""One action vector ``[D]`` (or a chunk ``[H, D]``), float32 like `ActionResult.actions`."""

Observe = Callable[[], Observation]
"""Reads the robot now: cameras, state, task. Called on the control thread."""

ApplyAction = Callable[[Action], None]
"""Sends one action to the robot."""

InferFn = Callable[[Observation], ActionResult]
"""One blocking inference, such as `ActionClient.infer`.

It is expected to check that the reply it returns is for the request it sent (`ActionClient`
raises `MismatchedReplyError` otherwise) and to give each reply a distinct `request_id`.
"""


class TickLog(Protocol):
    """What a `ControlLoop` tells a log (`vla_client.viz.RerunLog`) of its run.

    The loop hands over its clock and period when it is built, then, after each tick's action
    is applied, the tick's time on that clock, its observation and the action (None on a tick
    without one). `tick` runs on the control thread: it must return at once and never raise.
    """

    def use_clock(self, clock: Callable[[], float], period_s: float) -> None:
        """Time everything on `clock`; the loop ticks every `period_s` seconds."""

    def tick(self, t: float, observation: Observation, action: Action | None) -> None:
        """One tick at clock time `t`: what the robot was seen as, and the action applied."""
