"""Options and helpers shared by the commands that talk to a server."""

from __future__ import annotations

import argparse
import statistics
from collections.abc import Sequence

import cv2
import numpy as np

from vla_client.client import ActionResult
from vla_client.errors import InvalidObservationError
from vla_client.scene import synthetic_frames

DEFAULT_URL = "http://127.0.0.1:8000"


def add_connection_options(parser: argparse.ArgumentParser) -> None:
    """URL, timeout and API key."""
    parser.add_argument("url", nargs="?", default=DEFAULT_URL, help=f"server base URL (default {DEFAULT_URL})")
    parser.add_argument("--timeout", type=float, default=30.0, help="seconds to wait for a reply")
    parser.add_argument("--api-key", default=None, help="sent as 'Authorization: Bearer KEY'")


def add_encoding_options(parser: argparse.ArgumentParser) -> None:
    """Image encoding and wire format."""
    parser.add_argument("--encoding", choices=("png", "jpeg", "raw", "pixels"), default="png")
    parser.add_argument("--wire", choices=("json", "msgpack"), default="json")
    parser.add_argument("--jpeg-quality", type=int, default=90)


def load_image_file(spec: str) -> tuple[str, np.ndarray]:
    """``NAME=PATH`` to (name, RGB frame); raises `InvalidObservationError` for unreadable files."""
    name, sep, path = spec.partition("=")
    if not sep or not name or not path:
        raise InvalidObservationError(f"--image takes NAME=PATH, got {spec!r}")
    frame = cv2.imread(path, cv2.IMREAD_COLOR_RGB)
    if frame is None:
        raise InvalidObservationError(f"cannot read image file {path!r}")
    return name, frame


def frames_from_args(images: Sequence[str], cameras: int, height: int, width: int, t: int = 0) -> dict[str, np.ndarray]:
    """Frames from ``--image NAME=PATH`` options, else `cameras` synthetic cameras."""
    if images:
        return dict(load_image_file(spec) for spec in images)
    return synthetic_frames(cameras, height, width, t=t)


STAGES = (
    ("encode", lambda r: r.timings.encode_ms),
    ("round trip", lambda r: r.timings.round_trip_ms),
    ("server preprocess", lambda r: r.timings.server.get("preprocess_ms")),
    ("server inference", lambda r: r.timings.server.get("inference_ms")),
    ("server total", lambda r: r.timings.server.get("total_ms")),
    ("decode", lambda r: r.timings.decode_ms),
    ("total", lambda r: r.timings.total_ms),
)


def stage_percentiles(results: Sequence[ActionResult]) -> list[tuple[str, float, float, float]]:
    """(stage, p50, p90, p99) in ms for each stage the results report."""
    rows = []
    for name, read in STAGES:
        values = [v for v in (read(r) for r in results) if v is not None]
        if values:
            rows.append((name, *percentiles(values)))
    return rows


def percentiles(values: Sequence[float]) -> tuple[float, float, float]:
    """p50, p90 and p99 (inclusive method; a single value repeats)."""
    if len(values) == 1:
        return values[0], values[0], values[0]
    cuts = statistics.quantiles(values, n=100, method="inclusive")
    return cuts[49], cuts[89], cuts[98]
