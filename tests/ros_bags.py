"""ROS 2 bags written by `rosbags` itself, as a robot would log them: camera topics in each image
encoding, a JointState topic, both storage formats."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

import cv2
import numpy as np

STORAGES = ("sqlite3", "mcap")
RAW_ENCODINGS = ("rgb8", "bgr8", "mono8", "rgba8", "bgra8")
COMPRESSED_FORMATS = ("jpeg", "png")


def frames(count: int, height: int = 24, width: int = 32, seed: int = 0) -> list[np.ndarray]:
    """`count` random RGB frames: any bit lost on the way shows in a digest."""
    rng = np.random.default_rng(seed)
    return [rng.integers(0, 256, (height, width, 3), dtype=np.uint8) for _ in range(count)]


def as_rgb(frame: np.ndarray, encoding: str) -> np.ndarray:
    """What `frame` reads back as once stored in `encoding`: mono8 keeps one channel (the red)
    repeated, JPEG its own decode; the raw colour encodings keep it exactly."""
    if encoding == "mono8":
        return np.repeat(frame[:, :, :1], 3, axis=2)
    if encoding == "jpeg":
        return cv2.imdecode(_compressed(frame, "jpeg"), cv2.IMREAD_COLOR_RGB)
    return frame


def write_bag(
    path: Path,
    storage: str,
    cameras: Mapping[str, tuple[str, Sequence[np.ndarray], Sequence[float]]],
    joints: tuple[str, Sequence[np.ndarray], Sequence[float]] | None = None,
    *,
    row_padding: int = 0,
) -> Path:
    """A bag at `path`: per camera topic, (encoding, RGB frames, header stamps in seconds); the
    encoding is a raw one or ``jpeg``/``png`` for a CompressedImage. `joints` is (topic,
    positions, stamps). Raw images get `row_padding` extra bytes a row, as some drivers do."""
    from rosbags.rosbag2 import StoragePlugin, Writer
    from rosbags.typesys import Stores, get_typestore

    store = get_typestore(Stores.ROS2_HUMBLE)
    Image, Compressed = (
        store.types["sensor_msgs/msg/Image"],
        store.types["sensor_msgs/msg/CompressedImage"],
    )
    JointState = store.types["sensor_msgs/msg/JointState"]
    Header, Time = store.types["std_msgs/msg/Header"], store.types["builtin_interfaces/msg/Time"]

    def header(stamp: float, frame_id: str) -> object:
        sec = int(stamp)
        return Header(stamp=Time(sec=sec, nanosec=round((stamp - sec) * 1e9)), frame_id=frame_id)

    plugin = StoragePlugin.MCAP if storage == "mcap" else StoragePlugin.SQLITE3
    entries: list[tuple[int, object, object, str]] = []
    with Writer(path, version=9, storage_plugin=plugin) as writer:
        for topic, (encoding, images, stamps) in cameras.items():
            kind = Compressed if encoding in COMPRESSED_FORMATS else Image
            connection = writer.add_connection(topic, kind.__msgtype__, typestore=store)
            for frame, stamp in zip(images, stamps, strict=True):
                if kind is Compressed:
                    message = Compressed(
                        header=header(stamp, topic),
                        format=encoding,
                        data=_compressed(frame, encoding),
                    )
                else:
                    message = _raw(Image, header(stamp, topic), frame, encoding, row_padding)
                entries.append((round(stamp * 1e9), connection, message, kind.__msgtype__))
        if joints is not None:
            topic, positions, stamps = joints
            connection = writer.add_connection(topic, JointState.__msgtype__, typestore=store)
            for position, stamp in zip(positions, stamps, strict=True):
                names = [f"joint_{i}" for i in range(len(position))]
                message = JointState(
                    header=header(stamp, "base"), name=names,
                    position=np.asarray(position, np.float64),
                    velocity=np.zeros(0, np.float64), effort=np.zeros(0, np.float64),
                )  # fmt: skip
                entries.append((round(stamp * 1e9), connection, message, JointState.__msgtype__))
        for timestamp, connection, message, msgtype in sorted(entries, key=lambda e: e[0]):
            writer.write(connection, timestamp, store.serialize_cdr(message, msgtype))
    return path


def _raw(Image: type, header: object, frame: np.ndarray, encoding: str, padding: int) -> object:
    if encoding == "mono8":
        pixels = frame[:, :, :1]
    elif encoding == "bgr8":
        pixels = frame[:, :, ::-1]
    elif encoding in ("rgba8", "bgra8"):
        colour = frame if encoding == "rgba8" else frame[:, :, ::-1]
        alpha = np.full((*frame.shape[:2], 1), 200, np.uint8)
        pixels = np.concatenate([colour, alpha], axis=2)
    else:
        pixels = frame
    height, width = frame.shape[:2]
    rows = np.ascontiguousarray(pixels).reshape(height, -1)
    rows = np.concatenate([rows, np.full((height, padding), 7, np.uint8)], axis=1)
    return Image(
        header=header, height=height, width=width, encoding=encoding, is_bigendian=0,
        step=rows.shape[1], data=rows.reshape(-1),
    )  # fmt: skip


def _compressed(frame: np.ndarray, encoding: str) -> np.ndarray:
    ok, data = cv2.imencode(f".{'jpg' if encoding == 'jpeg' else 'png'}", frame[:, :, ::-1])
    assert ok
    return data.reshape(-1)
