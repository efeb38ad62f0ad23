"""A camera that renders `SyntheticScene` frames at a fixed rate, for demos, tests and benchmarks.

The scene looks like a robot camera image (texture, objects, a moving arm, sensor noise), so PNG
and JPEG sizes and encode times measured with it carry over to real cameras, which flat or random
test images do not.
"""

from __future__ import annotations

import numpy as np

from vla_client.cameras.paced import PacedCamera
from vla_client.cameras.scene import SyntheticScene
from vla_client.errors import CameraSettingError
from vla_client.validation import check_at_least, check_positive


class SyntheticCamera(PacedCamera):
    """Deterministic frames: frame `k` of seed `s` is always the same image."""

    def __init__(
        self, *, seed: int = 0, width: int = 640, height: int = 360, fps: float = 30.0
    ) -> None:
        source = f"synthetic:{seed}"
        for option, value in (("width", width), ("height", height)):
            check_positive(f"{source}: {option}", value, integer=True, error=CameraSettingError)
        check_at_least(f"{source}: seed", seed, 0, integer=True, error=CameraSettingError)
        super().__init__(fps, source=source)
        self.seed = seed
        self.width = width
        self.height = height
        self._scene = SyntheticScene(height, width, seed=seed)

    def _image(self, index: int) -> np.ndarray:
        return self._scene.render(index)
