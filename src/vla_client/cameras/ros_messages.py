"""ROS 2 ``sensor_msgs`` messages read as numpy: camera images, depth images, joint positions,
header stamps.

Depth images (``16UC1`` millimetres, ``32FC1`` metres, as RealSense and ZED drivers publish
them) are read by `decode_depth` as HxW uint16 or float32 frames, exactly (in the byte order
the message says), for `Observation.depth`; `decode_image` refuses them, so a depth topic never
becomes a grey picture. `is_depth` tells which a message is.

Shared by the bag reader (`vla_client.cameras.ros_bag`) and the live ROS 2 node
(`vla_client.ros2`). A message is any object with the fields ``rosbags`` gives it (``rosbags``
deserialises both bags and live CDR samples); nothing here imports ``rosbags``, so these
functions also read hand-made stand-ins. What cannot be read raises `CodecError` naming what is
wrong; the caller adds the file it came from.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import cv2
import numpy as np

from vla_client.errors import CodecError

IMAGE = "sensor_msgs/msg/Image"
COMPRESSED = "sensor_msgs/msg/CompressedImage"
JOINTS = "sensor_msgs/msg/JointState"
ENCODINGS = ("rgb8", "bgr8", "mono8", "rgba8", "bgra8")
"""The raw `sensor_msgs/Image` colour encodings read (8 bits a channel)."""
DEPTH_ENCODINGS = ("16UC1", "32FC1")
"""The raw `sensor_msgs/Image` depth encodings read: uint16 millimetres, float32 metres."""
_CHANNELS = {"rgb8": 3, "bgr8": 3, "mono8": 1, "rgba8": 4, "bgra8": 4}
_DEPTH: dict[str, np.dtype[Any]] = {"16uc1": np.dtype(np.uint16), "32fc1": np.dtype(np.float32)}
_PIXEL_BYTES = {**_CHANNELS, **{name: dtype.itemsize for name, dtype in _DEPTH.items()}}
_TO_RGB = {
    "bgr8": cv2.COLOR_BGR2RGB,
    "mono8": cv2.COLOR_GRAY2RGB,
    "rgba8": cv2.COLOR_RGBA2RGB,
    "bgra8": cv2.COLOR_BGRA2RGB,
}
_SIGNATURES = (b"\xff\xd8\xff", b"\x89PNG\r\n\x1a\n")
"""How a JPEG and a PNG file begin."""


def decode_image(message: Any, msgtype: str, *, topic: str = "") -> np.ndarray:
    """An Image (`ENCODINGS`) or CompressedImage (JPEG, PNG) message as HxWx3 uint8 RGB.

    `topic`, when given, is named in the error (``a /cam image of 2x2 rgb8 holds ...``). A depth
    image (`DEPTH_ENCODINGS`) is a `CodecError`: read it with `decode_depth`.
    """
    check_image(message, msgtype, topic=topic)
    if is_depth(message, msgtype):
        raise CodecError(
            f"{topic or 'the image'} is depth ({message.encoding}); read it with decode_depth"
        )
    if msgtype == COMPRESSED:
        frame = cv2.imdecode(np.asarray(message.data, np.uint8), cv2.IMREAD_COLOR_RGB)
        if frame is None:
            raise CodecError(_undecodable(message, topic))
        return np.ascontiguousarray(frame)
    encoding = message.encoding.lower()
    height, width, channels = int(message.height), int(message.width), _CHANNELS[encoding]
    rows = np.asarray(message.data, np.uint8)[: height * int(message.step)]
    rows = rows.reshape(height, int(message.step))
    pixels = np.ascontiguousarray(rows[:, : width * channels]).reshape(height, width, channels)
    if encoding == "rgb8":
        return pixels
    return np.ascontiguousarray(cv2.cvtColor(pixels, _TO_RGB[encoding]))


def decode_depth(message: Any, msgtype: str, *, topic: str = "") -> np.ndarray:
    """A depth Image message (``16UC1`` or ``32FC1``) as an HxW uint16 (millimetres) or float32
    (metres) frame, exactly as published (invalid pixels too), in native byte order whatever
    the message's ``is_bigendian``. Anything else is a `CodecError` naming what is read."""
    check_image(message, msgtype, topic=topic)
    if not is_depth(message, msgtype):
        found = message.encoding if msgtype == IMAGE else msgtype
        raise CodecError(
            f"{topic or 'the image'} is not depth ({found}); depth images are {IMAGE} in "
            f"{', '.join(DEPTH_ENCODINGS)}"
        )
    dtype = _DEPTH[message.encoding.lower()]
    dtype = dtype.newbyteorder(">" if message.is_bigendian else "<")
    height, width = int(message.height), int(message.width)
    rows = np.asarray(message.data, np.uint8)[: height * int(message.step)]
    rows = rows.reshape(height, int(message.step))[:, : width * dtype.itemsize]
    frame = np.ascontiguousarray(rows).view(dtype).reshape(height, width)
    return np.ascontiguousarray(frame, dtype=dtype.newbyteorder("="))


