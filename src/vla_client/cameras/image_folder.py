"""A camera that replays a folder of still images in name order, looping, at a fixed rate.

Useful to feed recorded frames from a dataset export, or a handful of hand-picked scenes, to a
policy through exactly the path live frames take.
"""

from __future__ import annotations

from pathlib import Path

import cv2
import numpy as np

from vla_client.cameras.paced import PacedCamera
from vla_client.errors import CameraError

IMAGE_SUFFIXES = frozenset({".png", ".jpg", ".jpeg", ".bmp", ".tif", ".tiff", ".webp"})


class ImageFolderCamera(PacedCamera):
    """Frame `k` is the `k mod n`-th image of the folder, sorted by file name."""

    def __init__(self, folder: str | Path, *, fps: float = 30.0) -> None:
        self.folder = Path(folder)
        super().__init__(fps, source=str(self.folder))
        self._files: list[Path] = []

    def _open_source(self) -> None:
        if not self.folder.is_dir():
            raise CameraError(f"{self.folder} is not a folder")
        self._files = sorted(p for p in self.folder.iterdir() if p.suffix.lower() in IMAGE_SUFFIXES)
        if not self._files:
            suffixes = ", ".join(sorted(IMAGE_SUFFIXES))
            raise CameraError(f"{self.folder} holds no images ({suffixes})")

    def _image(self, index: int) -> np.ndarray:
        path = self._files[index % len(self._files)]
        image = cv2.imread(str(path), cv2.IMREAD_COLOR)
        if image is None:
            raise CameraError(f"cannot decode image {path}")
        return cv2.cvtColor(image, cv2.COLOR_BGR2RGB)
