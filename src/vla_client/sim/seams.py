"""The seam metric: how far the command jumps where the robot switches chunks, relative to how
far it moves between consecutive rows of one chunk.

Chunks sampled independently from a stochastic policy need not agree where one takes over from
the other, and the robot feels the difference as a jerk at every switch (the jerky seams LeRobot
users report). Per episode, `SeamMeter` sees each tick's action and the request it came from
(`ChunkExecutor.source`): a tick whose action comes from another request than the tick before is
a seam, and its jump is the distance between the two actions; every other pair of consecutive
ticks is a step within a chunk. The metric is the mean seam jump over the mean step within
chunks: about 1 when chunks continue each other, much more when they disagree. Ticks without
an action break the chain (there is no jump to measure across them).
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, replace

import numpy as np

from vla_client.control.chunk import ActionSource


@dataclass(frozen=True)
class Seams:
    """Sums and counts of seam jumps and within-chunk steps, so cells can pool episodes."""

    seams: int = 0
    jump_sum: float = 0.0
    steps: int = 0
    step_sum: float = 0.0

    @property
    def mean_jump(self) -> float:
        """Mean distance between the actions either side of a chunk switch (NaN: none)."""
        return self.jump_sum / self.seams if self.seams else math.nan

    @property
    def mean_step(self) -> float:
        """Mean distance between consecutive actions of one chunk (NaN: none)."""
        return self.step_sum / self.steps if self.steps else math.nan

    @property
    def ratio(self) -> float:
        """Mean seam jump over mean within-chunk step: the seam metric (NaN when either is
        unmeasured or the robot never moved within a chunk)."""
        step = self.mean_step
        return self.mean_jump / step if step > 0 else math.nan

    def summary(self) -> dict[str, float | int]:
        """Plain values for JSON."""
        return {
            "seams": self.seams,
            "mean_jump": self.mean_jump,
            "within_steps": self.steps,
            "mean_step": self.mean_step,
            "ratio": self.ratio,
        }

    @staticmethod
    def pooled(parts: Iterable[Seams]) -> Seams:
        """The seams of several episodes together."""
        parts = list(parts)
        return Seams(
            sum(p.seams for p in parts),
            sum(p.jump_sum for p in parts),
            sum(p.steps for p in parts),
            sum(p.step_sum for p in parts),
        )


class SeamMeter:
    """Counts seams and steps in one episode's actions; `add` once per tick."""

    def __init__(self) -> None:
        self._last: tuple[np.ndarray, str | None] | None = None
        self.seams = Seams()

    def add(self, action: np.ndarray | None, source: ActionSource | None) -> None:
        """This tick's action and where it came from (None for both: a tick without one)."""
        if action is None or source is None:
            self._last = None
            return
        current = (np.asarray(action, dtype=np.float64), source.request_id)
        if self._last is not None:
            distance = float(np.linalg.norm(current[0] - self._last[0]))
            seams = self.seams
            if current[1] != self._last[1]:
                seams = replace(seams, seams=seams.seams + 1, jump_sum=seams.jump_sum + distance)
            else:
                seams = replace(seams, steps=seams.steps + 1, step_sum=seams.step_sum + distance)
            self.seams = seams
        self._last = current
