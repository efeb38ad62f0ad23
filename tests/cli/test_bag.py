"""``send`` and ``record`` with ``--bag``: ROS 2 bags written by `rosbags` itself, in both
storage formats and every image encoding, replayed through a real reference server."""

from __future__ import annotations

import json

import numpy as np
import pytest

from digest_policy import DigestPolicy, sha256_rows
from oracles import oracle_actions
from ros_bags import (
    COMPRESSED_FORMATS,
    RAW_ENCODINGS,
    STORAGES,
    as_rgb,
    depth_frames,
    frames,
    write_bag,
)
from timing import paced
from vla_client.recording import load_action_chunks, load_observations
from vla_client.server import LocalServer, ServerConfig, create_app
from vla_client.server.policy import PolicyInput

pytest.importorskip("rosbags")

T0 = 1_700_000_000.0
"""A ROS time in 2023: header stamps are wall-clock seconds."""


def joint_positions(count: int) -> list[np.ndarray]:
    return [np.linspace(-1, 1, 7) + 0.01 * i for i in range(count)]


@pytest.mark.parametrize("storage", STORAGES)
@pytest.mark.parametrize("encoding", RAW_ENCODINGS + COMPRESSED_FORMATS)
def test_every_encoding_reaches_the_server_bit_exact(cli, server_url, tmp_path, storage, encoding):
    images = frames(3, seed=len(encoding))
    stamps = [T0 + 0.1 * i for i in range(3)]
    # the joints run at 3x the camera rate, offset: each frame takes the nearest reading
    joint_stamps = [T0 - 0.02 + 0.1 / 3 * i for i in range(9)]
    bag = write_bag(
        tmp_path / "episode", storage, {"/camera/image_raw": (encoding, images, stamps)},
        ("/joint_states", joint_positions(9), joint_stamps), row_padding=5,
    )  # fmt: skip
    actions = tmp_path / "actions.npz"
    run = cli(
        "send", server_url, "--bag", str(bag), "--topic", "/camera/image_raw=wrist",
        "--topic", "/joint_states=state", "--task", "fold", "--verify",
        "--save-actions", str(actions), "--json",
    )  # fmt: skip
    assert run.code == 0, run.err
    report = json.loads(run.out)
    assert report["requests"] == 3 and report["lossless"] is True
    chunks = load_action_chunks(actions)
    nearest = [1, 4, 7]  # of T0 - 0.02 + i / 30, the nearest to T0 + 0.1 k (13 ms away)
    for k, chunk in enumerate(chunks):
        seen = PolicyInput(
            {"wrist": as_rgb(images[k], encoding)},
            state=joint_positions(9)[nearest[k]].astype(np.float32),
            task="fold",
        )
        np.testing.assert_allclose(
            chunk, oracle_actions(seen, horizon=10, action_dim=7), rtol=1e-5, atol=1e-6
        )


def rgbd_bag(path, storage, count):
    """A RealSense- and ZED-like bag: a colour topic, a 16UC1 and a 32FC1 depth topic."""
    stamps = [T0 + 0.1 * i for i in range(count)]
    colour, millimetres = frames(count, seed=5), depth_frames(count, "uint16", seed=6)
    metres = depth_frames(count, "float32", seed=7)
    bag = write_bag(
        path, storage,
        {"/color/image_raw": ("bgr8", colour, stamps),
         "/depth/image_rect_raw": ("16UC1", millimetres, stamps),
         "/zed/depth/depth_registered": ("32FC1", metres, [s + 0.003 for s in stamps])},
        row_padding=2,
    )  # fmt: skip
    return bag, colour, millimetres, metres


RGBD_TOPICS = (
    "--topic", "/color/image_raw=front", "--topic", "/depth/image_rect_raw=mm",
    "--topic", "/zed/depth/depth_registered=m",
)  # fmt: skip


