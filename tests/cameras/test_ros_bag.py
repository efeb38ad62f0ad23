"""`BagSource` on its own: the nearest-stamp synchronisation and what it refuses."""

from __future__ import annotations

import numpy as np
import pytest

from ros_bags import frames, write_bag
from vla_client.cameras.ros_bag import BagSource, _nearest
from vla_client.errors import RecordingError

pytest.importorskip("rosbags")


def test_nearest_picks_the_closest_stamp_and_the_earlier_on_a_tie():
    stamps = [1.0, 2.0, 4.0]
    assert [_nearest(stamps, t) for t in (0.0, 1.4, 1.5, 1.6, 3.0, 3.1, 9.0)] == [
        0, 0, 0, 1, 1, 2, 2,
    ]  # fmt: skip


def test_steps_follow_the_leading_camera_in_stamp_order(tmp_path):
    images = frames(3)
    bag = write_bag(
        tmp_path / "b", "sqlite3",
        {"/lead": ("rgb8", images, [10.2, 10.0, 10.1]),
         "/other": ("rgb8", images[:2], [10.0, 10.1])},
    )  # fmt: skip
    source = BagSource(bag, {"/lead": "lead", "/other": "other"}, max_skew_s=0.15)
    assert source.stamps == pytest.approx((10.0, 10.1, 10.2))
    steps = list(source)
    np.testing.assert_array_equal(steps[0].images["lead"], images[1])
    np.testing.assert_array_equal(steps[2].images["lead"], images[0])
    np.testing.assert_array_equal(steps[2].images["other"], images[1])  # 10.1, 100 ms away
    assert steps[2].capture_times == pytest.approx({"lead": 10.2, "other": 10.1})
    assert source.skipped == 0 and steps[0].state is None


def test_a_fixed_state_goes_with_every_step_and_not_beside_a_state_topic(tmp_path):
    bag = write_bag(
        tmp_path / "b", "mcap", {"/a": ("rgb8", frames(2), [1.0, 2.0])},
        ("/joints", [np.zeros(3), np.ones(3)], [1.0, 2.0]),
    )  # fmt: skip
    steps = list(BagSource(bag, {"/a": "a"}, state=np.array([0.5, 0.25])))
    assert [list(s.state) for s in steps] == [[0.5, 0.25], [0.5, 0.25]]
    with pytest.raises(ValueError, match="the state comes from /joints"):
        BagSource(bag, {"/a": "a", "/joints": "state"}, state=np.zeros(2))


def test_a_topic_of_the_wrong_type_is_refused_naming_what_it_takes(tmp_path):
    bag = write_bag(
        tmp_path / "b", "sqlite3",
        {"/a": ("rgb8", frames(1), [1.0]), "/b": ("png", frames(1), [1.0])},
        ("/joints", [np.zeros(3)], [1.0]),
    )  # fmt: skip
    with pytest.raises(RecordingError, match="/joints is sensor_msgs/msg/JointState; a camera"):
        BagSource(bag, {"/joints": "wrist"})
    with pytest.raises(RecordingError, match="/a is sensor_msgs/msg/Image; the state takes"):
        BagSource(bag, {"/b": "wrist", "/a": "state"})


@pytest.mark.parametrize(
    ("options", "reason"),
    [
        ({"max_skew_s": 0.0}, "max_skew_s"),
        ({"max_skew_s": float("nan")}, "max_skew_s"),
    ],
)
def test_options_are_checked(tmp_path, options, reason):
    with pytest.raises(ValueError, match=reason):
        BagSource(tmp_path, {"/a": "a"}, **options)


def test_topic_maps_without_a_camera_or_with_a_name_twice_are_refused(tmp_path):
    with pytest.raises(ValueError, match="at least one camera topic"):
        BagSource(tmp_path, {"/j": "state"})
    with pytest.raises(ValueError, match="its own name"):
        BagSource(tmp_path, {"/a": "x", "/b": "x"})
    with pytest.raises(ValueError, match="one topic can be the state"):
        BagSource(tmp_path, {"/a": "x", "/j": "state", "/k": "state"})


def test_an_unread_encoding_is_refused_naming_the_ones_read(tmp_path):
    from rosbags.rosbag2 import Writer
    from rosbags.typesys import Stores, get_typestore

    store = get_typestore(Stores.ROS2_HUMBLE)
    Image = store.types["sensor_msgs/msg/Image"]
    Header, Time = store.types["std_msgs/msg/Header"], store.types["builtin_interfaces/msg/Time"]
    path = tmp_path / "depth"
    with Writer(path, version=9) as writer:
        connection = writer.add_connection("/depth", Image.__msgtype__, typestore=store)
        message = Image(
            header=Header(stamp=Time(sec=1, nanosec=0), frame_id="d"), height=2, width=2,
            encoding="16UC1", is_bigendian=0, step=4, data=np.zeros(8, np.uint8),
        )  # fmt: skip
        writer.write(connection, 1, store.serialize_cdr(message, Image.__msgtype__))
    source = BagSource(path, {"/depth": "depth"})
    with pytest.raises(RecordingError, match="encoding '16UC1'; read are rgb8, bgr8, mono8"):
        next(iter(source))
