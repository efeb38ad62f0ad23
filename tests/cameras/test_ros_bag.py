"""`BagSource` on its own: the nearest-stamp synchronisation and what it refuses."""

from __future__ import annotations

import numpy as np
import pytest

from ros_bags import STORAGES, depth_frames, frames, write_bag
from vla_client.cameras.ros_bag import BagSource, _nearest
from vla_client.errors import RecordingError

pytest.importorskip("rosbags")


def refused_by(bag, topics, **options):
    """The message of the `RecordingError` that building a `BagSource` raises."""
    with pytest.raises(RecordingError) as refused:
        BagSource(bag, topics, **options)
    return str(refused.value)


def image_bag(path, **fields):
    """A bag whose topic /cam holds one message: a raw Image with `fields` over a 2x2 rgb8
    default, or a CompressedImage when `fields` has ``format``."""
    from rosbags.rosbag2 import Writer
    from rosbags.typesys import Stores, get_typestore

    store = get_typestore(Stores.ROS2_HUMBLE)
    Header, Time = store.types["std_msgs/msg/Header"], store.types["builtin_interfaces/msg/Time"]
    header = Header(stamp=Time(sec=1, nanosec=0), frame_id="cam")
    if "format" in fields:
        kind = store.types["sensor_msgs/msg/CompressedImage"]
        message = kind(header=header, **fields)
    else:
        kind = store.types["sensor_msgs/msg/Image"]
        image = {"height": 2, "width": 2, "encoding": "rgb8", "is_bigendian": 0, "step": 6,
                 "data": np.arange(12, dtype=np.uint8)}  # fmt: skip
        message = kind(header=header, **{**image, **fields})
    with Writer(path, version=9) as writer:
        connection = writer.add_connection("/cam", kind.__msgtype__, typestore=store)
        writer.write(connection, 1, store.serialize_cdr(message, kind.__msgtype__))
    return path


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
    assert refused_by(bag, {"/joints": "wrist"}) == (
        f"bag {bag}: topic /joints is sensor_msgs/msg/JointState; a camera takes "
        "sensor_msgs/msg/Image or sensor_msgs/msg/CompressedImage"
    )
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
    path = image_bag(tmp_path / "grey16", encoding="mono16", step=4, data=np.zeros(8, np.uint8))
    assert refused_by(path, {"/cam": "grey"}) == (
        f"bag {path}: /cam has encoding 'mono16'; read are rgb8, bgr8, mono8, rgba8, bgra8, "
        "16UC1, 32FC1 (message 1 of /cam, stamped 1.000000000 s)"
    )


@pytest.mark.parametrize("storage", STORAGES)
def test_depth_topics_become_depth_frames_bit_for_bit(tmp_path, storage):
    """16UC1 and 32FC1 topics are `Observation.depth` frames of their own dtype, exactly (the
    32FC1 NaN and infinities too), beside a colour topic, each with its header stamp."""
    stamps = [1.0, 2.0]
    colour, millimetres = frames(2, seed=1), depth_frames(2, "uint16", seed=2)
    metres = depth_frames(2, "float32", seed=3)
    bag = write_bag(
        tmp_path / "rgbd", storage,
        {"/color": ("rgb8", colour, stamps), "/depth/mm": ("16UC1", millimetres, stamps),
         "/depth/m": ("32FC1", metres, [s + 0.01 for s in stamps])},
        row_padding=3,
    )  # fmt: skip
    source = BagSource(bag, {"/color": "front", "/depth/mm": "mm", "/depth/m": "m"})
    for k, observation in enumerate(source):
        np.testing.assert_array_equal(observation.images["front"], colour[k])
        assert set(observation.images) == {"front"} and set(observation.depth) == {"mm", "m"}
        for name, want in (("mm", millimetres[k]), ("m", metres[k])):
            got = observation.depth[name]
            assert got.dtype == want.dtype and got.tobytes() == want.tobytes()
        assert observation.capture_times == {"front": k + 1.0, "mm": k + 1.0, "m": k + 1.01}


