"""The ``vla-client cameras`` command: device listing, capture check and the PNG grid."""

from __future__ import annotations

import argparse
from pathlib import Path

import cv2
import numpy as np
import pytest

from vla_client.cameras import CameraDevice, Mode
from vla_client.cli import cameras as command
from vla_client.cli.sheet import frame_grid


def run(*argv: str) -> int:
    parser = argparse.ArgumentParser()
    command.register(parser)
    args = parser.parse_args(list(argv))
    code: int = args.func(args)
    return code


def test_lists_devices_with_modes(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    mode = Mode("MJPG", 640, 480, (30,))
    found = [CameraDevice("/dev/video0", "640x480 @ 30.0 fps MJPG", (mode,))]
    monkeypatch.setattr("vla_client.cameras.list_devices", lambda: found)
    assert run() == 0
    assert capsys.readouterr().out.splitlines() == [
        "/dev/video0: 640x480 @ 30.0 fps MJPG",
        "    MJPG 640x480 @ 30 fps",
    ]
    monkeypatch.setattr("vla_client.cameras.list_devices", list)
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
    grid = frame_grid(images, tile_height=50)
    assert grid.shape == (50, 2 * 89, 3)


def fake_wheels(folder: Path, *wheels: tuple[str, str]) -> Path:
    """Installed-distribution metadata (``NAME-VERSION.dist-info``) in `folder`, as pip leaves
    it, for `importlib.metadata` to find."""
    for name, version in wheels:
        info = folder / f"{name.replace('-', '_')}-{version}.dist-info"
        info.mkdir(parents=True)
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
    return folder


def test_two_opencv_wheels_fail_the_check_naming_both(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    site = fake_wheels(
        tmp_path, ("opencv-python", "5.0.0.93"), ("opencv-python-headless", "4.12.0.88")
    )
    monkeypatch.syspath_prepend(str(site))
    monkeypatch.setattr("vla_client.cameras.list_devices", list)
    assert run() == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1, err
    assert "OpenCV wheels are installed (opencv-python-headless 4.12.0.88, " in err
    assert "opencv-python 5.0.0.93" in err
    assert "pip uninstall -y opencv-python-headless opencv-python" in err


def test_one_opencv_wheel_or_a_system_opencv_passes(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from vla_client.cameras.opencv_install import installed_opencv, opencv_clash

    monkeypatch.setattr("sys.path", [str(fake_wheels(tmp_path / "one", ("opencv-python", "4.9")))])
    assert installed_opencv() == {"opencv-python": "4.9"}
    assert opencv_clash() is None
    monkeypatch.setattr("sys.path", [str(tmp_path / "none")])  # ROS's or JetPack's cv2: no wheel
    assert installed_opencv() == {}
    assert opencv_clash() is None
