"""Drive a LeRobot robot from a `ControlLoop`: its observations in, its actions out.

A LeRobot `Robot` describes itself with two dicts: `observation_features` (a joint reading's
name, such as ``shoulder_pan.pos``, to ``float``; a camera's name to its ``(height, width, 3)``
shape) and `action_features` (each commanded value's name to ``float``). `get_observation()`
returns a dict with those keys and `send_action(dict)` takes one. `LeRobotRobot` turns that
into what the loop speaks: `observe()` gives an `Observation` (the cameras' RGB frames, the
float readings as one float32 state vector in the order of `observation_features`, the same
rule as LeRobot's `hw_to_dataset_features` for ``observation.state``) and `apply_action(vector)`
gives the robot the dict, value i to the i-th name of `action_features`.

Nothing here imports LeRobot: a robot is used through those five members, so this module loads
without it (and without torch).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import numpy as np

from vla_client.control.types import Action
from vla_client.errors import InvalidObservationError
from vla_client.observation import Observation

ROBOT_MEMBERS = ("observation_features", "action_features", "get_observation", "send_action")


class LeRobotRobot:
    """A LeRobot `Robot` as a `ControlLoop`'s ``observe`` and ``apply_action``.

    >>> robot = SOFollower(config); robot.connect()
    >>> arm = LeRobotRobot(robot, task="pick up the cube")
    >>> loop = ControlLoop(observe=arm.observe, apply_action=arm.apply_action, ...)

    The robot is connected, calibrated and disconnected by its owner; this adapter only reads
    and commands it. `cameras` picks (and orders) the camera features the observation carries,
    all of them by default. `task` is the observation's task text, and may be changed between
    episodes. `clock` stamps each frame's capture time (`Observation.capture_times`) just
    before the robot is read: it must be the executor's clock (`time.monotonic` by default).

    Features are read once, here: a float feature is a state value, a ``(height, width, 3)``
    tuple a camera; any other feature, a non-float action feature, a robot without cameras or
    an unknown camera name is a `ValueError` naming what is valid.
    """

    def __init__(
        self,
        robot: Any,
        *,
        cameras: Iterable[str] | None = None,
        task: str = "",
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        missing = [name for name in ROBOT_MEMBERS if not hasattr(robot, name)]
        if missing:
            raise ValueError(
                f"robot must be a LeRobot Robot (with {', '.join(ROBOT_MEMBERS)}); "
                f"{type(robot).__name__} has no {', '.join(missing)}"
            )
        if not callable(clock):
            raise ValueError(f"clock must be a callable returning seconds; got {clock!r}")
        self._robot = robot
        self._clock = clock
        self.state_names, shapes = _observation_features(robot.observation_features)
        self.camera_names = _chosen_cameras(cameras, shapes)
        self.camera_shapes = {name: shapes[name] for name in self.camera_names}
        self.action_names = _action_features(robot.action_features)
        self.task = task

    @property
    def robot(self) -> Any:
        """The LeRobot robot this adapter drives."""
        return self._robot

    @property
    def task(self) -> str:
        """The task text of every observation from now on."""
        return self._task

    @task.setter
    def task(self, task: str) -> None:
        if not isinstance(task, str):
            raise ValueError(f"task must be a string; got {task!r}")
        self._task = task

    @property
    def robot_type(self) -> str:
        """The robot's LeRobot type name (``so101_follower``, say), as its datasets record it."""
        return str(getattr(self._robot, "robot_type", None) or getattr(self._robot, "name", ""))

    def observe(self) -> Observation:
        """Read the robot: its chosen cameras' frames and its state, stamped with `clock`.

        A reading without one of the robot's own feature keys, or a frame of another shape
        than its feature declares, is an `InvalidObservationError` naming it.
        """
        captured_at = self._clock()
        reading = self._robot.get_observation()
        absent = [key for key in (*self.state_names, *self.camera_names) if key not in reading]
        if absent:
            raise InvalidObservationError(
                f"the robot's observation has no {', '.join(absent)} (its features promise them)"
            )
        images = {}
        for name, shape in self.camera_shapes.items():
            frame = np.asarray(reading[name])
            if frame.shape != shape:
                raise InvalidObservationError(
                    f"camera {name!r} gave a frame of shape {list(frame.shape)}; its feature "
                    f"says {list(shape)}"
                )
            images[name] = frame
        state = np.array([reading[key] for key in self.state_names], dtype=np.float32)
        return Observation(
            images,
            state=state if self.state_names else None,
            task=self._task,
            capture_times=dict.fromkeys(images, captured_at),
        )

    def apply_action(self, action: Action) -> None:
        """Send `action` to the robot: value i as the i-th of `action_names`.

        An action of another length than the robot's action features (never broadcast or cut),
        not a 1-D numeric vector, or with NaN or infinity is a `ValueError`, and the robot is
        sent nothing.
        """
        array = np.asarray(action)
        if array.dtype.kind not in "iuf" or array.ndim != 1:
            raise ValueError(
                f"an action must be a 1-D numeric vector; got {array.dtype} of shape "
                f"{list(array.shape)}"
            )
        if array.size != len(self.action_names):
            raise ValueError(
                f"the action has {array.size} values; the robot takes {len(self.action_names)}: "
                f"{', '.join(self.action_names)}"
            )
        if not np.isfinite(array).all():
            raise ValueError(f"the action contains NaN or infinity: {array.tolist()}")
        self._robot.send_action(dict(zip(self.action_names, array.tolist(), strict=True)))

    def recording_metadata(self) -> dict[str, Any]:
        """What an `ObservationWriter` header should say about this robot, so that an export
        to a LeRobot dataset names the state and action values as the robot does:
        ``ObservationWriter(path, fps=rate, **arm.recording_metadata())``."""
        return {
            "robot_type": self.robot_type,
            "state_names": list(self.state_names),
            "action_names": list(self.action_names),
        }


