"""Helpers for the camera tests: solid frames and colour checks that survive MJPG loss."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from itertools import pairwise
from pathlib import Path

import numpy as np

from vla_client.cameras import Frame

# Distinct colours as (R, G, B); files are written in OpenCV's BGR order.
RED, GREEN, BLUE = (230, 20, 20), (20, 230, 20), (20, 20, 230)

WriteVideo = Callable[..., Path]


def solid(rgb: Sequence[int], height: int = 48, width: int = 64) -> np.ndarray:
    """An RGB frame of one colour."""
    return np.full((height, width, 3), rgb, dtype=np.uint8)


def dominant(image: np.ndarray) -> tuple[int, int, int]:
    """Mean colour of `image`, rounded, for comparisons that survive JPEG (MJPG) loss."""
    r, g, b = (round(float(c)) for c in image.reshape(-1, 3).mean(axis=0))
    return r, g, b


def close_to(actual: tuple[int, int, int], expected: Sequence[int], tolerance: int = 12) -> bool:
    return all(abs(a - e) <= tolerance for a, e in zip(actual, expected, strict=True))


def assert_timeline(frames: list[Frame]) -> None:
    """Sequences strictly increase and both clocks move forward with them."""
    for before, after in pairwise(frames):
        assert after.sequence > before.sequence
        assert after.monotonic_time > before.monotonic_time
        assert after.wall_time > before.wall_time
