"""ROS 2 bags written by `rosbags` itself, as a robot would log them: camera topics in each image
encoding, a JointState topic, both storage formats."""

from __future__ import annotations

import sys
import zlib
from collections.abc import Mapping, Sequence
from pathlib import Path

import cv2
import numpy as np

if sys.version_info >= (3, 14):
    from compression import zstd
else:
    from backports import zstd

STORAGES = ("sqlite3", "mcap")
RAW_ENCODINGS = ("rgb8", "bgr8", "mono8", "rgba8", "bgra8")
COMPRESSED_FORMATS = ("jpeg", "png")


def depth_frames(
    count: int, dtype: str, height: int = 24, width: int = 32, seed: int = 0
) -> list[np.ndarray]:
    """`count` random depth frames: uint16 millimetres over the whole range, or float32 metres
    with the ZED's unknowns (NaN, +-infinity) in the first row."""
    rng = np.random.default_rng(seed)
    if dtype == "uint16":
        return [rng.integers(0, 65536, (height, width), dtype=np.uint16) for _ in range(count)]
    made = [rng.uniform(0.3, 20.0, (height, width)).astype(np.float32) for _ in range(count)]
    for frame in made:
        frame[0, :3] = [np.nan, np.inf, -np.inf]
    return made


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
    cameras: Mapping[str, tuple[str | Sequence[str], Sequence[np.ndarray], Sequence[float]]],
    joints: tuple[str, Sequence[np.ndarray], Sequence[float]] | None = None,
    *,
    row_padding: int = 0,
    compression: str = "",
    logged: Mapping[str, Sequence[float]] | None = None,
) -> Path:
    """A bag at `path`: per camera topic, (encoding, RGB frames, header stamps in seconds); the
    encoding is a raw one or ``jpeg``/``png`` for a CompressedImage, or one such per frame; a
    depth topic (``16UC1``, ``32FC1``) takes HxW uint16 or float32 frames, stored little-endian.
    `joints` is (topic, positions, stamps). Raw images get `row_padding` extra bytes a row, as
    some drivers do. ``compression="zstd"`` compresses an MCAP bag's chunks. Messages are stored
    in the order of their log times: their header stamps, or for a topic in `logged`, the times
    given there."""
    from rosbags.rosbag2 import CompressionFormat, CompressionMode, StoragePlugin, Writer
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
    writer = Writer(path, version=9, storage_plugin=plugin)
    if compression:
        writer.set_compression(CompressionMode.STORAGE, CompressionFormat[compression.upper()])
    with writer:
        for topic, (encodings, images, stamps) in cameras.items():
            if isinstance(encodings, str):
                encodings = [encodings] * len(images)
            kind = Compressed if encodings[0] in COMPRESSED_FORMATS else Image
            connection = writer.add_connection(topic, kind.__msgtype__, typestore=store)
            log_times = (logged or {}).get(topic, stamps)
            for frame, encoding, stamp, log_time in zip(
                images, encodings, stamps, log_times, strict=True
            ):
                if kind is Compressed:
                    message = Compressed(
                        header=header(stamp, topic),
                        format=encoding,
                        data=_compressed(frame, encoding),
                    )
                else:
                    message = _raw(Image, header(stamp, topic), frame, encoding, row_padding)
                entries.append((round(log_time * 1e9), connection, message, kind.__msgtype__))
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
    rows = np.ascontiguousarray(pixels).view(np.uint8).reshape(height, -1)  # depth: its bytes
    rows = np.concatenate([rows, np.full((height, padding), 7, np.uint8)], axis=1)
    return Image(
        header=header, height=height, width=width, encoding=encoding, is_bigendian=0,
        step=rows.shape[1], data=rows.reshape(-1),
    )  # fmt: skip


def _compressed(frame: np.ndarray, encoding: str) -> np.ndarray:
    ok, data = cv2.imencode(f".{'jpg' if encoding == 'jpeg' else 'png'}", frame[:, :, ::-1])
    assert ok
    return data.reshape(-1)


def mcap_chunks(bag: Path) -> list[tuple[int, int, int]]:
    """Each chunk record of the bag's MCAP file: (offset of its CRC field, offset and size of its
    records), walking the data section record by record."""
    data = next(bag.glob("*.mcap")).read_bytes()
    chunks, at = [], 8  # after the magic
    while at < len(data) and data[at] != 0x0F:  # up to DataEnd: the summary follows
        length = int.from_bytes(data[at + 1 : at + 9], "little")
        if data[at] == 0x06:  # start, end, uncompressed size, CRC, compression, records
            name = int.from_bytes(data[at + 37 : at + 41], "little")
            size_at = at + 41 + name
            size = int.from_bytes(data[size_at : size_at + 8], "little")
            chunks.append((at + 33, size_at + 8, size))
        at += 9 + length
    return chunks


def add_chunk_crcs(bag: Path) -> Path:
    """Write each uncompressed chunk's CRC-32 into its record, as rosbag2's own writer does
    (``rosbags``' writer leaves it 0, "no checksum")."""
    mcap = next(bag.glob("*.mcap"))
    data = bytearray(mcap.read_bytes())
    for crc_at, records_at, size in mcap_chunks(bag):
        records = bytes(data[records_at : records_at + size])
        if data[crc_at + 4 : crc_at + 8] != bytes(4):  # a compression name: rosbags' is zstd
            records = zstd.decompress(records)
        crc = zlib.crc32(records)
        data[crc_at : crc_at + 4] = crc.to_bytes(4, "little")
    mcap.write_bytes(bytes(data))
    return bag


def damage_chunk(
    bag: Path, index: int, count: int = 64, seed: int = 0, *, at_start: bool = False
) -> None:
    """`count` random bytes written over the middle of chunk `index`'s records (over their
    first bytes, `at_start`: a compressed chunk's frame header)."""
    mcap = next(bag.glob("*.mcap"))
    data = bytearray(mcap.read_bytes())
    _, records_at, size = mcap_chunks(bag)[index]
    at = records_at + (0 if at_start else size // 2)
    data[at : at + count] = np.random.default_rng(seed).bytes(count)
    mcap.write_bytes(bytes(data))
