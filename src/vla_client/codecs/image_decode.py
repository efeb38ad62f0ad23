"""PNG, JPEG and whatever Pillow reads, to camera frames, on the server: the decoders.

PNGs are read by `png_read` where its fast path applies, by OpenCV otherwise; JPEG is
libjpeg-turbo through OpenCV, which releases the GIL, so several images decode in parallel
threads; any other format goes to Pillow. Frames come out RGB (OpenCV's BGR is swapped here).

Decoding never trusts the input: the width and height in the header are checked against a pixel
limit before any pixel is decoded (decompression bombs), and a PNG without its IEND chunk or a
JPEG without its end marker is refused instead of coming back half grey. The robot's encoders
are `vla_client.codecs.image_encode`.
"""

from __future__ import annotations

import io
import struct

import cv2
import numpy as np
from PIL import Image, UnidentifiedImageError

from vla_client.codecs.png_read import read_png
from vla_client.codecs.png_write import PNG_END, PNG_SIGNATURE
from vla_client.errors import CodecError, PayloadTooLargeError

DEFAULT_MAX_PIXELS = 4096 * 4096

_JPEG_START = b"\xff\xd8"
_JPEG_END = b"\xff\xd9"
_JPEG_SOF_MARKERS = frozenset(range(0xC0, 0xD0)) - {0xC4, 0xC8, 0xCC}


def decode_image_bytes(
    data: bytes, *, max_pixels: int = DEFAULT_MAX_PIXELS, field: str | None = None
) -> np.ndarray:
    """Decode PNG, JPEG (or any format Pillow reads) to a C-contiguous HxWx3 uint8 RGB array."""
    if data.startswith(PNG_SIGNATURE):
        width, height = _png_size(data, field)
        _check_pixels(width, height, max_pixels, field)
        if not data.rstrip(b"\x00").endswith(PNG_END):
            raise CodecError("truncated PNG (no IEND chunk)", field=field)
        pixels = read_png(data)
        return pixels if pixels is not None else _imdecode(data, "PNG", field)
    if data.startswith(_JPEG_START):
        width, height = _jpeg_size(data, field)
        _check_pixels(width, height, max_pixels, field)
        if _JPEG_END not in data[-64:]:
            raise CodecError("truncated JPEG (no end-of-image marker)", field=field)
        return _imdecode(data, "JPEG", field)
    return _decode_with_pillow(data, max_pixels, field)


def _imdecode(data: bytes, kind: str, field: str | None) -> np.ndarray:
    frame = cv2.imdecode(np.frombuffer(data, np.uint8), cv2.IMREAD_COLOR_RGB)
    if frame is None:
        raise CodecError(f"corrupt {kind} data", field=field)
    return np.ascontiguousarray(frame)


def _check_pixels(width: int, height: int, max_pixels: int, field: str | None) -> None:
    if width <= 0 or height <= 0:
        raise CodecError(f"image header gives an empty size {width}x{height}", field=field)
    if width * height > max_pixels:
        raise PayloadTooLargeError(
            f"image is {width}x{height} = {width * height} pixels, over the limit of {max_pixels}",
            field=field,
        )


def _png_size(data: bytes, field: str | None) -> tuple[int, int]:
    if len(data) < 24 or data[12:16] != b"IHDR":
        raise CodecError("truncated PNG (no IHDR header)", field=field)
    width, height = struct.unpack(">II", data[16:24])
    return int(width), int(height)


def _jpeg_size(data: bytes, field: str | None) -> tuple[int, int]:
    position = 2
    while position + 4 <= len(data):
        if data[position] != 0xFF:
            raise CodecError("corrupt JPEG (bad marker)", field=field)
        marker = data[position + 1]
        if marker == 0xFF:  # fill byte
            position += 1
            continue
        if marker in (0x01, *range(0xD0, 0xD8)):  # markers without a length
            position += 2
            continue
        (length,) = struct.unpack(">H", data[position + 2 : position + 4])
        if marker in _JPEG_SOF_MARKERS:
            if position + 9 > len(data):
                break
            height, width = struct.unpack(">HH", data[position + 5 : position + 9])
            return int(width), int(height)
        position += 2 + length
    raise CodecError("truncated JPEG (no frame header)", field=field)


def _decode_with_pillow(data: bytes, max_pixels: int, field: str | None) -> np.ndarray:
    try:
        with Image.open(io.BytesIO(data)) as image:
            _check_pixels(image.width, image.height, max_pixels, field)
            return np.ascontiguousarray(np.asarray(image.convert("RGB")))
    except Image.DecompressionBombError as exc:  # Pillow's own limit, met before ours
        raise PayloadTooLargeError(f"image over the pixel limit: {exc}", field=field) from None
    except UnidentifiedImageError as exc:
        raise CodecError(f"undecodable image data: {exc}", field=field) from None
    except (OSError, SyntaxError, ValueError) as exc:
        if isinstance(exc, CodecError):
            raise
        raise CodecError(f"corrupt image data: {exc}", field=field) from None
