"""PNG writers (fpng, OpenCV) and the fast reader: valid files, exact pixels, every check kept."""

from __future__ import annotations

import io
import struct
import zlib

import cv2
import numpy as np
import pytest
from PIL import Image

from vla_client.cameras.scene import synthetic_frames
from vla_client.codecs import decode_image_bytes, encode_png, png_write
from vla_client.codecs.png_read import read_png
from vla_client.codecs.png_write import PNG_PARAMS, encode_with_opencv, png_writer
from vla_client.errors import CodecError

(FRAME,) = synthetic_frames(1, 60, 90, seed=4).values()


def by_opencv(data: bytes) -> np.ndarray:
    return cv2.imdecode(np.frombuffer(data, np.uint8), cv2.IMREAD_COLOR_RGB)


def by_pillow(data: bytes) -> np.ndarray:
    with Image.open(io.BytesIO(data)) as image:
        assert image.mode == "RGB"
        return np.asarray(image)


def chunks(data: bytes) -> list[tuple[bytes, bytes]]:
    found, position = [], 8
    while position < len(data):
        (length,) = struct.unpack_from(">I", data, position)
        found.append(
            (data[position + 4 : position + 8], data[position + 8 : position + 8 + length])
        )
        position += 12 + length
    return found


def assemble(items: list[tuple[bytes, bytes]]) -> bytes:
    out = b"\x89PNG\r\n\x1a\n"
    for kind, body in items:
        out += struct.pack(">I", len(body)) + kind + body
        out += struct.pack(">I", zlib.crc32(kind + body))
    return out


def opencv_png(frame: np.ndarray) -> bytes:
    return encode_with_opencv(".png", frame, PNG_PARAMS)


def test_fpng_writes_when_it_is_installed() -> None:
    pytest.importorskip("fpng")
    assert png_writer() == "fpng"
    assert encode_png(FRAME) != opencv_png(FRAME)


@pytest.mark.parametrize("writer", [encode_png, opencv_png], ids=["default", "opencv"])
def test_every_decoder_reads_the_pixels_exactly(writer) -> None:
    data = writer(FRAME)
    for decode in (by_opencv, by_pillow, decode_image_bytes, read_png):
        np.testing.assert_array_equal(decode(data), FRAME)


