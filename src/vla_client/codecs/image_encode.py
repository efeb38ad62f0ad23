"""JPEG and PNG for camera frames, on the robot: the encoders a client sends with.

Frames are RGB everywhere in vla-client; OpenCV thinks in BGR, so the swap happens in the
functions that call it and nowhere else. PNGs are written by `png_write` (fpng, or OpenCV);
JPEG is libjpeg-turbo through OpenCV, which releases the GIL, so several cameras encode in
parallel threads. The server's readers are `vla_client.codecs.image_decode`: a robot that only
sends never loads them (nor Pillow and the isal PNG reader behind them).
"""

from __future__ import annotations

import cv2
import numpy as np

from vla_client.codecs.png_write import encode_png as encode_png  # where callers look for it
from vla_client.codecs.png_write import encode_with_opencv
from vla_client.errors import CodecError

DEFAULT_JPEG_QUALITY = 90


def encode_jpeg(frame: np.ndarray, quality: int = DEFAULT_JPEG_QUALITY) -> bytes:
    """Baseline JPEG (4:2:0) of an HxWx3 uint8 RGB frame; `quality` in 1..100."""
    if not 1 <= quality <= 100:
        raise CodecError(f"JPEG quality must be in 1..100, got {quality}")
    return encode_with_opencv(".jpg", frame, [cv2.IMWRITE_JPEG_QUALITY, int(quality)])
