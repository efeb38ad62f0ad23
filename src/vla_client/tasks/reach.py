"""The built-in evaluation task: reach a moving target, seen only through two cameras.

A point robot moves on a table (a 0.8 m x 0.45 m workspace) towards the position it is
commanded, at up to `ReachSettings.max_speed_mps` (position control, as most VLAs' arms); a
target ring slides across the table at constant speed and bounces off the edges. Two cameras
see them: ``top`` (360x640), fixed above the whole table, and ``wrist`` (224x224), mounted on
the robot and looking down at the 0.2 m around it. The table is `SyntheticScene`'s image
(texture, clutter, a moving arm, sensor noise), so PNG and JPEG cost what they cost on camera
images, and lossy coding, resizing and camera mapping reach the policy as they would reach a
learned one.

Success is defined here, never by the policy: the robot's centre stays within
`ReachSettings.success_radius_m` of the target's for `ReachSettings.hold_steps` consecutive
steps before `ReachSettings.duration_s` runs out. Each step's reward is minus the distance in
metres, so the return says how close the robot kept overall. Everything random (start positions,
the target's speed and heading, the table's look) comes from the episode's seed, so an episode
is reproduced exactly by its seed and its actions.

The observation's state is the episode's clock in seconds (one value): a robot knows its own
time, and a policy needs it to tell how fast what it sees is moving. Robot and target positions
are never in it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import cv2
import numpy as np

from vla_client.cameras.scene import SyntheticScene
from vla_client.validation import check_at_least, check_positive

WORKSPACE_M = (0.8, 0.45)
"""Table width and depth in metres; the top camera sees exactly this."""
TOP_SIZE = (360, 640)
"""(height, width) of the top camera."""
WRIST_SIZE = (224, 224)
"""(height, width) of the wrist camera."""
TOP_PX_PER_M = TOP_SIZE[1] / WORKSPACE_M[0]
WRIST_VIEW_M = 0.2
"""Width of the table the wrist camera sees, centred on the robot."""
WRIST_PX_PER_M = WRIST_SIZE[1] / WRIST_VIEW_M

TARGET_RGB = (255, 0, 190)
"""The target ring's colour: a saturated magenta nothing else on the table reaches."""
ROBOT_RGB = (0, 170, 255)
"""The robot's colour: a saturated sky blue."""
TARGET_RADIUS_M = 0.025
TARGET_RING_M = 0.006
ROBOT_RADIUS_M = 0.01
EDGE_MARGIN_M = 0.04
"""The target bounces this far from the table's edges, so it is always wholly in view."""
MIN_START_DISTANCE_M = 0.15

CAMERAS = ("top", "wrist")
TASK_TEXT = "move onto the magenta ring and stay on it"
_SUBPIXEL = 4  # OpenCV draws at 1/16 px with shift=4, so motion is smooth, not in pixel steps


@dataclass(frozen=True)
class ReachSettings:
    """The task's physics and its definition of success; every field is checked when given."""

    rate_hz: float = 10.0
    """Control steps per second: one action is applied per step of ``1 / rate_hz`` s."""
    duration_s: float = 15.0
    """An episode not succeeded by then has failed."""
    success_radius_m: float = 0.02
    hold_steps: int = 5
    """Consecutive steps within `success_radius_m` that count as success."""
    max_speed_mps: float = 0.3
    """The robot's own speed limit: it moves towards a far goal at this speed."""
    target_speed_mps: tuple[float, float] = (0.04, 0.1)
    """The target's speed is drawn uniformly from this range per episode."""

    def __post_init__(self) -> None:
        check_positive("rate_hz", self.rate_hz, finite=True)
        check_positive("duration_s", self.duration_s, finite=True)
        check_positive("success_radius_m", self.success_radius_m, finite=True)
        check_at_least("hold_steps", self.hold_steps, 1, integer=True)
        check_positive("max_speed_mps", self.max_speed_mps, finite=True)
        low, high = self.target_speed_mps
        check_at_least("target_speed_mps low", low, 0)
        check_at_least("target_speed_mps high", high, low)
        if not math.isfinite(high):
            raise ValueError(f"target_speed_mps high must be a finite number; got {high!r}")

    @property
    def dt(self) -> float:
        """Seconds per step."""
        return 1.0 / self.rate_hz

    @property
    def max_steps(self) -> int:
        """Steps in a whole episode."""
        return max(1, math.ceil(self.duration_s * self.rate_hz))


