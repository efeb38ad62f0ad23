"""The ``vla-client cameras`` command: device listing, capture check and the PNG grid."""

from __future__ import annotations

import argparse
from pathlib import Path

import cv2
import numpy as np
import pytest

from vla_client.cameras import CameraDevice, Mode
from vla_client.cli import cameras as command


def run(*argv: str) -> int:
    parser = argparse.ArgumentParser()
    command.register(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(["cameras", *argv])
    code: int = args.func(args)
    return code


def test_lists_devices_with_modes(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    mode = Mode("MJPG", 640, 480, (30,))
    found = [CameraDevice("/dev/video0", "640x480 @ 30.0 fps MJPG", (mode,))]
    monkeypatch.setattr(command, "list_devices", lambda: found)
    assert run() == 0
    assert capsys.readouterr().out.splitlines() == [
        "/dev/video0: 640x480 @ 30.0 fps MJPG",
        "    MJPG 640x480 @ 30 fps",
    ]
    monkeypatch.setattr(command, "list_devices", list)
    assert run("--grid", "unused.png") == 1
    assert "no cameras found" in capsys.readouterr().out


def test_grid_of_configured_cameras(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "grid.png"
    code = run(
        "--camera",
        "wrist=synthetic?width=320&height=180",
        "--camera",
        "left=synthetic:1",
        "--camera",
        "right=synthetic:2",
        "--grid",
        str(out),
    )
    assert code == 0
    printed = capsys.readouterr().out
    assert "wrist (synthetic?width=320&height=180): 320x180, frame #0, " in printed
    assert "skew between cameras" in printed
    grid = cv2.imread(str(out))
    assert grid is not None and grid.shape == (2 * 360, 2 * 640, 3)
    assert not grid[360:, 640:].any()  # the fourth cell of a 2x2 grid stays empty


def test_bad_camera_is_reported(capsys: pytest.CaptureFixture[str]) -> None:
    assert run("--camera", "wrist") == 1
    captured = capsys.readouterr()
    assert captured.out == "" and "NAME=SPEC" in captured.err


def test_frame_grid_keeps_aspect() -> None:
    images = {"a": np.zeros((90, 160, 3), np.uint8), "b": np.zeros((100, 100, 3), np.uint8)}
    grid = command.frame_grid(images, tile_height=50)
    assert grid.shape == (50, 2 * 89, 3)
