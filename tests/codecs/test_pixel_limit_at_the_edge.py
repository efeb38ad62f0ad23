"""The pixel limit exactly at, one below and one above, for every image form the server decodes.

Encoded images are judged by the width and height in their header, before any pixel is
decoded (PNG's IHDR, JPEG's frame header, Pillow's for other formats); arrays, tensor payloads
and pixel lists by their first two dimensions. A frame of P pixels must decode with
``max_pixels=P`` and ``P + 1`` and be refused with ``P - 1``.
"""

from __future__ import annotations

import io
import struct
import zlib
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from PIL import Image

from vla_client.codecs import b64encode_text, decode_image_bytes, encode_jpeg, encode_png
from vla_client.errors import CodecError, PayloadTooLargeError
from vla_client.server.wire.decode import decode_image_value

FRAME = np.random.default_rng(5).integers(0, 256, (24, 32, 3), dtype=np.uint8)
PIXELS = 24 * 32


def bmp(frame: np.ndarray) -> bytes:
    buffer = io.BytesIO()
    Image.fromarray(frame).save(buffer, format="BMP")
    return buffer.getvalue()


FORMS: dict[str, Callable[[np.ndarray], Any]] = {
    "png": lambda frame: {"b64_json": b64encode_text(encode_png(frame))},
    "png-bytes": encode_png,
    "jpeg-bytes": lambda frame: encode_jpeg(frame, 95),
    "bmp-bytes": bmp,
    "ndarray": lambda frame: frame,
    "tensor": lambda frame: {"values": frame.ravel().tolist(), "shape": list(frame.shape)},
    "pixel-list": lambda frame: frame.tolist(),
    "grey-ndarray": lambda frame: frame[:, :, 0],
}


@pytest.mark.parametrize("form", sorted(FORMS))
@pytest.mark.parametrize(
    ("max_pixels", "accepted"),
    [(PIXELS + 1, True), (PIXELS, True), (PIXELS - 1, False)],
    ids=["one-below", "at", "one-above"],
)
def test_the_pixel_limit_for_every_form(form: str, max_pixels: int, accepted: bool) -> None:
    value = FORMS[form](FRAME)
    if accepted:
        decoded = decode_image_value(value, max_pixels=max_pixels, field="images.cam")
        assert decoded.shape == FRAME.shape
        if "jpeg" not in form:
            expected = np.repeat(FRAME[:, :, :1], 3, axis=2) if form == "grey-ndarray" else FRAME
            np.testing.assert_array_equal(decoded, expected)
    else:
        with pytest.raises(PayloadTooLargeError) as caught:
            decode_image_value(value, max_pixels=max_pixels, field="images.cam")
        assert str(PIXELS) in str(caught.value) and str(max_pixels) in str(caught.value)
        assert caught.value.field == "images.cam"


def forged_png(width: int, height: int) -> bytes:
    """A PNG whose header claims `width` x `height` and that carries no pixel data at all."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))

    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IEND", b"")


@pytest.mark.parametrize(("width", "height"), [(4097, 4096), (4096, 4097), (2**31, 2**31)])
def test_the_png_header_is_judged_before_any_pixel_is_decoded(width: int, height: int) -> None:
    """Just over the default 4096 x 4096: refused as too large, not as corrupt data."""
    with pytest.raises(PayloadTooLargeError, match=f"{width}x{height}"):
        decode_image_bytes(forged_png(width, height))


def test_the_default_limit_takes_a_header_of_exactly_4096_by_4096() -> None:
    with pytest.raises(CodecError) as caught:  # the header passes; the missing pixels do not
        decode_image_bytes(forged_png(4096, 4096))
    assert not isinstance(caught.value, PayloadTooLargeError)