def test_a_depth_only_bag_reads(tmp_path):
    bag = write_bag(tmp_path / "d", "sqlite3", {"/d": ("16UC1", depth_frames(1, "uint16"), [1.0])})
    (observation,) = BagSource(bag, {"/d": "d"})
    assert observation.images == {} and observation.depth["d"].dtype == np.uint16


@pytest.mark.parametrize(
    ("encodings", "turn"),
    [(["rgb8", "16UC1"], "colour to 16UC1"), (["32FC1", "16UC1"], "32FC1 to 16UC1")],
)
def test_a_topic_that_changes_kind_mid_bag_is_refused_before_a_step(tmp_path, encodings, turn):
    shots = [
        frames(1)[0] if e == "rgb8" else depth_frames(1, "uint16" if e == "16UC1" else "float32")[0]
        for e in encodings
    ]
    bag = write_bag(tmp_path / "mixed", "sqlite3", {"/cam": (encodings, shots, [1.0, 2.0])})
    assert refused_by(bag, {"/cam": "cam"}) == (
        f"bag {bag}: /cam turns from {turn}; a camera topic keeps one kind of image "
        "(message 2 of /cam, stamped 2.000000000 s)"
    )


def test_defaults_a_task_and_the_skew_bound_itself(tmp_path):
    bag = write_bag(
        tmp_path / "b", "sqlite3",
        {"/a": ("rgb8", frames(3), [1.0, 2.0, 3.0]),
         "/b": ("rgb8", frames(3), [1.04, 2.07, 3.0625])},
    )  # fmt: skip
    source = BagSource(bag, {"/a": "a", "/b": "b"})
    assert (source.max_skew_s, source.task) == (0.05, "")
    assert source.stamps == pytest.approx((1.0,)) and source.skipped == 2  # 70 ms, 62.5 ms
    assert next(iter(source)).task == ""
    at_bound = BagSource(bag, {"/a": "a", "/b": "b"}, max_skew_s=0.0625, task="stack")
    assert at_bound.stamps == pytest.approx((1.0, 3.0)) and at_bound.max_skew_s == 0.0625
    assert [step.task for step in at_bound] == ["stack", "stack"]  # 3.0625 - 3.0 is the bound


def test_no_step_within_the_skew_says_which_topic_leads_and_how_to_widen_it(tmp_path):
    bag = write_bag(
        tmp_path / "b", "sqlite3",
        {"/a": ("rgb8", frames(1), [1.0]), "/b": ("rgb8", frames(1), [1.5])},
    )  # fmt: skip
    assert refused_by(bag, {"/b": "b", "/a": "a"}, max_skew_s=0.25) == (
        f"bag {bag}: no step where every topic has a message within 250 ms of /b's; raise "
        "max_skew_s (--max-skew-ms)"
    )


def test_an_infinite_skew_is_refused():
    with pytest.raises(ValueError) as refused:
        BagSource("unread", {"/a": "a"}, max_skew_s=float("inf"))
    assert str(refused.value) == "max_skew_s must be a finite number > 0; got inf"


def test_the_state_is_the_nearest_joint_positions_as_float64(tmp_path):
    bag = write_bag(
        tmp_path / "b", "mcap", {"/a": ("rgb8", frames(2), [1.0, 2.0])},
        ("/joints", [np.array([0.5, 1.5]), np.array([2.5, 3.5])], [1.01, 1.98]),
    )  # fmt: skip
    steps = list(BagSource(bag, {"/joints": "state", "/a": "a"}))
    assert [step.state.tolist() for step in steps] == [[0.5, 1.5], [2.5, 3.5]]
    assert all(step.state.dtype == np.float64 for step in steps)
    assert [sorted(step.images) for step in steps] == [["a"], ["a"]]
    assert steps[1].capture_times == pytest.approx({"a": 2.0})  # the state has no capture time


