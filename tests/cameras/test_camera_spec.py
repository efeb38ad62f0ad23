"""Camera specs from the command line: NAME=SPEC pairs and the camera each spec names."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

import cv2
import pytest
from camera_media import RED, WriteVideo, solid

from vla_client.cameras import (
    CameraError,
    ImageFolderCamera,
    OpenCVCamera,
    SyntheticCamera,
    VideoFileCamera,
    open_camera,
    open_cameras,
    parse_camera_args,
)

SRC = Path(__file__).resolve().parents[2] / "src"


def test_parse_camera_args() -> None:
    assert parse_camera_args(["wrist=0", "left=/dev/video2", "top=0?fps=30"]) == {
        "wrist": "0",
        "left": "/dev/video2",
        "top": "0?fps=30",
    }
    for bad in (["0"], ["=0"], ["wrist="]):
        with pytest.raises(CameraError, match="NAME=SPEC"):
            parse_camera_args(bad)
    with pytest.raises(CameraError, match="twice"):
        parse_camera_args(["a=0", "a=1"])


def test_device_specs_make_opencv_cameras_with_settings() -> None:
    camera = open_camera("2?width=1280&height=720&fps=30&fourcc=MJPG")
    assert isinstance(camera, OpenCVCamera)
    assert (camera.device, camera.width, camera.height, camera.fps, camera.fourcc) == (
        2,
        1280,
        720,
        30.0,
        "MJPG",
    )
    by_path = open_camera("/dev/video2")
    assert isinstance(by_path, OpenCVCamera) and by_path.device == "/dev/video2"
    assert isinstance(open_camera("rtsp://10.0.0.5/stream"), OpenCVCamera)


def test_synthetic_file_and_folder_specs(write_video: WriteVideo, tmp_path: Path) -> None:
    synthetic = open_camera("synthetic:7?width=96&height=64")
    assert isinstance(synthetic, SyntheticCamera)
    assert (synthetic.seed, synthetic.width, synthetic.height) == (7, 96, 64)
    assert isinstance(open_camera("synthetic"), SyntheticCamera)
    video = open_camera(f"{write_video([solid(RED)] * 2)}?fps=12")
    assert isinstance(video, VideoFileCamera) and video.fps == 12
    folder = tmp_path / "stills"
    folder.mkdir()
    cv2.imwrite(str(folder / "a.png"), solid(RED))
    assert isinstance(open_camera(str(folder)), ImageFolderCamera)
    cameras = open_cameras({"a": "synthetic:1", "b": str(folder)})
    assert [type(c) for c in cameras.values()] == [SyntheticCamera, ImageFolderCamera]


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("/no/such/file.mp4", "none of"),
        ("synthetic:x", "seed must be a number"),
        ("0?zoom=2", "unknown setting 'zoom'"),
        ("0?width=wide", "width='wide' is not valid"),
        ("synthetic?fourcc=MJPG", "SyntheticCamera takes width, height, fps, not fourcc"),
        ("0?width", "settings must look like"),
    ],
)
def test_bad_specs_say_what_is_wrong(spec: str, message: str) -> None:
    with pytest.raises(CameraError, match=message):
        open_camera(spec)


def test_importing_cameras_starts_no_thread_and_loads_no_server() -> None:
    code = (
        "import sys, threading, vla_client.cameras, vla_client.cameras.preprocess; "
        "print(threading.active_count(), "
        "any(m.startswith('vla_client.server') for m in sys.modules))"
    )
    env = {**os.environ, "PYTHONPATH": str(SRC)}
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True
    )
    assert result.stdout.split() == ["1", "False"]


def test_cameras_never_import_the_server_or_the_client() -> None:
    files = list((SRC / "vla_client" / "cameras").glob("*.py"))
    for path in files:
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom | ast.Import):
                names = [node.module or ""] if isinstance(node, ast.ImportFrom) else []
                names += [alias.name for alias in node.names]
                bad = [n for n in names if n.startswith(("vla_client.server", "vla_client.client"))]
                assert not bad, f"{path.name} imports {bad}"
