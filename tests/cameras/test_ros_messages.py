"""`ros_messages` on its own: sensor_msgs stand-ins with rosbags' field names, no bag needed."""

from __future__ import annotations

import re
from types import SimpleNamespace

import cv2
import numpy as np
import pytest

from vla_client.cameras.ros_messages import (
    COMPRESSED,
    IMAGE,
    JOINTS,
    decode_depth,
    decode_image,
    is_depth,
    joint_positions,
    stamp_seconds,
)
from vla_client.errors import CodecError


def image(encoding="rgb8", width=2, height=1, step=None, data=None):
    channels = {"mono8": 1, "rgba8": 4, "bgra8": 4}.get(encoding, 3)
    step = width * channels if step is None else step
    data = np.arange(height * step, dtype=np.uint8) if data is None else data
    return SimpleNamespace(height=height, width=width, encoding=encoding, step=step, data=data)


def joints(names, positions):
    return SimpleNamespace(name=list(names), position=np.asarray(positions, np.float64))


def test_msgtypes_are_rosbags_names():
    assert (IMAGE, COMPRESSED, JOINTS) == (
        "sensor_msgs/msg/Image", "sensor_msgs/msg/CompressedImage", "sensor_msgs/msg/JointState"
    )  # fmt: skip


def test_raw_encodings_become_rgb():
    assert decode_image(image("rgb8"), IMAGE).tolist() == [[[0, 1, 2], [3, 4, 5]]]
    assert decode_image(image("BGR8"), IMAGE).tolist() == [[[2, 1, 0], [5, 4, 3]]]
    assert decode_image(image("mono8"), IMAGE).tolist() == [[[0, 0, 0], [1, 1, 1]]]
    assert decode_image(image("bgra8"), IMAGE).tolist() == [[[2, 1, 0], [6, 5, 4]]]


def test_a_compressed_image_is_decoded_and_garbage_is_refused():
    frame = np.random.default_rng(0).integers(0, 256, (4, 5, 3), dtype=np.uint8)
    png = cv2.imencode(".png", frame[:, :, ::-1])[1].reshape(-1)
    decoded = decode_image(SimpleNamespace(format="png", data=png), COMPRESSED)
    np.testing.assert_array_equal(decoded, frame)
    garbage = SimpleNamespace(format="jpeg", data=np.frombuffer(b"not a jpeg", np.uint8))
    with pytest.raises(CodecError) as refused:
        decode_image(garbage, COMPRESSED)
    assert str(refused.value) == (
        "a CompressedImage ('jpeg') is not a JPEG or PNG that OpenCV can decode"
    )


@pytest.mark.parametrize(
    ("message", "msgtype", "topic", "reason"),
    [
        (image("mono16"), IMAGE, "", "the image has encoding 'mono16'; read are rgb8, bgr8, mono8"),
        (image("16UC1", step=4), IMAGE, "/d", "/d is depth (16UC1); read it with decode_depth"),
        (image("bayer_rggb8"), IMAGE, "/cam", "/cam has encoding 'bayer_rggb8'; read are"),
        (image(step=5), IMAGE, "", "an image of 2x1 rgb8 holds 5 bytes at a row step of 5"),
        (image(data=np.zeros(5, np.uint8)), IMAGE, "/c", "a /c image of 2x1 rgb8 holds 5 bytes"),
        (joints([], []), JOINTS, "/j", "/j is sensor_msgs/msg/JointState; images are"),
    ],
)
def test_what_cannot_be_read_is_a_codec_error_naming_why(message, msgtype, topic, reason):
    with pytest.raises(CodecError, match="^" + re.escape(reason)):
        decode_image(message, msgtype, topic=topic)


def depth_message(frame, encoding, *, big_endian=False, pad=0):
    """A depth Image of `frame` as a driver publishes it: rows of `pad` extra bytes."""
    dtype = frame.dtype.newbyteorder(">" if big_endian else "<")
    rows = np.ascontiguousarray(frame, dtype=dtype).view(np.uint8).reshape(frame.shape[0], -1)
    rows = np.pad(rows, ((0, 0), (0, pad)))
    return SimpleNamespace(
        height=frame.shape[0], width=frame.shape[1], encoding=encoding,
        step=rows.shape[1], is_bigendian=int(big_endian), data=rows.reshape(-1),
    )  # fmt: skip


@pytest.mark.parametrize("big_endian", [False, True])
@pytest.mark.parametrize("pad", [0, 6])
def test_depth_images_are_read_exactly_in_their_own_dtype(big_endian, pad):
    """16UC1 millimetres and 32FC1 metres (NaN and infinity, the ZED's unknowns, included) come
    out bit for bit, native byte order, whatever the message's byte order and row padding."""
    rng = np.random.default_rng(43)
    millimetres = rng.integers(0, 65536, (3, 5), dtype=np.uint16)
    metres = rng.uniform(0.2, 20, (3, 5)).astype(np.float32)
    metres[0, :3] = [np.nan, np.inf, -np.inf]
    for frame, encoding in ((millimetres, "16UC1"), (metres, "32FC1")):
        message = depth_message(frame, encoding, big_endian=big_endian, pad=pad)
        assert is_depth(message, IMAGE)
        depth = decode_depth(message, IMAGE, topic="/depth")
        assert depth.dtype == frame.dtype and depth.dtype.isnative
        assert depth.flags.c_contiguous and depth.tobytes() == frame.tobytes()


def test_a_colour_image_is_not_depth_and_a_short_depth_image_is_refused():
    assert not is_depth(image("rgb8"), IMAGE)
    with pytest.raises(CodecError, match=r"^/cam is not depth \(rgb8\); depth images are "):
        decode_depth(image("rgb8"), IMAGE, topic="/cam")
    short = depth_message(np.zeros((2, 3), np.float32), "32FC1")
    short.data = short.data[:-1]
    with pytest.raises(CodecError, match=r"^a /d image of 3x2 32fc1 holds 23 bytes"):
        decode_depth(short, IMAGE, topic="/d")


def test_joint_positions_all_or_picked_by_name():
    message = joints(["a", "b", "c"], [1, 2, 3])
    positions = joint_positions(message)
    assert positions.dtype == np.float64 and positions.tolist() == [1, 2, 3]
    assert joint_positions(message, ["c", "a"]).tolist() == [3, 1]


@pytest.mark.parametrize(
    ("message", "names", "reason"),
    [
        (joints(["a"], [1.0]), ["a", "z"], "a JointState has no joint z; it has a"),
        (joints([], [1.0]), ["a"], "a JointState names 0 joints but holds 1 positions"),
        (
            joints(["a", "b"], [1.0, np.nan]),
            ["b", "a"],
            "a JointState position is NaN or infinite: b",
        ),
        (joints([], [np.inf, 1.0]), None, "a JointState position is NaN or infinite: #0"),
    ],
)
def test_joint_positions_refuse_what_they_cannot_give(message, names, reason):
    with pytest.raises(CodecError) as refused:
        joint_positions(message, names)
    assert str(refused.value) == reason


def test_the_stamp_is_seconds_and_nanoseconds():
    message = SimpleNamespace(header=SimpleNamespace(stamp=SimpleNamespace(sec=7, nanosec=5e8)))
    assert stamp_seconds(message) == 7.5
