import io
import os
import signal
import struct
import threading
import time
import zlib

import cv2
import numpy as np
import pytest
from PIL import Image

from vla_client.codecs import decode_image_bytes, encode_jpeg, encode_png, map_frames, parallel
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


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
# Python 3.12+ warns when a process with threads forks: that fork is what this test is about.
@pytest.mark.filterwarnings("ignore:This process .* is multi-threaded:DeprecationWarning")
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


def test_a_forked_child_forgets_the_parents_pool_and_starts_its_own() -> None:
    """What the forked child runs after the fork (`os.register_at_fork`), here in this process,
    where mutation testing sees it: the pool is dropped, and the next map starts a new one."""
    assert map_frames(abs, range(-2, 0)) == [2, 1]
    parents = parallel._thread_pool()
    parallel._forget_pool()
    assert parallel._pool is None
    assert map_frames(abs, range(-2, 0)) == [2, 1]
    assert parallel._pool is not None and parallel._pool is not parents
    parents.shutdown()  # in a child its threads would not exist; here they are ended


FRAME = np.random.default_rng(1).integers(0, 256, (24, 32, 3), dtype=np.uint8)


def refused(data: bytes, error: type[CodecError] = CodecError, **options) -> CodecError:
    """The error `decode_image_bytes` raises for `data`, checked to name field images.cam."""
    with pytest.raises(error) as caught:
        decode_image_bytes(data, field="images.cam", **options)
    assert caught.value.field == "images.cam"
    return caught.value


def test_jpeg_quality_runs_from_1_to_100(frames):
    frame = frames["wrist"]
    sizes = [len(encode_jpeg(frame, quality)) for quality in (1, 50, 100)]
    assert sizes == sorted(sizes) and sizes[0] < sizes[2] / 2  # the quality reaches the encoder
    worst, best = (decode_image_bytes(encode_jpeg(frame, quality)) for quality in (1, 100))
    assert psnr(best, frame) > psnr(worst, frame) + 5
    for quality in (0, 101):
        with pytest.raises(CodecError, match=f"^JPEG quality must be in 1..100, got {quality}$"):
            encode_jpeg(frame, quality)


def test_png_header_edges_are_named():
    png = encode_png(FRAME)
    # 24 bytes carry the signature and the whole size: the size is read, the end is missing.
    assert str(refused(png[:24])) == "images.cam: truncated PNG (no IEND chunk)"
    assert str(refused(png[:23])) == "images.cam: truncated PNG (no IHDR header)"
    assert str(refused(png + b"X")) == "images.cam: truncated PNG (no IEND chunk)"
    np.testing.assert_array_equal(decode_image_bytes(png + b"\x00" * 5), FRAME)  # zero padding


def test_corrupt_pixel_data_is_named_by_format():
    png = bytearray(encode_png(FRAME))
    start = png.find(b"IDAT") + 10
    png[start : start + 20] = bytes(20)  # the zlib stream broken, the chunks and IEND intact
    assert str(refused(bytes(png))) == "images.cam: corrupt PNG data"
    jpeg = encode_jpeg(FRAME)
    sof = jpeg.find(b"\xff\xc0")
    (length,) = struct.unpack(">H", jpeg[sof + 2 : sof + 4])
    headers_only = jpeg[: sof + 2 + length] + b"\xff\xd9"  # a frame header, then no scan
    assert str(refused(headers_only)) == "images.cam: corrupt JPEG data"


@pytest.mark.parametrize(("width", "height"), [(0, 5), (5, 0), (0, 0)])
def test_an_empty_size_in_the_header_is_refused(width, height):
    with pytest.raises(CodecError) as caught:
        decode_image_bytes(_png_header(width, height) + b"IEND\xaeB`\x82", field="images.cam")
    assert str(caught.value) == f"images.cam: image header gives an empty size {width}x{height}"


@pytest.mark.parametrize("shape", [(1, 7, 3), (7, 1, 3), (1, 1, 3)])
def test_one_pixel_wide_or_high_frames_round_trip(shape):
    frame = np.random.default_rng(2).integers(0, 256, shape, dtype=np.uint8)
    np.testing.assert_array_equal(decode_image_bytes(encode_png(frame)), frame)
    assert decode_image_bytes(encode_jpeg(frame)).shape == shape