def test_a_bag_without_type_definitions_is_read_with_humbles_types(tmp_path):
    """rosbag2 on Humble writes no message definitions into its bags; the reader then needs
    the ROS 2 Humble types it is given."""
    import sqlite3

    bag = write_bag(tmp_path / "b", "sqlite3", {"/a": ("bgr8", frames(1), [1.0])})
    with sqlite3.connect(next(bag.glob("*.db3"))) as db:
        db.execute("DELETE FROM message_definitions")
    (step,) = BagSource(bag, {"/a": "a"})
    np.testing.assert_array_equal(step.images["a"], frames(1)[0])


def test_a_missing_topic_lists_the_bags_topics_and_types(tmp_path):
    bag = write_bag(
        tmp_path / "b", "sqlite3",
        {"/b": ("rgb8", frames(1), [1.0]), "/a": ("png", frames(1), [1.0])},
    )  # fmt: skip
    assert refused_by(bag, {"/c": "c"}) == (
        f"bag {bag} has no topic /c; its topics: /a (sensor_msgs/msg/CompressedImage), "
        "/b (sensor_msgs/msg/Image)"
    )


def test_a_bag_without_topics_or_messages_says_so(tmp_path):
    from rosbags.rosbag2 import Writer
    from rosbags.typesys import Stores, get_typestore

    store = get_typestore(Stores.ROS2_HUMBLE)
    with Writer(tmp_path / "empty", version=9):
        pass
    empty = tmp_path / "empty"
    assert refused_by(empty, {"/a": "a"}) == f"bag {empty} has no topic /a; its topics: none"
    with Writer(tmp_path / "silent", version=9) as writer:
        writer.add_connection("/a", "sensor_msgs/msg/Image", typestore=store)
    silent = tmp_path / "silent"
    assert refused_by(silent, {"/a": "a"}) == f"bag {silent}: topic /a holds no messages"


def test_without_rosbags_the_error_says_how_to_install_it(tmp_path, monkeypatch):
    import sys

    monkeypatch.setitem(sys.modules, "rosbags.highlevel", None)  # what an absent package gives
    with pytest.raises(ValueError) as refused:
        BagSource(tmp_path, {"/a": "a"})
    assert str(refused.value) == (
        "reading a ROS bag needs rosbags, which is not installed: pip install 'vla-client[ros]'"
    )


@pytest.mark.parametrize("data", [b"not a jpeg", b"\xff\xd8\xff but no JPEG after it"])
def test_a_compressed_image_opencv_cannot_decode_is_refused_by_topic(tmp_path, data):
    """Bytes that do not begin as a JPEG or PNG does are refused when the bag is read; bytes
    that begin as one but do not decode, when their step is handed out."""
    bag = image_bag(tmp_path / "b", format="jpeg", data=np.frombuffer(data, np.uint8))
    reason = (
        f"bag {bag}: a /cam CompressedImage ('jpeg') is not a JPEG or PNG that OpenCV can decode"
    )
    if not data.startswith(b"\xff\xd8\xff"):
        assert refused_by(bag, {"/cam": "cam"}) == (
            f"{reason} (message 1 of /cam, stamped 1.000000000 s)"
        )
        return
    source = BagSource(bag, {"/cam": "cam"})
    with pytest.raises(RecordingError) as refused:
        next(iter(source))
    assert str(refused.value) == reason


@pytest.mark.parametrize(
    ("fields", "holds"),
    [
        ({"step": 5, "data": np.arange(12, dtype=np.uint8)}, "holds 12 bytes at a row step of 5"),
        ({"data": np.arange(11, dtype=np.uint8)}, "holds 11 bytes at a row step of 6"),
    ],
)
def test_an_image_whose_rows_do_not_hold_its_pixels_is_refused(tmp_path, fields, holds):
    bag = image_bag(tmp_path / "b", **fields)
    assert refused_by(bag, {"/cam": "cam"}) == (
        f"bag {bag}: a /cam image of 2x2 rgb8 {holds} (message 1 of /cam, stamped 1.000000000 s)"
    )


