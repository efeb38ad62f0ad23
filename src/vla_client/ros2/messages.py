"""The messages the live node publishes: commands for ros2_control's controllers, and its status.

Two controllers take a VLA's actions on a ros2_control robot:

- ``forward_command_controller`` (and its position/velocity variants) takes a
  ``std_msgs/Float64MultiArray``: one value per joint, applied as it arrives. `array_command`
  builds one from one action; the node publishes one a control tick.
- ``joint_trajectory_controller`` takes a ``trajectory_msgs/JointTrajectory``: joint names and
  points, each reached at its ``time_from_start``. `trajectory_command` builds one from the rows
  of a chunk still to run, point i due (i + 1) / rate after the message's start (its header
  stamp is zero: "start now"), so the controller interpolates between the rows at the loop's
  pace; the node publishes one whenever a chunk starts.

`status_array` builds the ``diagnostic_msgs/DiagnosticArray`` the node publishes on its status
topic (``/diagnostics``, where ``rqt_robot_monitor`` and diagnostic_aggregator look): one
``DiagnosticStatus`` whose level and message say whether it is commanding (OK, "running") or
holding (WARN, "holding: <why>"), or has refused an input (WARN), with its counters and latencies
as key/value pairs.

Messages are rosbags message objects of ROS 2 Jazzy's types (`vla_client.ros2.names.typestore`),
ready for `Publisher.publish`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from vla_client.ros2.names import typestore

FLOAT_ARRAY = "std_msgs/msg/Float64MultiArray"
TRAJECTORY = "trajectory_msgs/msg/JointTrajectory"
DIAGNOSTICS = "diagnostic_msgs/msg/DiagnosticArray"
OK, WARN, ERROR = 0, 1, 2
"""DiagnosticStatus levels: running; holding, or an input refused; stopped by an error."""


def array_command(action: npt.ArrayLike) -> Any:
    """One action as a Float64MultiArray (an empty layout: the controller reads the values in
    its joints' order); `ValueError` unless it is a finite 1-D vector."""
    values = _finite_rows(action, 1, "an action")
    types = typestore().types
    layout = types["std_msgs/msg/MultiArrayLayout"](dim=[], data_offset=0)
    return types[FLOAT_ARRAY](layout=layout, data=values)


def trajectory_command(rows: npt.ArrayLike, joint_names: Sequence[str], rate_hz: float) -> Any:
    """The rows of a chunk still to run as a JointTrajectory for `joint_names`: row i is point i,
    due (i + 1) / `rate_hz` s after the message arrives (header stamp zero: start now).

    `ValueError` when the rows are not a finite ``[n, D]`` array with n >= 1, when D is not the
    number of joint names, or when the rate is not a finite number above 0."""
    points = _finite_rows(rows, 2, "a chunk")
    names = list(joint_names)
    if points.shape[1] != len(names) or not names:
        raise ValueError(
            f"the actions have {points.shape[1]} values, the joints are {len(names)} "
            f"({', '.join(names) or 'none'}): a trajectory needs one value per joint; "
            "pick the joints with --joints"
        )
    if not (math.isfinite(rate_hz) and rate_hz > 0):
        raise ValueError(f"rate_hz must be a finite number above 0; got {rate_hz!r}")
    types = typestore().types
    empty = np.empty(0, dtype=np.float64)
    trajectory_points = [
        types["trajectory_msgs/msg/JointTrajectoryPoint"](
            positions=row,
            velocities=empty,
            accelerations=empty,
            effort=empty,
            time_from_start=_duration((index + 1) / rate_hz),
        )
        for index, row in enumerate(points)
    ]
    return types[TRAJECTORY](header=_header(0.0), joint_names=names, points=trajectory_points)


def status_array(
    name: str, level: int, message: str, values: Mapping[str, object], stamp: float, hardware: str
) -> Any:
    """A DiagnosticArray of one DiagnosticStatus: `name` (the node), `level` (`OK`, `WARN` or
    `ERROR`), `message` as said, `values` as key/value strings, stamped `stamp` (seconds of ROS
    time), `hardware` (the server's URL) as its hardware id."""
    if level not in (OK, WARN, ERROR):
        raise ValueError(f"level must be OK (0), WARN (1) or ERROR (2); got {level!r}")
    types = typestore().types
    pairs = [
        types["diagnostic_msgs/msg/KeyValue"](key=str(key), value=_text(value))
        for key, value in values.items()
    ]
    status = types["diagnostic_msgs/msg/DiagnosticStatus"](
        level=level, name=name, message=message, hardware_id=hardware, values=pairs
    )
    return types[DIAGNOSTICS](header=_header(stamp), status=[status])


def status_values(array: Any) -> dict[str, str]:
    """The key/value pairs of a status DiagnosticArray's first status, as a dict."""
    return {pair.key: pair.value for pair in array.status[0].values}


def _text(value: object) -> str:
    """A status value as text: floats with 3 decimals, the rest as str."""
    if isinstance(value, float):
        return f"{value:.3f}"
    return str(value)


def _finite_rows(values: npt.ArrayLike, ndim: int, what: str) -> npt.NDArray[np.float64]:
    try:
        array = np.array(values, dtype=np.float64)
    except (TypeError, ValueError):
        raise ValueError(f"{what} must be numbers; got {values!r}") from None
    if array.ndim != ndim or array.size == 0:
        shape = "[D]" if ndim == 1 else "[n, D]"
        raise ValueError(f"{what} must be a non-empty {shape} array; got shape {array.shape}")
    if not np.isfinite(array).all():
        raise ValueError(f"{what} holds NaN or infinity: never commanded")
    return array


def _seconds_nanoseconds(seconds: float) -> tuple[int, int]:
    whole = math.floor(seconds)
    nanoseconds = round((seconds - whole) * 1e9)
    if nanoseconds >= 1_000_000_000:  # 0.9999999999 rounds up to the next second
        whole, nanoseconds = whole + 1, nanoseconds - 1_000_000_000
    return whole, nanoseconds


def _duration(seconds: float) -> Any:
    sec, nanosec = _seconds_nanoseconds(seconds)
    return typestore().types["builtin_interfaces/msg/Duration"](sec=sec, nanosec=nanosec)


def _header(stamp: float) -> Any:
    types = typestore().types
    sec, nanosec = _seconds_nanoseconds(stamp)
    time_ = types["builtin_interfaces/msg/Time"](sec=sec, nanosec=nanosec)
    return types["std_msgs/msg/Header"](stamp=time_, frame_id="")
