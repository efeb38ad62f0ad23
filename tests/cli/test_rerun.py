"""``send --rerun FILE.rrd`` and ``send --bag ... --rerun``: the frames as the server got them,
every chunk and the latencies, read back with Rerun's reader."""

from __future__ import annotations

import json

import numpy as np
import pytest

from ros_bags import frames, write_bag
from rrd import read_rrd
from vla_client.recording import load_action_chunks

pytest.importorskip("rerun")


def test_send_logs_each_request_with_the_chunk_it_got(cli, server_url, tmp_path):
    path, actions = tmp_path / "send.rrd", tmp_path / "actions.npz"
    run = cli(
        "send", server_url, "--repeat", "3", "--cameras", "2", "--height", "48", "--width", "64",
        "--rate", "20", "--rerun", str(path), "--save-actions", str(actions), "--json",
    )  # fmt: skip
    assert run.code == 0, run.err
    json.loads(run.out)  # stdout stays one JSON document
    rows = read_rrd(path)
    chunks = load_action_chunks(actions)
    for n, chunk in enumerate(chunks):
        plan = rows[f"/plan/{n}"]
        assert [row["Scalars:scalars"] for row in plan] == chunk.astype(np.float64).tolist()
        assert np.allclose(np.diff([row["t"] for row in plan]), 0.05)  # --rate 20
    assert "/plan/3" not in rows
    for camera in ("wrist", "left"):
        assert len(rows[f"/camera/{camera}"]) == 3
    assert len(rows["/latency/round_trip"]) == len(rows["/latency/server_inference"]) == 3


def test_a_bag_replay_logs_frames_as_sent_its_states_and_plans_at_its_pace(
    cli, server_url, tmp_path
):
    images = frames(2, height=24, width=32)
    joints = [np.array([0.5, -0.25, 1.0]), np.array([0.75, -0.5, 1.5])]
    bag = write_bag(
        tmp_path / "bag", "mcap", {"/cam": ("rgb8", images, [5.0, 5.25])},
        ("/joints", joints, [5.0, 5.25]),
    )  # fmt: skip
    path = tmp_path / "bag.rrd"
    run = cli(
        "send", server_url, "--bag", str(bag), "--topic", "/cam=local", "--topic",
        "/joints=state", "--camera-map", "local=wrist", "--rate", "recorded",
        "--rerun", str(path),
    )  # fmt: skip
    assert run.code == 0, run.err
    rows = read_rrd(path)
    logged = rows["/camera/wrist"]  # after the fit: under the server's name
    assert len(logged) == 2 and "/camera/local" not in rows
    for row, image in zip(logged, images, strict=True):
        pixels = np.asarray(row["Image:buffer"][0], np.uint8).reshape(image.shape)
        np.testing.assert_array_equal(pixels, image)
    assert [row["Scalars:scalars"] for row in rows["/robot/state"]] == [j.tolist() for j in joints]
    # --rate recorded: a chunk's rows a recorded step (0.25 s) apart
    plan = [row["t"] for row in rows["/plan/1"]]
    assert np.allclose(np.diff(plan), 0.25)


def test_rerun_usage_and_output_checks(cli, counting_server, usage_error, error_line):
    line = usage_error(cli("send", counting_server.url, "--rerun", "out.txt"))
    assert "--rerun takes a .rrd file, got 'out.txt'" in line
    run = cli("send", counting_server.url, "--rerun", "/no/such/dir/run.rrd")
    assert run.code == 1
    assert "--rerun /no/such/dir/run.rrd: the folder /no/such/dir does not exist" in error_line(
        run.err
    )
    assert counting_server.requests == 0
