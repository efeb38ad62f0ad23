"""A policy that solves the built-in reach task (`vla_client.tasks.reach`) from its camera frames.

It sees what a learned policy would see, the decoded ``top`` and ``wrist`` frames and the
episode clock in the state, and nothing of the simulator: it finds the magenta target ring and
the blue robot by colour in the pixels, tracks the target between requests to estimate its
velocity, and answers a chunk of goal positions: where the target will be at each step. Row h
is the goal for the h-th step after the observation was taken, so an executor that skips the
steps that passed while the chunk was computed keeps the plan on time; one that plays it from
its first row lags behind the target by the round trip.

What it knows of the cameras (their scale, the colours) is what it would have learned from
training on this task; JPEG artefacts, resizing and a wrong camera mapping hurt it as they would
hurt a learned policy. The velocity track is kept per task text and restarts when the episode
clock goes back, so one server can serve consecutive episodes (of one evaluation at a time per
task text).
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass

import cv2
import numpy as np

from vla_client.errors import PolicyInputError
from vla_client.server.policy import Policy, PolicyInput, PolicySpec
from vla_client.tasks.reach import (
    ROBOT_RGB,
    TARGET_RADIUS_M,
    TARGET_RGB,
    TOP_PX_PER_M,
    WORKSPACE_M,
    WRIST_PX_PER_M,
)
from vla_client.validation import check_at_least, check_positive

MIN_SATURATION = 170
MIN_VALUE = 235
"""Brighter than anything on the table but the two markers (its clutter stays below ~240 and
is rarely this saturated), with room for JPEG's colour errors."""
HUE_TOLERANCE = 8
"""OpenCV hue units (0..179) either side of a marker's hue."""
MIN_BLOB_PX = 6
MARKER_REACH_M = 2.5 * TARGET_RADIUS_M
"""How far from a marker's largest blob its other pieces may lie."""
TRACKS_KEPT = 64
"""Tasks whose target track is remembered; the least recently seen is forgotten first."""
VELOCITY_SMOOTHING = 0.5
"""Weight of the newest velocity measurement against the running estimate."""
MAX_TRACK_GAP_S = 2.0
"""A longer gap between observations of one task starts a new track."""


def _hue(rgb: tuple[int, int, int]) -> int:
    pixel = np.array([[rgb]], dtype=np.uint8)
    return int(cv2.cvtColor(pixel, cv2.COLOR_RGB2HSV)[0, 0, 0])


TARGET_HUE = _hue(TARGET_RGB)
ROBOT_HUE = _hue(ROBOT_RGB)


@dataclass
class _Track:
    time_s: float
    position: np.ndarray
    velocity: np.ndarray


