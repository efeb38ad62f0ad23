"""Device discovery: V4L2 mode enumeration against a fake driver, and the device listing."""

from __future__ import annotations

import errno
import struct
from pathlib import Path

import pytest

from vla_client.cameras import discovery
from vla_client.cameras.discovery import Mode, v4l2_modes

MJPG = int.from_bytes(b"MJPG", "little")
YUYV = int.from_bytes(b"YUYV", "little")
SIZES = {MJPG: [(1280, 720), (640, 480)]}
RATES = {(MJPG, 1280, 720): [(1, 30), (1, 15)], (MJPG, 640, 480): [(1, 30)]}


class FakeDriver:
    """Answers the three enumeration ioctls like a UVC camera: MJPG sizes, a stepwise YUYV."""

    def __call__(self, fd: int, request: int, buffer: bytes) -> bytes:
        index = struct.unpack_from("<I", buffer)[0]
        if request == discovery.VIDIOC_ENUM_FMT:
            assert len(buffer) == 64 and struct.unpack_from("<I", buffer, 4)[0] == 1
            codes = [MJPG, YUYV]
            return self._answer(buffer, index < 2, 44, codes[index % 2])
        if request == discovery.VIDIOC_ENUM_FRAMESIZES:
            assert len(buffer) == 44
            pixel_format = struct.unpack_from("<I", buffer, 4)[0]
            if pixel_format == YUYV:  # stepwise 160x120 .. 1920x1080
                if index:
                    raise OSError(errno.EINVAL, "end")
                return buffer[:8] + struct.pack("<7I", 2, 160, 1920, 8, 120, 1080, 8) + bytes(8)
            sizes = SIZES[pixel_format]
            ok = index < len(sizes)
            width, height = sizes[index] if ok else (0, 0)
            return self._answer(buffer, ok, 8, 1, width, height)
        if request == discovery.VIDIOC_ENUM_FRAMEINTERVALS:
            assert len(buffer) == 52
            key = struct.unpack_from("<III", buffer, 4)
            rates = RATES.get(key, [])
            ok = index < len(rates)
            return self._answer(buffer, ok, 16, 1, *(rates[index] if ok else (0, 0)))
        raise AssertionError(f"unexpected ioctl {request:#x}")

    @staticmethod
    def _answer(buffer: bytes, ok: bool, offset: int, *values: int) -> bytes:
        if not ok:
            raise OSError(errno.EINVAL, "end of list")
        reply = bytearray(buffer)
        struct.pack_into(f"<{len(values)}I", reply, offset, *values)
        return bytes(reply)


def test_ioctl_numbers_match_the_kernel_headers() -> None:
    assert discovery.VIDIOC_ENUM_FMT == 0xC0405602
    assert discovery.VIDIOC_ENUM_FRAMESIZES == 0xC02C564A
    assert discovery.VIDIOC_ENUM_FRAMEINTERVALS == 0xC034564B


def test_v4l2_modes_lists_formats_sizes_and_rates(tmp_path: Path) -> None:
    node = tmp_path / "video0"
    node.write_bytes(b"")
    modes = v4l2_modes(str(node), ioctl=FakeDriver())
    assert modes == (
        Mode("MJPG", 1280, 720, (30.0, 15.0)),
        Mode("MJPG", 640, 480, (30.0,)),
        Mode("YUYV", 1920, 1080, ()),
    )
    assert str(modes[0]) == "MJPG 1280x720 @ 30, 15 fps"
    assert str(modes[2]) == "YUYV 1920x1080"


def test_list_devices_skips_nodes_without_capture_modes(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(discovery.sys, "platform", "linux")
    monkeypatch.setattr(discovery, "_video_nodes", lambda: ["/dev/video0", "/dev/video1"])
    modes = (Mode("MJPG", 640, 480, (30.0,)),)
    monkeypatch.setattr(
        discovery, "v4l2_modes", lambda path: modes if path == "/dev/video0" else ()
    )
    monkeypatch.setattr(discovery, "_probe", lambda spec: None)
    devices = discovery.list_devices()
    assert [(d.spec, d.current, d.modes) for d in devices] == [
        ("/dev/video0", "busy or unreadable", modes)
    ]
