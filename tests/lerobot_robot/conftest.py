"""The LeRobot robot adapter and dataset export, tested with LeRobot itself (its `Robot` base
class, its dataset writer and reader). Every module here imports `sim_arm`, which skips the
module, saying why, where lerobot is not installed. Nothing here downloads."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

os.environ["HF_HUB_OFFLINE"] = "1"  # before LeRobot or huggingface_hub is imported


@pytest.fixture
def arm(tmp_path: Path) -> Iterator[Any]:
    """A connected `sim_arm.SimArm`, calibration files kept in the test's own folder."""
    from sim_arm import SimArm, SimArmConfig

    robot = SimArm(SimArmConfig(id="test", calibration_dir=tmp_path / "calibration"))
    robot.connect()
    yield robot
    robot.disconnect()


@pytest.fixture(scope="module")
def server_url() -> Iterator[str]:
    """A real server on 127.0.0.1 with `sim_arm.reference_app`."""
    from sim_arm import reference_app

    from vla_client.server import LocalServer

    with LocalServer(reference_app()) as server:
        yield server.url
