"""Depth frames: the one layout every codec and policy uses for them, and their 16-bit PNG.

Depth cameras (RealSense, ZED, and the ROS drivers that publish them as ``16UC1`` and ``32FC1``
images) measure a distance per pixel, in one of two forms: uint16 millimetres or float32
metres. A depth frame is an HxW array of one of those dtypes, native byte order, C order; an
HxWx1 array is taken and its last axis dropped. Nothing here converts between the two or to and
from colour: a depth value interpolated, rescaled or rounded is a wrong distance, so every other
form is refused with a message that says what to send. Invalid pixels stay as the camera gave
them (0, or NaN and infinities in float32).

Over PNG only uint16 travels (PNG's 16-bit grey, which stores big-endian samples; OpenCV writes
and reads it): a float has no lossless PNG form.
"""

from __future__ import annotations

import cv2
import numpy as np

from vla_client.codecs.png_write import PNG_END, PNG_SIGNATURE
from vla_client.errors import CodecError, PayloadTooLargeError

DEPTH_DTYPES = ("uint16", "float32")
"""The dtypes a depth frame may have: uint16 (millimetres) or float32 (metres)."""


def as_depth_frame(array: np.ndarray, *, field: str | None = None) -> np.ndarray:
    """`array` as a C-contiguous HxW depth frame (uint16 or float32, native byte order), or
    `CodecError` saying what is wrong; HxWx1 is taken as HxW."""
    if not isinstance(array, np.ndarray):
        raise CodecError(f"depth frame must be an array, got {type(array).__name__}", field=field)
    if array.ndim == 3 and array.shape[2] == 1:
        array = array[:, :, 0]
    if array.ndim != 2:
        raise CodecError(
            f"depth frame must be HxW (or HxWx1), got shape {tuple(array.shape)}", field=field
        )
    if 0 in array.shape:
        raise CodecError(
            f"depth frame has a zero-size dimension: {tuple(array.shape)}", field=field
        )
    if array.dtype.name not in DEPTH_DTYPES:
        raise CodecError(
            f"depth frames are uint16 (millimetres) or float32 (metres), got {array.dtype}; "
            "convert it yourself (a depth value is never rescaled here)",
            field=field,
        )
    return np.ascontiguousarray(array, dtype=array.dtype.newbyteorder("="))


def encode_depth_png(frame: np.ndarray) -> bytes:
    """Lossless 16-bit grey PNG of a uint16 depth frame; `CodecError` for any other frame
    (float32 depth has no PNG: send it raw)."""
    if frame.dtype != np.uint16 or frame.ndim != 2:
        raise CodecError(
            f"a depth PNG holds uint16 HxW frames, got {frame.dtype} {tuple(frame.shape)}; "
            'send float32 depth with encoding="raw"'
        )
    ok, buffer = cv2.imencode(".png", frame, [cv2.IMWRITE_PNG_COMPRESSION, 1])
    if not ok:
        raise CodecError("OpenCV could not encode a 16-bit PNG")
    return bytes(buffer.tobytes())


def decode_depth_png(data: bytes, *, max_pixels: int, field: str | None = None) -> np.ndarray:
    """A 16-bit grey PNG as a uint16 HxW depth frame. `PayloadTooLargeError` for more than
    `max_pixels` (read from the header before any pixel), `CodecError` for anything but a whole
    16-bit grey PNG (an 8-bit or colour PNG is an image, not depth)."""
    if not data.startswith(PNG_SIGNATURE) or len(data) < 26 or data[12:16] != b"IHDR":
        raise CodecError("a depth image must be a 16-bit grey PNG", field=field)
    width, height = int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")
    bit_depth, colour_type = data[24], data[25]
    if (bit_depth, colour_type) != (16, 0):
        raise CodecError(
            f"a depth PNG must be 16-bit grey, got {bit_depth}-bit colour type {colour_type}",
            field=field,
        )
    if width * height > max_pixels:
        raise PayloadTooLargeError(
            f"depth image is {width}x{height} = {width * height} pixels, over the limit of "
            f"{max_pixels}",
            field=field,
        )
    if not data.rstrip(b"\x00").endswith(PNG_END):
        raise CodecError("truncated PNG (no IEND chunk)", field=field)
    frame = cv2.imdecode(np.frombuffer(data, np.uint8), cv2.IMREAD_UNCHANGED)
    if frame is None or frame.dtype != np.uint16 or frame.shape != (height, width):
        raise CodecError("corrupt 16-bit PNG data", field=field)
    return np.ascontiguousarray(frame)