def test_jpeg_markers_before_the_frame_header_are_walked_over():
    jpeg = encode_jpeg(FRAME)
    expected = decode_image_bytes(jpeg)
    comment = b"\xff\xfe" + struct.pack(">H", 40002) + bytes(40000)  # a length over 32767
    for inserted in [b"\xff" * 3, b"\xff\x01", b"\xff\xd0\xff\xd7", comment]:
        variant = jpeg[:2] + inserted + jpeg[2:]  # fill bytes, TEM, RST0 and RST7, a comment
        np.testing.assert_array_equal(decode_image_bytes(variant), expected)


def test_jpeg_header_edges_are_named():
    jpeg = encode_jpeg(FRAME)
    sof = jpeg.find(b"\xff\xc0")
    # The size is judged as soon as the frame header gives it: nine bytes from its marker.
    error = refused(jpeg[: sof + 9], PayloadTooLargeError, max_pixels=24 * 32 - 1)
    assert "32x24 = 768 pixels" in str(error)
    assert str(refused(jpeg[: sof + 8])) == "images.cam: truncated JPEG (no frame header)"
    assert str(refused(jpeg[:20])) == "images.cam: truncated JPEG (no frame header)"  # after APP0
    assert str(refused(jpeg[:20] + b"abcd")) == "images.cam: corrupt JPEG (bad marker)"
    # The end-of-image marker may be followed by up to 62 bytes of padding, not more.
    np.testing.assert_array_equal(decode_image_bytes(jpeg + bytes(62)), decode_image_bytes(jpeg))
    error = refused(jpeg + bytes(63))
    assert str(error) == "images.cam: truncated JPEG (no end-of-image marker)"


def test_other_formats_decode_to_rgb_and_their_errors_are_named():
    grey = io.BytesIO()
    Image.fromarray(FRAME[:, :, 0]).save(grey, format="BMP")
    as_rgb = np.repeat(FRAME[:, :, :1], 3, axis=2)
    np.testing.assert_array_equal(decode_image_bytes(grey.getvalue()), as_rgb)
    rgb = io.BytesIO()
    Image.fromarray(FRAME).save(rgb, format="BMP")
    bomb = bytearray(rgb.getvalue())
    bomb[18:26] = struct.pack("<ii", 20000, 20000)  # a header claiming 400 M pixels
    error = refused(bytes(bomb), PayloadTooLargeError)
    assert str(error).startswith("images.cam: image over the pixel limit: ")
    error = refused(rgb.getvalue()[:200])
    assert str(error).startswith("images.cam: corrupt image data: ")
    assert not isinstance(error, PayloadTooLargeError)
    assert str(refused(b"not an image")).startswith("images.cam: undecodable image data: ")


def test_map_frames_runs_its_threads_under_the_codec_name():
    names = map_frames(lambda _: threading.current_thread().name, range(4))
    assert all(name.startswith("codec") for name in names)


def test_map_frames_handles_two_frames_at_once_and_one_inline():
    both_waiting = threading.Barrier(2, timeout=5)  # breaks unless the two run concurrently
    assert map_frames(lambda x: (both_waiting.wait(), x)[1], [1, 2]) == [1, 2]
    assert map_frames(abs, [-3]) == [3] and map_frames(abs, []) == []


@pytest.mark.parametrize(("cores", "threads"), [(16, 8), (3, 3), (None, 2)])
def test_the_codec_pool_has_a_thread_per_core_up_to_eight(monkeypatch, cores, threads):
    from vla_client.codecs import parallel as images

    monkeypatch.setattr(images, "_pool", None)  # a fresh pool, sized for the cores below
    monkeypatch.setattr(os, "cpu_count", lambda: cores)
    try:
        names = map_frames(lambda _: (time.sleep(0.05), threading.current_thread().name)[1],
                           range(4 * threads + 4))  # fmt: skip
        assert len(set(names)) == threads
    finally:
        if images._pool is not None:
            images._pool.shutdown()