class ReachTask:
    """The reach task as a robot: `reset(seed)`, then `frames`/`state` and one `step` per tick.

    `step(None)` is a tick with no command: the robot stays put while the target moves on.
    """

    cameras: tuple[str, ...] = CAMERAS
    action_dim = 2
    task = TASK_TEXT

    def __init__(self, settings: ReachSettings | None = None) -> None:
        self.settings = settings or ReachSettings()
        self.reset(0)

    def reset(self, seed: int) -> None:
        """Start the episode `seed`: positions, target motion and table look all come from it."""
        check_at_least("seed", seed, 0, integer=True)
        rng = np.random.default_rng(seed)
        low = np.array([EDGE_MARGIN_M, EDGE_MARGIN_M])
        high = np.array(WORKSPACE_M) - EDGE_MARGIN_M
        self.target = rng.uniform(low, high)
        while True:
            self.robot = rng.uniform(low, high)
            if np.linalg.norm(self.robot - self.target) >= MIN_START_DISTANCE_M:
                break
        heading = rng.uniform(0, 2 * math.pi)
        speed = rng.uniform(*self.settings.target_speed_mps)
        self.target_velocity = speed * np.array([math.cos(heading), math.sin(heading)])
        self._scene = SyntheticScene(*TOP_SIZE, seed=seed)
        self.seed = seed
        self.steps = 0
        self.held = 0
        self.episode_return = 0.0
        self.success = False

    @property
    def distance_m(self) -> float:
        """Robot centre to target centre, in metres."""
        return float(np.linalg.norm(self.robot - self.target))

    @property
    def done(self) -> bool:
        """Succeeded, or out of time."""
        return self.success or self.steps >= self.settings.max_steps

    @property
    def elapsed_s(self) -> float:
        """The episode's clock: steps taken times the step length."""
        return self.steps * self.settings.dt

    def state(self) -> np.ndarray:
        """The episode's clock in seconds, as a one-value float32 state."""
        return np.array([self.elapsed_s], dtype=np.float32)

    def step(self, action: np.ndarray | None) -> None:
        """Apply one command: the (x, y) position in metres the robot should move to.

        x runs right and y towards the top camera's bottom edge, from the table's corner. The
        robot moves straight at it, at most ``max_speed_mps * dt`` this step, and stays on the
        table; None leaves it where it is.
        """
        settings = self.settings
        if action is not None:
            goal = np.asarray(action, dtype=np.float64).reshape(-1)
            if goal.shape != (2,) or not np.isfinite(goal).all():
                raise ValueError(f"the reach task takes a finite [2] position, got {action!r}")
            move = np.clip(goal, 0.0, WORKSPACE_M) - self.robot
            length = float(np.linalg.norm(move))
            longest = settings.max_speed_mps * settings.dt
            if length > longest:
                move *= longest / length
            self.robot = self.robot + move
        self._move_target(settings.dt)
        self.steps += 1
        distance = self.distance_m
        self.episode_return -= distance
        self.held = self.held + 1 if distance <= settings.success_radius_m else 0
        self.success = self.success or self.held >= settings.hold_steps

    def _move_target(self, dt: float) -> None:
        position = self.target + self.target_velocity * dt
        for axis, size in enumerate(WORKSPACE_M):
            low, high = EDGE_MARGIN_M, size - EDGE_MARGIN_M
            if position[axis] < low:
                position[axis] = 2 * low - position[axis]
                self.target_velocity[axis] = abs(self.target_velocity[axis])
            elif position[axis] > high:
                position[axis] = 2 * high - position[axis]
                self.target_velocity[axis] = -abs(self.target_velocity[axis])
        self.target = position

    def frames(self) -> dict[str, np.ndarray]:
        """What the two cameras see now."""
        top = self._scene.render(self.steps)
        _draw_objects(top, self.target, self.robot, TOP_PX_PER_M, np.zeros(2))
        # The wrist camera sees the top view around the robot, magnified, with the robot and
        # target redrawn at its own resolution so they are sharp there too.
        scale = WRIST_PX_PER_M / TOP_PX_PER_M
        centre = np.array(WRIST_SIZE[::-1]) / 2
        shift = centre - scale * self.robot * TOP_PX_PER_M
        warp = np.array([[scale, 0, shift[0]], [0, scale, shift[1]]], dtype=np.float64)
        wrist = cv2.warpAffine(top, warp, WRIST_SIZE[::-1], flags=cv2.INTER_LINEAR)
        origin = self.robot - centre / WRIST_PX_PER_M
        _draw_objects(wrist, self.target, self.robot, WRIST_PX_PER_M, origin)
        return {"top": top, "wrist": wrist}


def _draw_objects(
    frame: np.ndarray,
    target: np.ndarray,
    robot: np.ndarray,
    px_per_m: float,
    origin: np.ndarray,
) -> None:
    """The target ring, then the robot over it, in a view whose top-left corner is `origin`."""
    unit = 1 << _SUBPIXEL

    def point(position: np.ndarray) -> tuple[int, int]:
        x, y = (position - origin) * px_per_m * unit
        return round(x), round(y)

    ring = max(1, round(TARGET_RING_M * px_per_m))
    radius = round((TARGET_RADIUS_M * px_per_m - ring / 2) * unit)
    cv2.circle(frame, point(target), radius, TARGET_RGB, ring, cv2.LINE_AA, _SUBPIXEL)
    robot_radius = round(ROBOT_RADIUS_M * px_per_m * unit)
    cv2.circle(frame, point(robot), robot_radius, ROBOT_RGB, -1, cv2.LINE_AA, _SUBPIXEL)
    cv2.circle(frame, point(robot), robot_radius, (20, 40, 60), 1, cv2.LINE_AA, _SUBPIXEL)
