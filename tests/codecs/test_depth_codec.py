"""`codecs.depth` on its own: the depth frame layout and its 16-bit PNG, read back by an
independent decoder (Pillow) and by a reader that trusts nothing."""

from __future__ import annotations

import io

import numpy as np
import pytest
from PIL import Image

from vla_client.codecs.depth import as_depth_frame, decode_depth_png, encode_depth_png
from vla_client.errors import CodecError, PayloadTooLargeError

MILLIMETRES = np.random.default_rng(7).integers(0, 65536, (9, 13), dtype=np.uint16)


def test_a_depth_png_is_16_bit_grey_that_any_decoder_reads_exactly():
    data = encode_depth_png(MILLIMETRES)
    assert (data[24], data[25]) == (16, 0)  # IHDR: bit depth 16, colour type 0 (grey)
    with Image.open(io.BytesIO(data)) as image:
        assert image.size == (13, 9)
        assert np.array_equal(np.asarray(image).astype(np.uint16), MILLIMETRES)
    assert decode_depth_png(data, max_pixels=117).tobytes() == MILLIMETRES.tobytes()


def test_a_depth_png_is_read_within_its_limits():
    data = encode_depth_png(MILLIMETRES)
    with pytest.raises(PayloadTooLargeError, match="13x9 = 117 pixels, over the limit of 116"):
        decode_depth_png(data, max_pixels=116)
    with pytest.raises(CodecError, match=r"^truncated PNG \(no IEND chunk\)$"):
        decode_depth_png(data[:-20], max_pixels=117)
    with pytest.raises(CodecError, match=r"^a depth image must be a 16-bit grey PNG$"):
        decode_depth_png(b"\xff\xd8\xff\xe0 a JPEG", max_pixels=117)


def test_only_uint16_has_a_png():
    with pytest.raises(CodecError, match=r'send float32 depth with encoding="raw"$'):
        encode_depth_png(MILLIMETRES.astype(np.float32))


def test_a_depth_frame_is_native_c_ordered_and_never_copied_needlessly():
    assert np.shares_memory(as_depth_frame(MILLIMETRES), MILLIMETRES)  # no copy
    swapped = as_depth_frame(MILLIMETRES.astype(">u2"))
    assert swapped.dtype.isnative and swapped.tobytes() == MILLIMETRES.tobytes()
    strided = as_depth_frame(MILLIMETRES[:, ::2])
    assert strided.flags.c_contiguous and np.array_equal(strided, MILLIMETRES[:, ::2])