@pytest.mark.parametrize("storage", STORAGES)
def test_depth_topics_replay_through_a_real_server_bit_for_bit(cli, tmp_path, storage):
    """A bag with 16UC1 and 32FC1 topics, sent with ``--verify``: the policy (in the server's
    worker process) is handed each depth frame in its own dtype, every bit of it."""
    bag, colour, millimetres, metres = rgbd_bag(tmp_path / "rgbd", storage, 3)
    policy = DigestPolicy(cameras=3, depth_cameras={"mm": "uint16", "m": "float32"})
    actions = tmp_path / "actions.npz"
    with LocalServer(create_app(policy, ServerConfig())) as server:
        run = cli(
            "send", server.url, "--bag", str(bag), *RGBD_TOPICS, "--encoding", "raw",
            "--wire", "msgpack", "--verify", "--save-actions", str(actions), "--json",
        )  # fmt: skip
    assert run.code == 0, run.err
    report = json.loads(run.out)
    assert report["requests"] == 3 and report["lossless"] is True
    assert set(report["bytes_per_camera"]) == {"front", "mm", "m"}
    for k, chunk in enumerate(load_action_chunks(actions)):
        sent = {"front": colour[k], "mm": millimetres[k], "m": metres[k]}
        np.testing.assert_array_equal(chunk, sha256_rows(sent, None))


def test_a_depth_bag_sent_as_png_is_refused_naming_raw(cli, tmp_path):
    bag = rgbd_bag(tmp_path / "rgbd", "sqlite3", 1)[0]
    policy = DigestPolicy(cameras=3, depth_cameras={"mm": "uint16", "m": "float32"})
    with LocalServer(create_app(policy, ServerConfig(in_process=True))) as server:
        run = cli("send", server.url, "--bag", str(bag), *RGBD_TOPICS, "--encoding", "png")
    assert run.code == 1
    assert run.err.strip().splitlines()[-1] == (
        "vla-client: error: a float32 depth frame cannot travel as 'png'; send it with "
        'encoding="raw"'
    )


@pytest.mark.parametrize("raw", [False, True])
def test_record_from_a_bag_keeps_depth_frames(cli, tmp_path, raw):
    bag, colour, millimetres, metres = rgbd_bag(tmp_path / "rgbd", "mcap", 2)
    out = tmp_path / "rgbd.vlaobs"
    run = cli(
        "record", str(out), "--bag", str(bag), *RGBD_TOPICS, "--frames", "2", "--rate", "0",
        *(["--raw"] if raw else []),
    )  # fmt: skip
    assert run.code == 0, run.err
    for k, step in enumerate(load_observations(out)):
        observation = step.observation
        np.testing.assert_array_equal(observation.images["front"], colour[k])
        for name, want in (("mm", millimetres[k]), ("m", metres[k])):
            got = observation.depth[name]
            assert got.dtype == want.dtype and got.tobytes() == want.tobytes()
        assert observation.capture_times["m"] == pytest.approx(T0 + 0.1 * k + 0.003, abs=1e-6)


def test_record_from_a_bag_keeps_the_frames_state_and_header_stamps(cli, tmp_path):
    images, wrist = frames(4, seed=1), frames(4, seed=2)
    stamps = [T0 + 0.1 * i for i in range(4)]
    bag = write_bag(
        tmp_path / "episode.mcap-bag", "mcap",
        {"/top/image": ("bgr8", images, stamps),
         "/wrist/image": ("png", wrist, [s + 0.004 for s in stamps])},
        ("/joint_states", joint_positions(4), stamps),
    )  # fmt: skip
    out = tmp_path / "episode.vlaobs"
    run = cli(
        "record", str(out), "--bag", str(bag), "--topic", "/top/image=top",
        "--topic", "/wrist/image=wrist", "--topic", "/joint_states=state",
        "--frames", "4", "--rate", "0",
    )  # fmt: skip
    assert run.code == 0, run.err
    recorded = load_observations(out)
    assert len(recorded) == 4
    for k, step in enumerate(recorded):
        observation = step.observation
        np.testing.assert_array_equal(observation.images["top"], images[k])
        np.testing.assert_array_equal(observation.images["wrist"], wrist[k])
        np.testing.assert_array_equal(observation.state, joint_positions(4)[k])
        assert observation.capture_times == pytest.approx(
            {"top": stamps[k], "wrist": stamps[k] + 0.004}, abs=1e-6
        )


def test_a_frame_without_a_partner_within_the_skew_is_left_out(cli, server_url, tmp_path):
    images = frames(3)
    stamps = [T0, T0 + 0.1, T0 + 0.2]
    # the second camera has nothing near the middle frame: 60 ms away, over 50 ms
    other = [T0 + 0.001, T0 + 0.16, T0 + 0.201]
    bag = write_bag(
        tmp_path / "gap", "sqlite3",
        {"/a": ("rgb8", images, stamps), "/b": ("rgb8", images, other)},
    )  # fmt: skip
    topics = ("--bag", str(bag), "--topic", "/a=a", "--topic", "/b=b")
    run = cli("send", server_url, *topics, "--json")
    assert run.code == 0, run.err
    assert json.loads(run.out)["requests"] == 2
    run = cli("send", server_url, *topics, "--max-skew-ms", "70", "--json")
    assert run.code == 0, run.err
    assert json.loads(run.out)["requests"] == 3


