"""The bridge's messages (`vla_client.ros2.messages`) and its options, checked without a bus."""

from __future__ import annotations

import time

import numpy as np
import pytest
from peer import JAZZY, cdr

from vla_client.control import ChunkExecutor
from vla_client.ros2.bridge import RosBridge
from vla_client.ros2.messages import (
    DIAGNOSTICS,
    TRAJECTORY,
    WARN,
    array_command,
    status_array,
    status_values,
    trajectory_command,
)


def test_an_array_command_is_the_action_as_float64() -> None:
    message = array_command(np.float32([0.5, -1.25]))
    assert message.data.dtype == np.float64 and list(message.data) == [0.5, -1.25]
    assert message.layout.dim == [] and message.layout.data_offset == 0


def test_a_trajectory_round_trips_as_cdr() -> None:
    rows = np.float32([[0.1, 0.2], [0.3, 0.4], [0.5, 0.6]])
    message = trajectory_command(rows, ["a", "b"], 3.0)
    back = JAZZY.deserialize_cdr(cdr(message, TRAJECTORY), TRAJECTORY)
    assert list(back.joint_names) == ["a", "b"]
    times = [(p.time_from_start.sec, p.time_from_start.nanosec) for p in back.points]
    assert times == [(0, 333333333), (0, 666666667), (1, 0)]  # (i + 1) / 3 s, rounded to ns
    np.testing.assert_allclose([list(p.positions) for p in back.points], rows, atol=1e-7)
    assert all(len(p.velocities) == len(p.effort) == 0 for p in back.points)


@pytest.mark.parametrize(
    ("rows", "names", "rate", "says"),
    [
        ([[0.1, 0.2]], ["a"], 30.0, "the actions have 2 values, the joints are 1 (a)"),
        ([[0.1, float("nan")]], ["a", "b"], 30.0, "NaN or infinity: never commanded"),
        ([], ["a"], 30.0, "a non-empty [n, D] array"),
        ([[0.1]], ["a"], 0.0, "rate_hz must be a finite number above 0"),
        ([["x"]], ["a"], 30.0, "a chunk must be numbers"),
    ],
)
def test_a_trajectory_that_cannot_be_is_refused(
    rows: object, names: list[str], rate: float, says: str
) -> None:
    with pytest.raises(ValueError, match=None) as refused:
        trajectory_command(rows, names, rate)  # type: ignore[arg-type]
    assert says in str(refused.value)


def test_an_action_with_infinity_is_never_commanded() -> None:
    with pytest.raises(ValueError, match="NaN or infinity"):
        array_command([1.0, float("inf")])


def test_the_status_carries_level_message_and_values() -> None:
    array = status_array(
        "vla_client: bridge", WARN, "holding: why", {"a": 1.23456, "b": 7}, 5.5, "http://x"
    )
    back = JAZZY.deserialize_cdr(cdr(array, DIAGNOSTICS), DIAGNOSTICS)
    [status] = back.status
    assert (status.level, status.name, status.message, status.hardware_id) == (
        WARN, "vla_client: bridge", "holding: why", "http://x"
    )  # fmt: skip
    assert status_values(back) == {"a": "1.235", "b": "7"}
    assert (back.header.stamp.sec, back.header.stamp.nanosec) == (5, 500_000_000)
    with pytest.raises(ValueError, match="level must be OK"):
        status_array("n", 3, "m", {}, 0.0, "")


@pytest.mark.parametrize(
    ("options", "says"),
    [
        ({"command_type": "twist"}, "command_type"),
        ({"rate_hz": float("nan")}, "rate_hz"),
        ({"max_age_s": 0.0}, "max_age_s"),
        ({"images": {}}, "name at least one camera"),
        ({"images": {"/a": "cam", "/b": "cam"}}, "each camera topic needs its own name"),
        ({"command": "/a"}, "/a is named twice"),
        ({"joints": ["j1", "j1"]}, "joints must name each joint once"),
    ],
)
def test_a_bridge_refuses_wrong_options(options: dict[str, object], says: str) -> None:
    given = {
        "images": {"/a": "cam"}, "state": "/joints", "command": "/cmd",
        "command_type": "array", "rate_hz": 30.0, **options,
    }  # fmt: skip
    executor = ChunkExecutor(lambda observation: None, clock=time.time)  # type: ignore[arg-type, return-value]
    with pytest.raises(ValueError) as refused:
        RosBridge(None, executor, **given)  # type: ignore[arg-type]
    assert says in str(refused.value)


def test_a_bridge_refuses_an_executor_that_ages_on_the_monotonic_clock() -> None:
    executor = ChunkExecutor(lambda observation: None)  # type: ignore[arg-type, return-value]
    with pytest.raises(ValueError, match=r"ChunkExecutor\(clock=time.time\)"):
        RosBridge(
            None, executor, images={"/a": "cam"}, state="/j", command="/c",  # type: ignore[arg-type]
            command_type="array", rate_hz=30.0,
        )  # fmt: skip