def test_an_image_with_a_padded_row_step_keeps_its_pixels(tmp_path):
    data = np.array([1, 2, 3, 4, 5, 6, 0, 0, 7, 8, 9, 10, 11, 12, 0, 0], np.uint8)
    (step,) = BagSource(image_bag(tmp_path / "b", step=8, data=data), {"/cam": "cam"})
    assert step.images["cam"].tolist() == [[[1, 2, 3], [4, 5, 6]], [[7, 8, 9], [10, 11, 12]]]


@pytest.mark.parametrize("storage", ["mcap", "sqlite3"])
def test_memory_holds_a_few_frame_sets_whatever_the_bags_length(tmp_path, storage):
    """60 steps of two 240x320 cameras and the joints (28 MB): building the source and replaying
    it allocate at most four frame sets beyond what rosbags itself holds to read the bag's
    messages one by one (its MCAP chunks of 1 MiB); the whole bag read at once is 60."""
    import tracemalloc

    from rosbags.highlevel import AnyReader

    images, count = frames(2, height=240, width=320), 60
    stamps = [1.0 + 0.1 * i for i in range(count)]
    bag = write_bag(
        tmp_path / "long", storage,
        {"/a": ("rgb8", images[:1] * count, stamps), "/b": ("rgb8", images[1:] * count, stamps)},
        ("/j", [np.zeros(7)] * count, stamps),
    )  # fmt: skip
    frame_set = 2 * images[0].nbytes
    tracemalloc.start()
    try:
        with AnyReader([bag]) as reader:
            for _ in reader.messages(connections=reader.connections):
                pass
        rosbags_alone = tracemalloc.get_traced_memory()[1]
        tracemalloc.reset_peak()
        source = BagSource(bag, {"/a": "a", "/b": "b", "/j": "state"})
        built = tracemalloc.get_traced_memory()[1]
        tracemalloc.reset_peak()
        replayed = sum(1 for _ in source)
        replaying = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert replayed == count
    assert built < rosbags_alone + 4 * frame_set
    assert replaying < rosbags_alone + 4 * frame_set


def test_steps_wait_for_a_partner_stored_later_and_keep_their_order(tmp_path):
    """A topic whose storage order strays from its stamp order (frames logged late, in reverse)
    is still matched by stamp: each step waits for its partner, and the steps keep the leading
    camera's stamp order."""
    images = frames(4)
    stamps = [1.0, 1.1, 1.2, 1.3]
    bag = write_bag(
        tmp_path / "b", "mcap",
        {"/lead": ("rgb8", images, stamps), "/late": ("bgr8", images, stamps)},
        logged={"/late": [2.3, 2.2, 2.1, 2.0]},
    )  # fmt: skip
    steps = list(BagSource(bag, {"/lead": "lead", "/late": "late"}))
    assert [step.capture_times["late"] for step in steps] == pytest.approx(stamps)
    for image, step in zip(images, steps, strict=True):
        np.testing.assert_array_equal(step.images["late"], image)
        np.testing.assert_array_equal(step.images["lead"], image)


def test_a_topic_recorded_with_a_second_type_is_refused_naming_both(tmp_path):
    """Two connections on one topic (two drivers publishing, a bag merged from two): every
    type it holds must be one the role reads, checked before anything is read."""
    from rosbags.rosbag2 import Writer
    from rosbags.typesys import Stores, get_typestore

    store = get_typestore(Stores.ROS2_HUMBLE)
    other = tmp_path / "other"
    with Writer(other, version=9) as writer:
        writer.add_connection("/cam", "sensor_msgs/msg/Image", typestore=store)
        writer.add_connection("/cam", "sensor_msgs/msg/JointState", typestore=store)
    assert refused_by(other, {"/cam": "cam"}) == (
        f"bag {other}: topic /cam is sensor_msgs/msg/Image and sensor_msgs/msg/JointState; a "
        "camera takes sensor_msgs/msg/Image or sensor_msgs/msg/CompressedImage"
    )