def test_rate_recorded_keeps_the_pace_of_the_header_stamps(cli, counting_server, tmp_path):
    stamps = [T0, T0 + 0.1, T0 + 0.7]
    bag = write_bag(tmp_path / "paced", "mcap", {"/a": ("rgb8", frames(3), stamps)})
    run = cli(
        "send", counting_server.url, "--bag", str(bag), "--topic", "/a=a", "--rate", "recorded"
    )
    assert run.code == 0, run.err
    arrivals = counting_server.policy.arrivals
    assert paced(arrivals[2] - arrivals[0], 0.7)


@pytest.mark.parametrize(
    ("topics", "reason"),
    [
        (("--topic", "/nope=wrist"), "has no topic /nope; its topics: /a (sensor_msgs/msg/Image)"),
        (("--topic", "/a=state"), "--bag needs a camera topic"),
    ],
)
def test_bag_errors_name_the_bag_and_its_topics(cli, counting_server, tmp_path, topics, reason):
    bag = write_bag(tmp_path / "one", "sqlite3", {"/a": ("rgb8", frames(1), [T0])})
    run = cli("send", counting_server.url, "--bag", str(bag), *topics)
    assert run.code in (1, 2)
    assert reason in run.err and len(run.err.strip().splitlines()) == 1
    assert counting_server.requests == 0


def test_a_state_topic_of_another_type_and_a_missing_bag_are_refused(
    cli, counting_server, tmp_path, error_line
):
    bag = write_bag(tmp_path / "one", "mcap", {"/a": ("rgb8", frames(1), [T0])})
    run = cli("send", counting_server.url, "--bag", str(bag), "--topic", "/a=a",
              "--topic", "/a=state")  # fmt: skip
    assert "--topic names a topic twice" in run.err
    run = cli("send", counting_server.url, "--bag", str(tmp_path / "none"), "--topic", "/a=a")
    assert run.code == 1
    assert f"cannot read the ROS bag {tmp_path / 'none'}" in error_line(run.err)
    assert counting_server.requests == 0


@pytest.mark.parametrize(
    ("args", "reason"),
    [
        (("--topic", "/a=a"), "--topic names the topics of a --bag; add --bag PATH"),
        (("--bag", "x", "--topic", "nothing"), "takes TOPIC=NAME"),
        (("--bag", "x", "--topic", "/a=a", "--max-skew-ms", "0"), "must be a number above 0"),
        (("--bag", "x", "--topic", "/a=a", "--obs", "y.vlaobs"), "not obs and bag"),
        (
            ("--bag", "x", "--topic", "/a=a", "--topic", "/j=state", "--state", "1,2"),
            "give the state once",
        ),
    ],
)
def test_bag_usage_errors(cli, counting_server, usage_error, args, reason):
    assert reason in usage_error(cli("send", counting_server.url, *args))


def test_record_refuses_a_topic_without_a_bag(cli, usage_error, tmp_path):
    line = usage_error(cli("record", str(tmp_path / "x.vlaobs"), "--topic", "/a=a"))
    assert "--topic names the topics of a --bag; add --bag PATH" in line
    assert "(see 'vla-client record --help')" in line


def test_a_topic_that_changes_encoding_mid_bag_is_refused_before_anything_is_sent(
    cli, counting_server, tmp_path, error_line
):
    """Six rgb8 frames, then the camera driver switched to bayer_rggb8: the bag is refused
    whole, naming the first message it cannot read, and the server sees no request."""
    encodings = ["rgb8"] * 6 + ["bayer_rggb8"] * 4
    stamps = [T0 + 0.1 * i for i in range(10)]
    bag = write_bag(tmp_path / "switch", "mcap", {"/cam": (encodings, frames(10), stamps)})
    run = cli("send", counting_server.url, "--bag", str(bag), "--topic", "/cam=wrist")
    assert run.code == 1
    assert error_line(run.err) == (
        f"vla-client: error: bag {bag}: /cam has encoding 'bayer_rggb8'; read are rgb8, bgr8, "
        f"mono8, rgba8, bgra8, 16UC1, 32FC1 (message 7 of /cam, stamped {stamps[6]:.9f} s)"
    )
    assert counting_server.requests == 0