def _observation_features(
    features: Mapping[str, Any],
) -> tuple[list[str], dict[str, tuple[int, int, int]]]:
    """The state's names and the cameras' shapes, in the order of `features`."""
    _check_features("observation_features", features)
    state, cameras = [], {}
    for name, kind in features.items():
        if kind is float:
            state.append(name)
        elif isinstance(kind, tuple) and len(kind) == 3 and kind[2] == 3:
            cameras[name] = (int(kind[0]), int(kind[1]), 3)
        else:
            raise ValueError(
                f"observation feature {name!r} is {kind!r}: only float values (the state) and "
                "(height, width, 3) cameras can go into an Observation"
            )
    if not cameras:
        raise ValueError("the robot has no camera features; an Observation needs a camera")
    return state, cameras


def _chosen_cameras(
    cameras: Iterable[str] | None, shapes: Mapping[str, tuple[int, int, int]]
) -> list[str]:
    if cameras is None:
        return list(shapes)
    if isinstance(cameras, str):
        raise ValueError(f"cameras must be a list of camera names, not the string {cameras!r}")
    chosen = list(cameras)
    unknown = [name for name in chosen if name not in shapes]
    if not chosen or unknown or len(set(chosen)) != len(chosen):
        raise ValueError(
            f"cameras must name distinct cameras of the robot ({', '.join(shapes)}), at least "
            f"one; got {chosen!r}"
        )
    return chosen


def _action_features(features: Mapping[str, Any]) -> list[str]:
    _check_features("action_features", features)
    names = list(features)
    odd = [name for name in names if features[name] is not float]
    if odd or not names:
        raise ValueError(
            f"action_features must map each commanded value's name to float; got {features!r}"
        )
    return names


def _check_features(what: str, features: object) -> None:
    if not isinstance(features, Mapping) or not all(isinstance(k, str) for k in features):
        raise ValueError(f"the robot's {what} must be a dict of names; got {features!r}")
