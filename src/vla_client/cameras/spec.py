"""Camera specs as typed on the command line: ``wrist=0``, ``left=/dev/video2``, ``top=synthetic``.

A spec names the source and, after ``?``, optional settings:
``0?width=1280&height=720&fps=30&fourcc=MJPG``. Sources are a device index, a ``/dev/...`` path or
a stream URL (OpenCV, read live), a video file (played at its rate, looping), a folder of images,
or ``synthetic`` / ``synthetic:SEED`` (a rendered scene).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl

from vla_client.cameras.base import Camera
from vla_client.cameras.image_folder import ImageFolderCamera
from vla_client.cameras.opencv import OpenCVCamera
from vla_client.cameras.synthetic import SyntheticCamera
from vla_client.cameras.video_file import VideoFileCamera
from vla_client.errors import CameraError

_SETTINGS: dict[str, Callable[[str], Any]] = {
    "width": int,
    "height": int,
    "fps": float,
    "fourcc": str,
    "warmup_frames": int,
    "timeout_s": float,
}
_ALLOWED = {
    OpenCVCamera: ("width", "height", "fps", "fourcc", "warmup_frames", "timeout_s"),
    SyntheticCamera: ("width", "height", "fps"),
    VideoFileCamera: ("fps",),
    ImageFolderCamera: ("fps",),
}


def parse_camera_args(values: list[str]) -> dict[str, str]:
    """``["wrist=0", "left=/dev/video2"]`` as ``{"wrist": "0", "left": "/dev/video2"}``."""
    cameras: dict[str, str] = {}
    for value in values:
        name, sep, spec = value.partition("=")
        name, spec = name.strip(), spec.strip()
        if not sep or not name or not spec:
            raise CameraError(f"camera {value!r} must be NAME=SPEC, for example wrist=0")
        if name in cameras:
            raise CameraError(f"camera name {name!r} given twice")
        cameras[name] = spec
    return cameras


def open_camera(spec: str) -> Camera:
    """The camera `spec` names, not opened yet (a rig opens its cameras together)."""
    source, _, query = spec.partition("?")
    settings = _parse_settings(spec, query)
    kind: type[Any]
    args: dict[str, Any]
    if source == "synthetic" or source.startswith("synthetic:"):
        kind, args = SyntheticCamera, {"seed": _seed(source)}
    elif source.isdigit():
        kind, args = OpenCVCamera, {"device": int(source)}
    elif source.startswith("/dev/") or "://" in source:
        kind, args = OpenCVCamera, {"device": source}
    elif Path(source).is_dir():
        kind, args = ImageFolderCamera, {"folder": source}
    elif Path(source).is_file():
        kind, args = VideoFileCamera, {"path": source}
    else:
        raise CameraError(
            f"camera {spec!r} is none of: a device index, /dev/videoN, a stream URL, "
            "an existing video file or image folder, synthetic[:SEED]"
        )
    unknown = set(settings) - set(_ALLOWED[kind])
    if unknown:
        raise CameraError(
            f"camera {spec!r}: {kind.__name__} takes {', '.join(_ALLOWED[kind])}, "
            f"not {', '.join(sorted(unknown))}"
        )
    camera: Camera = kind(**args, **settings)
    return camera


def open_cameras(specs: Mapping[str, str]) -> dict[str, Camera]:
    """`open_camera` for each NAME=SPEC pair."""
    return {name: open_camera(spec) for name, spec in specs.items()}


def _parse_settings(spec: str, query: str) -> dict[str, Any]:
    try:
        pairs = parse_qsl(query, keep_blank_values=True, strict_parsing=bool(query))
    except ValueError:
        raise CameraError(f"camera {spec!r}: settings must look like ?fps=30&width=640") from None
    settings: dict[str, Any] = {}
    for key, value in pairs:
        if key not in _SETTINGS:
            raise CameraError(f"camera {spec!r}: unknown setting {key!r} ({', '.join(_SETTINGS)})")
        try:
            settings[key] = _SETTINGS[key](value)
        except ValueError:
            raise CameraError(f"camera {spec!r}: {key}={value!r} is not valid") from None
    return settings


def _seed(source: str) -> int:
    _, _, seed = source.partition(":")
    if seed and not seed.isdigit():
        raise CameraError(f"synthetic camera seed must be a number, got {seed!r}")
    return int(seed or 0)
