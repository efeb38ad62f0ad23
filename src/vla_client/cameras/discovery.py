"""Find the cameras attached to this machine and the modes they offer, for `vla-client cameras`.

On Linux the V4L2 device nodes are listed and their formats, frame sizes and frame rates are
enumerated with the kernel's own ioctls (what ``v4l2-ctl --list-formats-ext`` shows), since
OpenCV can only report the current mode. Nodes without capture formats (the metadata nodes UVC
cameras add) are skipped. Elsewhere the first device indices are probed through OpenCV.
"""

from __future__ import annotations

import os
import re
import struct
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import cv2

from vla_client.cameras.opencv import describe_mode

Ioctl = Callable[[int, int, bytes], bytes]

_CAPTURE = 1  # V4L2_BUF_TYPE_VIDEO_CAPTURE
_DISCRETE = 1  # V4L2_FRMSIZE_TYPE_DISCRETE and V4L2_FRMIVAL_TYPE_DISCRETE
# struct v4l2_fmtdesc (64 bytes): index, type, flags, description, pixelformat, mbus_code.
_FMTDESC = struct.Struct("<III32xII12x")
# struct v4l2_frmsizeenum (44 bytes): index, pixel_format, type, then a union of six u32:
# width, height (discrete) or min/max/step width, min/max/step height (stepwise).
_FRMSIZE = struct.Struct("<III6I8x")
# struct v4l2_frmivalenum (52 bytes): index, pixel_format, width, height, type, then a union of
# six u32 whose first two are the discrete interval's numerator and denominator.
_FRMIVAL = struct.Struct("<IIIII6I8x")


NODE = re.compile(r"video(\d+)")


def _iowr(number: int, size: int) -> int:
    return (3 << 30) | (size << 16) | (ord("V") << 8) | number


VIDIOC_ENUM_FMT = _iowr(2, _FMTDESC.size)
VIDIOC_ENUM_FRAMESIZES = _iowr(74, _FRMSIZE.size)
VIDIOC_ENUM_FRAMEINTERVALS = _iowr(75, _FRMIVAL.size)


@dataclass(frozen=True)
class Mode:
    """One pixel format and frame size with the frame rates the device offers for it."""

    fourcc: str
    width: int
    height: int
    rates: tuple[float, ...] = ()

    def __str__(self) -> str:
        rates = ", ".join(f"{rate:g}" for rate in self.rates)
        return f"{self.fourcc} {self.width}x{self.height}" + (f" @ {rates} fps" if rates else "")


@dataclass(frozen=True)
class CameraDevice:
    """A camera found on this machine: its spec for ``--camera``, current mode and modes."""

    spec: str
    current: str
    modes: tuple[Mode, ...] = field(default=())


def list_devices(max_index: int = 10) -> list[CameraDevice]:
    """The capture devices present, each with its modes where the platform can list them."""
    if sys.platform.startswith("linux"):
        return [device for path in _video_nodes() if (device := _linux_device(path)) is not None]
    return [device for index in range(max_index) if (device := _probe(str(index))) is not None]


def v4l2_modes(path: str, ioctl: Ioctl | None = None) -> tuple[Mode, ...]:
    """Every discrete capture mode of V4L2 node `path`; stepwise sizes are reported by their max.

    `ioctl` defaults to `fcntl.ioctl` (imported here: the module does not exist on Windows).
    """
    if ioctl is None:
        import fcntl

        ioctl = fcntl.ioctl
    fd = os.open(path, os.O_RDWR | os.O_NONBLOCK)
    try:
        return tuple(
            Mode(fourcc, width, height, _rates(fd, ioctl, pixel_format, width, height))
            for fourcc, pixel_format in _formats(fd, ioctl)
            for width, height in _sizes(fd, ioctl, pixel_format)
        )
    finally:
        os.close(fd)


def _replies(
    fd: int, ioctl: Ioctl, request: int, layout: struct.Struct, *fields: int
) -> Iterator[tuple[Any, ...]]:
    """The driver's answers for index 0, 1, ... until it says the list has ended (EINVAL).

    Each request is `layout` packed with the index, then `fields`, then zeros.
    """
    zeros = (0,) * (len(layout.unpack(bytes(layout.size))) - 1 - len(fields))
    index = 0
    while True:
        try:
            reply = ioctl(fd, request, layout.pack(index, *fields, *zeros))
        except OSError:
            return
        yield layout.unpack(reply)
        index += 1


def _formats(fd: int, ioctl: Ioctl) -> list[tuple[str, int]]:
    replies = _replies(fd, ioctl, VIDIOC_ENUM_FMT, _FMTDESC, _CAPTURE)
    codes = [int(reply[3]) for reply in replies]
    return [(code.to_bytes(4, "little").decode("ascii", "replace"), code) for code in codes]


def _sizes(fd: int, ioctl: Ioctl, pixel_format: int) -> list[tuple[int, int]]:
    sizes = []
    for reply in _replies(fd, ioctl, VIDIOC_ENUM_FRAMESIZES, _FRMSIZE, pixel_format):
        kind, union = reply[2], reply[3:]
        if kind != _DISCRETE:  # stepwise or continuous: one range; report its largest size
            return [(union[1], union[4])]
        sizes.append((union[0], union[1]))
    return sizes


def _rates(fd: int, ioctl: Ioctl, pixel_format: int, width: int, height: int) -> tuple[float, ...]:
    rates = []
    for reply in _replies(
        fd, ioctl, VIDIOC_ENUM_FRAMEINTERVALS, _FRMIVAL, pixel_format, width, height
    ):
        kind, numerator, denominator = reply[4:7]
        if kind != _DISCRETE or numerator == 0:
            break
        rates.append(denominator / numerator)
    return tuple(sorted(set(rates), reverse=True))


def _video_nodes() -> list[str]:
    numbers = [m.group(1) for p in Path("/dev").glob("video*") if (m := NODE.fullmatch(p.name))]
    return [f"/dev/video{n}" for n in sorted(numbers, key=int)]


def _linux_device(path: str) -> CameraDevice | None:
    try:
        modes = v4l2_modes(path)
    except OSError:
        modes = ()
    if not modes:
        return None
    device = _probe(path)
    return CameraDevice(path, device.current if device else "busy or unreadable", modes)


def _probe(spec: str) -> CameraDevice | None:
    capture = cv2.VideoCapture(int(spec) if spec.isdigit() else spec)
    try:
        return CameraDevice(spec, describe_mode(capture)) if capture.isOpened() else None
    finally:
        capture.release()
