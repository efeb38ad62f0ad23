"""Synthetic camera-like frames for demos, tests and benchmarks.

PNG and JPEG sizes and speeds depend on image content: flat colour compresses to nothing and
random noise does not compress at all. These scenes look like a robot camera instead: a wall and
floor gradient, low-frequency texture, anti-aliased objects, a moving arm, cables, a label,
vignetting and mild sensor noise. The static part is rendered once per scene; each frame then
costs a copy, a few line draws and a saturating noise add, so a 3-camera rig runs well above
30 Hz on two cores.
"""

from __future__ import annotations

import math
from functools import lru_cache

import cv2
import numpy as np

DEFAULT_CAMERAS = ("wrist", "left", "right")
_NOISE_FIELDS = 3


class SyntheticScene:
    """A deterministic moving scene: `render(t)` gives the same RGB frame for the same `t`."""

    def __init__(self, height: int = 360, width: int = 640, *, seed: int = 0) -> None:
        if height < 16 or width < 16:
            raise ValueError(f"scene must be at least 16x16, got {height}x{width}")
        self.height = height
        self.width = width
        self.seed = seed
        rng = np.random.default_rng(seed)
        self._background = _render_background(height, width, rng)
        noise = rng.normal(0.0, 2.0, size=(_NOISE_FIELDS, height, width, 3)).round()
        self._noise_up = np.clip(noise, 0, 255).astype(np.uint8)
        self._noise_down = np.clip(-noise, 0, 255).astype(np.uint8)
        self._arm_base = (int(width * rng.uniform(0.3, 0.7)), height - 1)
        self._phase = rng.uniform(0, 2 * math.pi)

    def render(self, t: int = 0) -> np.ndarray:
        """Frame `t` as a C-contiguous HxWx3 uint8 RGB array."""
        frame: np.ndarray = self._background.copy()
        _draw_arm(frame, self._arm_base, self._phase + 0.15 * t)
        k = t % _NOISE_FIELDS
        cv2.add(frame, self._noise_up[k], dst=frame)
        cv2.subtract(frame, self._noise_down[k], dst=frame)
        return frame


def synthetic_frames(
    cameras: int | tuple[str, ...] = DEFAULT_CAMERAS,
    height: int = 360,
    width: int = 640,
    *,
    t: int = 0,
    seed: int = 0,
) -> dict[str, np.ndarray]:
    """One frame per camera, each camera its own scene (seeded `seed + index`).

    Scenes are cached, so calling this once per control tick costs a render, not a rebuild.
    """
    names = camera_names(cameras) if isinstance(cameras, int) else cameras
    return {name: _cached_scene(height, width, seed + i).render(t) for i, name in enumerate(names)}


@lru_cache(maxsize=32)
def _cached_scene(height: int, width: int, seed: int) -> SyntheticScene:
    return SyntheticScene(height, width, seed=seed)


def camera_names(count: int) -> tuple[str, ...]:
    """`wrist`, `left`, `right` for up to three cameras, then `cam3`, `cam4`, ..."""
    return tuple(
        DEFAULT_CAMERAS[i] if i < len(DEFAULT_CAMERAS) else f"cam{i}" for i in range(count)
    )


def _render_background(height: int, width: int, rng: np.random.Generator) -> np.ndarray:
    ys = np.linspace(0.0, 1.0, height, dtype=np.float32)[:, None]
    xs = np.linspace(0.0, 1.0, width, dtype=np.float32)[None, :]
    horizon = rng.uniform(0.35, 0.6)
    wall = np.array(rng.uniform(120, 200, 3), dtype=np.float32)
    floor = np.array(rng.uniform(60, 140, 3), dtype=np.float32)
    is_floor = (ys > horizon).astype(np.float32)[..., None]
    shade = (0.75 + 0.25 * ys)[..., None]
    image = (wall * (1 - is_floor) + floor * is_floor) * shade * np.ones((1, width, 1), np.float32)

    coarse = rng.normal(0.0, 12.0, size=(max(2, height // 24), max(2, width // 24), 3))
    texture = cv2.resize(coarse.astype(np.float32), (width, height), interpolation=cv2.INTER_CUBIC)
    image += texture

    canvas = np.clip(image, 0, 255).astype(np.uint8)
    scale = min(height, width)
    for _ in range(int(rng.integers(8, 15))):
        colour = tuple(int(c) for c in rng.integers(20, 235, 3))
        centre = (int(rng.integers(0, width)), int(rng.integers(int(height * horizon), height)))
        if rng.random() < 0.5:
            axes = (
                int(rng.integers(scale // 20, scale // 6)),
                int(rng.integers(scale // 24, scale // 8)),
            )
            cv2.ellipse(
                canvas, centre, axes, float(rng.uniform(0, 180)), 0, 360, colour, -1, cv2.LINE_AA
            )
        else:
            half = int(rng.integers(scale // 24, scale // 7))
            box = cv2.boxPoints((centre, (2 * half, half), float(rng.uniform(0, 90))))
            cv2.fillConvexPoly(canvas, box.astype(np.int32), colour, cv2.LINE_AA)
    for _ in range(3):
        points = np.stack([np.linspace(0, width, 6), rng.uniform(0, height, 6)], axis=1)
        cv2.polylines(canvas, [points.astype(np.int32)], False, (30, 30, 30), 2, cv2.LINE_AA)
    cv2.putText(
        canvas,
        f"BIN {int(rng.integers(1, 99)):02d}",
        (width // 20, height // 8),
        cv2.FONT_HERSHEY_SIMPLEX,
        scale / 600,
        (20, 20, 20),
        2,
        cv2.LINE_AA,
    )

    vignette = 1.0 - 0.35 * ((xs - 0.5) ** 2 + (ys - 0.5) ** 2) * 2
    lit = canvas.astype(np.float32) * vignette[..., None]
    blurred = cv2.GaussianBlur(lit, (0, 0), 0.8)
    return np.ascontiguousarray(np.clip(blurred, 0, 255).astype(np.uint8))


def _draw_arm(frame: np.ndarray, base: tuple[int, int], angle: float) -> None:
    height, width = frame.shape[:2]
    reach = min(height, width) * 0.35
    elbow = (int(base[0] + reach * math.cos(angle) * 0.6), int(base[1] - reach * 0.9))
    wrist = (
        int(elbow[0] + reach * math.cos(angle * 1.7)),
        int(elbow[1] - reach * 0.4 * (1 + math.sin(angle))),
    )
    thickness = max(2, min(height, width) // 30)
    cv2.line(frame, base, elbow, (200, 200, 210), thickness, cv2.LINE_AA)
    cv2.line(frame, elbow, wrist, (180, 180, 190), thickness, cv2.LINE_AA)
    cv2.circle(frame, wrist, thickness, (240, 120, 40), -1, cv2.LINE_AA)