def is_depth(message: Any, msgtype: str) -> bool:
    """Whether `message` is a depth image (an Image in one of `DEPTH_ENCODINGS`)."""
    return msgtype == IMAGE and str(message.encoding).lower() in _DEPTH


def check_image(message: Any, msgtype: str, *, topic: str = "") -> None:
    """What `decode_image` and `decode_depth` check before they touch a pixel, cheap enough for
    every message of a bag: the type, a raw image's encoding and whether its rows hold its
    pixels, a compressed image's JPEG or PNG signature. Raises `CodecError` as they do."""
    if msgtype == COMPRESSED:  # format: "jpeg", "png", "rgb8; jpeg compressed bgr8"
        if not bytes(message.data[:8]).startswith(_SIGNATURES):
            raise CodecError(_undecodable(message, topic))
        return
    if msgtype != IMAGE:
        raise CodecError(f"{topic or 'a message'} is {msgtype}; images are {IMAGE} or {COMPRESSED}")
    encoding = message.encoding.lower()
    if encoding not in _PIXEL_BYTES:
        raise CodecError(
            f"{topic or 'the image'} has encoding {message.encoding!r}; "
            f"read are {', '.join(ENCODINGS + DEPTH_ENCODINGS)}"
        )
    height, width, pixel = int(message.height), int(message.width), _PIXEL_BYTES[encoding]
    size = len(message.data)
    if int(message.step) < width * pixel or size < height * int(message.step):
        raise CodecError(
            f"{_a(topic, 'image')} of {width}x{height} {encoding} holds {size} "
            f"bytes at a row step of {message.step}"
        )


def joint_positions(message: Any, names: Sequence[str] | None = None) -> np.ndarray:
    """A JointState's positions as float64: all of them in the message's order, or, given
    `names`, those joints in that order. A joint missing from the message, a message whose
    names and positions differ in length (when `names` is given), or a NaN or infinite position
    raises `CodecError` naming it."""
    positions = np.asarray(message.position, dtype=np.float64)
    if names is not None:
        held = list(message.name)
        if len(held) != positions.size:
            raise CodecError(
                f"a JointState names {len(held)} joints but holds {positions.size} positions"
            )
        missing = [name for name in names if name not in held]
        if missing:
            raise CodecError(
                f"a JointState has no joint {', '.join(missing)}; "
                f"it has {', '.join(held) or 'none'}"
            )
        positions = positions[[held.index(name) for name in names]]
    bad = [i for i, value in enumerate(positions) if not np.isfinite(value)]
    if bad:
        which = [names[i] for i in bad] if names is not None else [f"#{i}" for i in bad]
        raise CodecError(f"a JointState position is NaN or infinite: {', '.join(which)}")
    return positions


def stamp_seconds(message: Any) -> float:
    """The message's header stamp in seconds (of ROS time)."""
    stamp = message.header.stamp
    return float(stamp.sec + stamp.nanosec * 1e-9)


def _undecodable(message: Any, topic: str) -> str:
    return (
        f"{_a(topic, 'CompressedImage')} ({message.format!r}) is not a JPEG or PNG that OpenCV "
        "can decode"
    )


def _a(topic: str, noun: str) -> str:
    """``a /cam image`` given a topic, ``an image`` or ``a CompressedImage`` without."""
    if topic:
        return f"a {topic} {noun}"
    return f"{'an' if noun[0] in 'aeiou' else 'a'} {noun}"