class ReachPolicy(Policy):
    """Chases the moving target of the reach task, seen through its ``top`` and ``wrist`` frames.

    Each row is a goal position (metres on the table): where the target will be at the end of
    that step. Options: `action_horizon` (steps per chunk) and `rate_hz` (the control rate the
    steps are planned for; the eval's ``--rate`` must match it).
    """

    def __init__(
        self,
        *,
        action_horizon: int = 10,
        rate_hz: float = 10.0,
    ) -> None:
        check_at_least("action_horizon", action_horizon, 1, integer=True)
        check_positive("rate_hz", rate_hz, finite=True)
        self.rate_hz = float(rate_hz)
        self._tracks: OrderedDict[str, _Track] = OrderedDict()
        self._spec = PolicySpec(
            family="reach",
            action_horizon=action_horizon,
            action_dim=2,
            camera_names=("top", "wrist"),
            state_dim=1,
            num_inference_steps=1,
        )

    @property
    def spec(self) -> PolicySpec:
        return self._spec

    def infer(self, observation: PolicyInput) -> np.ndarray:
        horizon = observation.action_horizon or self._spec.action_horizon
        _, target_m, velocity = self.sense(observation)
        return self.plan(target_m, velocity, horizon)

    def sense(self, observation: PolicyInput) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Where the robot and the target are (metres on the table) and the target's velocity
        estimate (m/s), from the frames; `PolicyInputError` when either marker is out of sight
        (a frame of something else than the reach task: the request is refused with 400)."""
        now = float(observation.state[0]) if observation.state is not None else 0.0
        top = observation.images["top"]
        target = find_marker(top, TARGET_HUE, MARKER_REACH_M * TOP_PX_PER_M)
        robot = find_marker(top, ROBOT_HUE, MARKER_REACH_M * TOP_PX_PER_M)
        if target is None or robot is None:
            missing = " or ".join(
                name for name, seen in (("target", target), ("robot", robot)) if seen is None
            )
            raise PolicyInputError(
                f"the top camera shows no {missing}: this policy reads frames of the built-in "
                "reach task (its magenta target ring and blue robot), as vla-client eval and "
                "examples/rtc_reach.py send them, not other images"
            )
        target_m = target / TOP_PX_PER_M
        wrist = observation.images["wrist"]
        close = find_marker(wrist, TARGET_HUE, MARKER_REACH_M * WRIST_PX_PER_M)
        if close is not None:  # the wrist camera, centred on the robot, sees it finer
            centre = np.array([wrist.shape[1], wrist.shape[0]]) / 2
            target_m = robot / TOP_PX_PER_M + (close - centre) / WRIST_PX_PER_M
        velocity = self._track(observation.task, now, target_m)
        return robot / TOP_PX_PER_M, target_m, velocity

    def _track(self, task: str, now: float, position: np.ndarray) -> np.ndarray:
        """The target's velocity estimate, updated with where it is at episode time `now`."""
        track = self._tracks.pop(task, None)
        velocity = np.zeros(2)
        if track is not None and 0 < now - track.time_s <= MAX_TRACK_GAP_S:
            measured = (position - track.position) / (now - track.time_s)
            velocity = VELOCITY_SMOOTHING * measured + (1 - VELOCITY_SMOOTHING) * track.velocity
        elif track is not None and now == track.time_s:
            velocity = track.velocity
        self._tracks[task] = _Track(now, position, velocity)
        while len(self._tracks) > TRACKS_KEPT:
            self._tracks.popitem(last=False)
        return velocity

    def plan(self, target: np.ndarray, velocity: np.ndarray, horizon: int) -> np.ndarray:
        """Where the target will be at the end of each step: the robot's goal for that step."""
        ends = (np.arange(horizon, dtype=np.float64)[:, None] + 1) / self.rate_hz
        chunk: np.ndarray = np.clip(target + ends * velocity, 0.0, WORKSPACE_M).astype(np.float32)
        return chunk


def find_marker(frame: np.ndarray, hue: int, reach_px: float) -> np.ndarray | None:
    """The (x, y) pixel centre of the marker of `hue`, or None when there is none.

    The marker is the largest saturated, bright blob of that hue together with every such pixel
    within `reach_px` of it: the robot passing over the ring cuts it into arcs, and one arc's
    centre is not the ring's.
    """
    hsv = cv2.cvtColor(frame, cv2.COLOR_RGB2HSV)
    low, high = hue - HUE_TOLERANCE, hue + HUE_TOLERANCE
    mask = cv2.inRange(hsv, (max(low, 0), MIN_SATURATION, MIN_VALUE), (min(high, 179), 255, 255))
    count, _, stats, centroids = cv2.connectedComponentsWithStats(mask, connectivity=8)
    if count <= 1:
        return None
    largest = 1 + int(np.argmax(stats[1:, cv2.CC_STAT_AREA]))
    if stats[largest, cv2.CC_STAT_AREA] < MIN_BLOB_PX:
        return None
    x, y = centroids[largest]
    left, top = max(0, int(x - reach_px)), max(0, int(y - reach_px))
    window = mask[top : int(y + reach_px) + 1, left : int(x + reach_px) + 1]
    moments = cv2.moments(window, binaryImage=True)
    return np.array([left + moments["m10"] / moments["m00"], top + moments["m01"] / moments["m00"]])
