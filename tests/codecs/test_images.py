import io
import os
import signal
import struct
import zlib

import cv2
import numpy as np
import pytest
from PIL import Image

from vla_client.codecs import decode_image_bytes, encode_jpeg, encode_png, map_frames
from vla_client.errors import CodecError, PayloadTooLargeError


def psnr(a: np.ndarray, b: np.ndarray) -> float:
    mse = np.mean((a.astype(np.float64) - b.astype(np.float64)) ** 2)
    return float(10 * np.log10(255.0**2 / mse))


def test_png_round_trip_is_bit_exact(frames):
    for frame in frames.values():
        decoded = decode_image_bytes(encode_png(frame))
        assert decoded.dtype == np.uint8 and decoded.flags.c_contiguous
        np.testing.assert_array_equal(decoded, frame)


def test_png_is_much_smaller_than_raw_on_camera_like_frames(frames):
    frame = frames["wrist"]
    assert len(encode_png(frame)) < 0.8 * frame.nbytes


def test_jpeg_q90_keeps_35_db(camera_frames):
    for frame in camera_frames.values():
        assert psnr(decode_image_bytes(encode_jpeg(frame, 90)), frame) >= 35.0


def test_channel_order_is_rgb_end_to_end():
    red = np.zeros((16, 16, 3), np.uint8)
    red[..., 0] = 255
    png = encode_png(red)
    # An independent decoder (Pillow) must see red too, so the bytes on the wire are RGB.
    assert Image.open(io.BytesIO(png)).getpixel((0, 0)) == (255, 0, 0)
    assert decode_image_bytes(png)[0, 0].tolist() == [255, 0, 0]
    assert decode_image_bytes(encode_jpeg(red, 95))[8, 8, 0] > 240


def test_grey_and_rgba_pngs_decode_to_rgb():
    grey = np.arange(64, dtype=np.uint8).reshape(8, 8) * 4
    ok, buffer = cv2.imencode(".png", grey)
    assert ok
    decoded = decode_image_bytes(buffer.tobytes())
    assert decoded.shape == (8, 8, 3)
    for channel in range(3):
        np.testing.assert_array_equal(decoded[..., channel], grey)
    rgba = np.random.default_rng(4).integers(0, 256, (8, 9, 4), dtype=np.uint8)
    rgba[..., 3] = np.arange(72, dtype=np.uint8).reshape(8, 9)  # alpha varies: it must be dropped
    png = io.BytesIO()
    Image.fromarray(rgba).save(png, format="PNG")
    decoded = decode_image_bytes(png.getvalue())
    assert decoded.shape == (8, 9, 3) and decoded.dtype == np.uint8
    np.testing.assert_array_equal(decoded, rgba[..., :3])  # RGB order kept, alpha dropped


def test_pillow_formats_are_accepted():
    frame = np.random.default_rng(0).integers(0, 255, (9, 11, 3), dtype=np.uint8)
    buffer = io.BytesIO()
    Image.fromarray(frame).save(buffer, format="BMP")
    np.testing.assert_array_equal(decode_image_bytes(buffer.getvalue()), frame)


def test_truncated_png_is_refused(frames):
    png = encode_png(frames["left"])
    with pytest.raises(CodecError, match="truncated PNG"):
        decode_image_bytes(png[: len(png) // 2])
    with pytest.raises(CodecError, match="truncated PNG"):
        decode_image_bytes(png[:20])


def test_truncated_jpeg_is_refused(frames):
    jpeg = encode_jpeg(frames["left"])
    with pytest.raises(CodecError, match="truncated JPEG"):
        decode_image_bytes(jpeg[: len(jpeg) // 2])


def test_garbage_is_refused():
    with pytest.raises(CodecError):
        decode_image_bytes(b"definitely not an image")


def _png_header(width: int, height: int) -> bytes:
    ihdr = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    chunk = struct.pack(">I", len(ihdr)) + b"IHDR" + ihdr
    return b"\x89PNG\r\n\x1a\n" + chunk + struct.pack(">I", zlib.crc32(b"IHDR" + ihdr))


def test_png_bomb_is_refused_from_the_header():
    with pytest.raises(PayloadTooLargeError, match="pixels"):
        decode_image_bytes(_png_header(60000, 60000), max_pixels=4096 * 4096)


def test_jpeg_bomb_is_refused_from_the_header(frames):
    jpeg = bytearray(encode_jpeg(frames["wrist"]))
    sof = jpeg.find(b"\xff\xc0")
    jpeg[sof + 5 : sof + 9] = struct.pack(">HH", 65000, 65000)
    with pytest.raises(PayloadTooLargeError):
        decode_image_bytes(bytes(jpeg), max_pixels=1_000_000)


def test_map_frames_keeps_order():
    assert map_frames(lambda x: x * 2, range(10)) == [x * 2 for x in range(10)]


def test_map_frames_works_in_a_forked_child():
    """A robot program that forks after encoding frames (multiprocessing's default on Linux)
    must not find the parent's thread pool, whose threads the child does not have."""
    assert map_frames(abs, range(-4, 0)) == [4, 3, 2, 1]  # the parent's pool now exists
    pid = os.fork()
    if pid == 0:  # the child: exit 0 only if the frames came back, killed by the alarm if hung
        try:
            signal.alarm(10)
            os._exit(0 if map_frames(abs, range(-4, 0)) == [4, 3, 2, 1] else 1)
        finally:
            os._exit(2)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
