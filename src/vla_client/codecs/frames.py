"""Bring arrays to the one frame layout every codec and policy uses: HxWx3 uint8 RGB, C order.

Robots hand us many layouts: grey HxW, HxWx1, RGBA, floats in [0, 1], int64 from JSON, and
now and then CHW from a training pipeline. The conversions here are the plain, lossless (or
obviously intended) ones; everything else is refused with a message that says what to change,
because a silently transposed or rescaled image wrecks a policy without any error.
"""

from __future__ import annotations

import numpy as np

from vla_client.errors import CodecError

CHANNELS = 3


def as_rgb_frame(array: np.ndarray, *, field: str | None = None) -> np.ndarray:
    """Return `array` as a C-contiguous HxWx3 uint8 RGB frame, or raise `CodecError`."""
    if not isinstance(array, np.ndarray):
        raise CodecError(f"image must be an array, got {type(array).__name__}", field=field)
    # The shape is checked before any conversion: an empty array may announce dimensions
    # whose product overflows once converted ((0, 2**21, 2**21, 2**21) float16 to float64).
    if array.ndim not in (2, 3):
        raise CodecError(f"image must be HxWxC, got shape {tuple(array.shape)}", field=field)
    height, width, channels = array.shape if array.ndim == 3 else (*array.shape, 1)
    if channels not in (1, 3, 4) and height in (1, 3, 4) and width > 4:
        raise CodecError(
            f"image shape {tuple(array.shape)} looks like CHW; transpose it to HxWxC "
            "(np.transpose(image, (1, 2, 0)))",
            field=field,
        )
    if height == 0 or width == 0:
        raise CodecError(f"image has a zero-size dimension: {tuple(array.shape)}", field=field)
    if channels not in (1, CHANNELS, 4):
        raise CodecError(f"image must have 1, 3 or 4 channels, got {channels}", field=field)
    return np.ascontiguousarray(_rgb(_as_uint8(array, field), channels))


def _rgb(frame: np.ndarray, channels: int) -> np.ndarray:
    """A uint8 frame of 1, 3 or 4 `channels` as its three RGB channels: grey repeated,
    alpha dropped."""
    if frame.ndim == 2:
        frame = frame[:, :, None]
    if channels == 1:
        return np.repeat(frame, CHANNELS, axis=2)
    if channels == 4:
        return frame[:, :, :CHANNELS]
    return frame


def _as_uint8(array: np.ndarray, field: str | None) -> np.ndarray:
    if array.dtype == np.uint8:
        return array
    kind = array.dtype.kind
    if kind in "iu":
        if array.size and (array.min() < 0 or array.max() > 255):
            raise CodecError(
                f"integer pixel values must be in 0..255, got {array.min()}..{array.max()}",
                field=field,
            )
        return array.astype(np.uint8)
    if kind == "f":
        if array.size and not np.isfinite(array).all():
            raise CodecError("float image contains NaN or infinity", field=field)
        if array.size and (array.min() < 0.0 or array.max() > 1.0):
            raise CodecError(
                "float images must be in [0, 1] (send uint8 for 0..255 data)", field=field
            )
        # In float64, where x * 255 is exact for float16 and float32 pixels: in their own
        # precision 0.998 (float16) * 255 rounds to 254.5, and then to 254 instead of 255.
        return np.rint(array.astype(np.float64) * 255.0).astype(np.uint8)
    raise CodecError(f"unsupported image dtype {array.dtype}", field=field)