def test_without_fpng_opencv_writes(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(png_write, "_fpng", None)
    assert png_writer() == "opencv"
    assert encode_png(FRAME) == opencv_png(FRAME)


def test_an_fpng_file_that_fails_the_check_is_written_by_opencv(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    real = png_write.fpng_module()
    if real is None:
        pytest.skip("fpng is not installed")

    class Truncating:
        @staticmethod
        def from_ndarray(frame: np.ndarray) -> bytes:
            return real.from_ndarray(frame)[:-20]  # type: ignore[no-any-return]

    monkeypatch.setattr(png_write, "_fpng", Truncating)
    assert encode_png(FRAME) == opencv_png(FRAME)


def test_a_frame_no_writer_can_write_raises_a_codec_error() -> None:
    # fpng returns empty bytes for widths over 2**24, libpng refuses widths over 2**20.
    with pytest.raises(CodecError, match="could not encode"):
        encode_png(np.zeros((1, 2**24 + 1, 3), np.uint8))


@pytest.mark.parametrize("frame", [np.zeros((4, 4), np.uint8), np.zeros((4, 4, 4), np.uint8)])
def test_only_rgb_frames_are_written(frame: np.ndarray) -> None:
    with pytest.raises(CodecError, match="HxWx3"):
        encode_png(frame)


def test_non_contiguous_frames_are_written_exactly() -> None:
    view = np.ascontiguousarray(np.concatenate([FRAME, FRAME], axis=1))[:, ::2]
    np.testing.assert_array_equal(decode_image_bytes(encode_png(view)), view)


def test_rows_of_mixed_none_sub_and_up_filters_are_read() -> None:
    rng = np.random.default_rng(3)
    frame = rng.integers(0, 256, (6, 5, 3), dtype=np.uint8)
    filtered = []
    previous = np.zeros(15, np.int16)
    for index, row in enumerate(frame.reshape(6, 15).astype(np.int16)):
        kind = index % 3
        if kind == 1:
            row_out = row - np.concatenate([np.zeros(3, np.int16), row[:-3]])
        elif kind == 2:
            row_out = row - previous
        else:
            row_out = row
        filtered.append(bytes([kind]) + (row_out % 256).astype(np.uint8).tobytes())
        previous = row
    header = struct.pack(">IIBBBBB", 5, 6, 8, 2, 0, 0, 0)
    data = assemble(
        [(b"IHDR", header), (b"IDAT", zlib.compress(b"".join(filtered))), (b"IEND", b"")]
    )
    np.testing.assert_array_equal(by_opencv(data), frame)
    np.testing.assert_array_equal(read_png(data), frame)


def test_files_it_cannot_read_fast_go_to_opencv() -> None:
    buffer = io.BytesIO()
    Image.fromarray(FRAME).save(buffer, format="PNG")  # adaptive filters: Paeth, Average
    pillow = buffer.getvalue()
    assert read_png(pillow) is None
    np.testing.assert_array_equal(decode_image_bytes(pillow), FRAME)
    grey = cv2.imencode(".png", FRAME[..., 0])[1].tobytes()
    deep = cv2.imencode(".png", FRAME.astype(np.uint16) * 257)[1].tobytes()
    assert read_png(grey) is None and read_png(deep) is None
    np.testing.assert_array_equal(decode_image_bytes(grey)[..., 2], FRAME[..., 0])


def _replace(data: bytes, kind: bytes, body: bytes) -> bytes:
    return assemble([(k, body if k == kind else b) for k, b in chunks(data)])


@pytest.mark.parametrize("writer", [encode_png, opencv_png], ids=["default", "opencv"])
def test_corrupt_files_are_left_to_opencv_which_refuses_them(writer) -> None:
    data = writer(FRAME)
    (stream,) = [b"".join(b for k, b in chunks(data) if k == b"IDAT")]
    items = [(k, b) for k, b in chunks(data) if k != b"IDAT"]
    one_idat = assemble([items[0], (b"IDAT", stream), *items[1:]])

    bad_crc = bytearray(one_idat)
    idat_crc = one_idat.index(b"IDAT") + 4 + len(stream)
    bad_crc[idat_crc] ^= 0xFF  # the image data is intact, its CRC is wrong
    raw = zlib.decompress(stream)
    short = assemble([items[0], (b"IDAT", zlib.compress(raw[:-100])), *items[1:]])
    long = assemble([items[0], (b"IDAT", zlib.compress(raw + b"\0" * 300)), *items[1:]])
    bad_filter = assemble([items[0], (b"IDAT", zlib.compress(b"\x09" + raw[1:])), *items[1:]])
    unknown_critical = assemble([items[0], (b"ABCD", b"x"), (b"IDAT", stream), *items[1:]])
    for corrupt in (bytes(bad_crc), short, bad_filter, unknown_critical):
        assert read_png(corrupt) is None
        with pytest.raises(CodecError, match="corrupt PNG") as info:
            decode_image_bytes(corrupt, field="input.observation.images.wrist")
        assert info.value.field == "input.observation.images.wrist"
    # Extra image data is only a warning to libpng: the outcome stays libpng's.
    assert read_png(long) is None
    np.testing.assert_array_equal(decode_image_bytes(long), FRAME)


def test_ancillary_chunks_and_a_suggested_palette_are_skipped() -> None:
    data = opencv_png(FRAME)
    items = chunks(data)
    extra = [items[0], (b"PLTE", bytes(range(6))), (b"tEXt", b"k\0v"), *items[1:]]
    np.testing.assert_array_equal(read_png(assemble(extra)), FRAME)
