"""The bridge's input synchronisation (`vla_client.ros2.inputs`) on its own: real rosbags
messages held by a stand-in for a subscription, so each rule is checked without a bus."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pytest
from robot_topics import COMPRESSED, IMAGE, JAZZY, compressed, header, image, joint_state

from vla_client.ros2.inputs import InputSync, image_type

FRAME = np.arange(4 * 6 * 3, dtype=np.uint8).reshape(4, 6, 3)


@dataclass(frozen=True)
class Sample:
    message: Any
    received_at: float = 0.0


@dataclass
class Topic:
    """What `InputSync` reads of a subscription: its newest samples and its refusals."""

    topic: str
    msgtype: str
    samples: list[Sample] = field(default_factory=list)
    refused: int = 0
    last_refusal: str | None = None

    def recent(self) -> tuple[Sample, ...]:
        return tuple(self.samples[-10:])

    def add(self, message: Any) -> None:
        self.samples.append(Sample(message))


def inputs(**options: Any) -> tuple[InputSync, Topic, Topic, Topic]:
    wrist, top = Topic("/wrist", IMAGE), Topic("/top/compressed", COMPRESSED)
    state = Topic("/joint_states", "sensor_msgs/msg/JointState")
    sync = InputSync(
        {"/wrist": wrist, "/top/compressed": top},  # type: ignore[dict-item]
        {"/wrist": "wrist", "/top/compressed": "top"},
        state,  # type: ignore[arg-type]
        **options,
    )
    return sync, wrist, top, state


JOINTS = joint_state(["b", "a"], [2.0, 1.0])


def test_image_type_follows_image_transports_names() -> None:
    assert image_type("/cam/image_raw/compressed") == COMPRESSED
    assert image_type("/cam/image_raw") == image_type("/compressed_cam") == IMAGE


def test_a_set_is_the_nearest_messages_within_the_skew() -> None:
    sync, wrist, top, state = inputs(max_skew_s=0.05, joints=["a", "b"], task="wipe")
    assert sync.read() is None
    for stamp in (10.0, 10.1):
        wrist.add(image(FRAME)(stamp))
    top.add(compressed(FRAME)(10.09))
    state.add(JOINTS(10.12))
    state.add(JOINTS(10.3))
    reading = sync.read()
    assert reading is not None
    assert reading.observation.capture_times == pytest.approx({"wrist": 10.1, "top": 10.09})
    assert reading.oldest_stamp == pytest.approx(10.09)
    assert reading.joint_names == ("a", "b")
    np.testing.assert_array_equal(reading.observation.state, [1.0, 2.0])
    np.testing.assert_array_equal(reading.observation.images["top"], FRAME)
    assert reading.observation.task == "wipe"


def test_an_older_reference_frame_is_tried_when_the_newest_has_no_partner() -> None:
    sync, wrist, top, state = inputs(max_skew_s=0.05)
    wrist.add(image(FRAME)(10.0))
    wrist.add(image(FRAME)(11.0))  # the others have nothing near 11.0
    top.add(compressed(FRAME)(10.02))
    state.add(JOINTS(9.99))
    reading = sync.read()
    assert reading is not None and reading.observation.capture_times["wrist"] == pytest.approx(10.0)
    assert reading.joint_names == ("b", "a")  # the message's own order without joints


def test_no_set_when_a_topic_is_further_than_the_skew() -> None:
    sync, wrist, top, state = inputs(max_skew_s=0.05)
    wrist.add(image(FRAME)(10.0))
    top.add(compressed(FRAME)(10.06))
    state.add(JOINTS(10.0))
    assert sync.read() is None


def test_a_newer_set_replaces_the_last_and_an_older_one_does_not() -> None:
    sync, wrist, top, state = inputs()
    for topic, build in ((wrist, image(FRAME)), (top, compressed(FRAME)), (state, JOINTS)):
        topic.add(build(10.0))
    first = sync.read()
    assert sync.read() is first  # nothing new: the same reading
    for topic, build in ((wrist, image(FRAME)), (top, compressed(FRAME)), (state, JOINTS)):
        topic.add(build(10.5))
    second = sync.read()
    assert second is not None and second.oldest_stamp == pytest.approx(10.5)


@pytest.mark.parametrize(
    ("which", "message", "says"),
    [
        ("wrist", image(FRAME, "rgb8", cut=1)(10.0), "a /wrist image of 6x4 rgb8 holds 71 bytes"),
        ("top", compressed(FRAME)(10.0), None),
        ("state", joint_state(["a", "b"], [1.0, float("nan")])(10.0), "NaN or infinite: b"),
        ("state", joint_state(["a"], [1.0])(10.0), "no joint b"),
    ],
)
def test_an_unreadable_message_is_refused_naming_its_topic(
    which: str, message: Any, says: str | None
) -> None:
    sync, wrist, top, state = inputs(joints=["a", "b"])
    if which == "top":
        message.data = message.data[:10]  # a PNG cut short
        says = "a /top/compressed CompressedImage ('png') is not a JPEG or PNG"
    {"wrist": wrist, "top": top, "state": state}[which].add(message)
    for topic, build in ((wrist, image(FRAME)), (top, compressed(FRAME)), (state, JOINTS)):
        if topic is not {"wrist": wrist, "top": top, "state": state}[which]:
            topic.add(build(10.0))
    assert sync.read() is None
    [refusal] = sync.refusals()
    assert says in refusal
    assert refusal.startswith("a /") or refusal.startswith("/joint_states: ")
    assert sync.refused == 1
    assert sync.refusals() == []  # each said once
    sync.read()
    assert sync.refused == 1  # not read again


def test_the_subscriptions_own_refusals_are_handed_on() -> None:
    sync, wrist, _, _ = inputs()
    wrist.refused, wrist.last_refusal = 2, "/wrist: a publisher sends another type; refused"
    sync.read()
    assert sync.refusals() == ["/wrist: a publisher sends another type; refused"]
    assert sync.refused == 2


def test_a_depth_topic_is_read_as_depth_exactly() -> None:
    """A 16UC1 camera (a RealSense's) becomes `Observation.depth`, every bit, not an image."""
    millimetres = np.arange(4 * 6, dtype=np.uint16).reshape(4, 6) * 2731
    raw = millimetres.astype("<u2").view(np.uint8).reshape(4, 12)
    sync, wrist, top, state = inputs()

    wrist.add(
        JAZZY.types[IMAGE](
            header=header(10.0), height=4, width=6, encoding="16UC1", is_bigendian=0, step=12,
            data=raw.reshape(-1),
        )
    )  # fmt: skip
    top.add(compressed(FRAME)(10.0))
    state.add(JOINTS(10.0))
    reading = sync.read()
    assert reading is not None
    assert set(reading.observation.images) == {"top"} and set(reading.observation.depth) == {
        "wrist"
    }
    frame = reading.observation.depth["wrist"]
    assert frame.dtype == np.uint16 and frame.tobytes() == millimetres.tobytes()
    assert reading.observation.capture_times == pytest.approx({"wrist": 10.0, "top": 10.0})
