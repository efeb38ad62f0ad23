"""``vla-client send`` against a real reference server, from every kind of frame source."""

from __future__ import annotations

import json
import re

import cv2
import numpy as np
import pytest

from oracles import oracle_actions
from timing import paced
from vla_client.cameras.scene import synthetic_frames
from vla_client.observation import Observation
from vla_client.recording import ObservationWriter, load_action_chunks
from vla_client.server.policy import PolicyInput

STAGES = {"encode", "round trip", "server preprocess", "server inference", "decode", "total"}


def small(*args: str) -> tuple[str, ...]:
    return (*args, "--height", "48", "--width", "64")


def test_repeat_json_reports_percentiles_per_stage_and_bytes_per_camera(cli, server_url):
    run = cli("send", server_url, *small("--repeat", "3", "--cameras", "2", "--json"))
    assert run.code == 0, run.err
    report = json.loads(run.out)
    assert report["requests"] == 3
    assert report["action_shape"] == [10, 7]
    assert set(report["timings_ms"]) >= STAGES
    for stage in report["timings_ms"].values():
        assert stage["p50"] <= stage["p90"] <= stage["p99"]
    assert set(report["bytes_per_camera"]) == {"wrist", "left"}
    assert 0 < sum(report["bytes_per_camera"].values()) < report["bytes_sent"]


def test_table_output_names_every_stage_and_camera(cli, server_url):
    run = cli("send", server_url, *small("--repeat", "2", "--encoding", "raw", "--wire", "msgpack"))
    assert run.code == 0, run.err
    first_column = {line.split("  ")[0].strip() for line in run.out.splitlines()}
    assert STAGES | {"wrist", "left", "right"} <= first_column
    assert "p99" in run.out
    # the raw frame is the pixels plus a few bytes of msgpack framing
    wrist = next(line for line in run.out.splitlines() if line.startswith("wrist"))
    assert 48 * 64 * 3 <= int(wrist.split()[-1]) < 48 * 64 * 3 + 100


def test_image_files_reach_the_policy_exactly(cli, server_url, tmp_path, frames):
    args = []
    for name, frame in frames.items():
        path = tmp_path / f"{name}.png"
        cv2.imwrite(str(path), cv2.cvtColor(frame, cv2.COLOR_RGB2BGR))
        args += ["--image", f"{name}={path}"]
    run = cli(
        "send", server_url, *args, "--state", "0,0.5,1", "--task", "fold", "--verify", "--json"
    )
    assert run.code == 0, run.err
    report = json.loads(run.out)
    assert report["lossless"] is True
    expected = oracle_actions(
        PolicyInput(dict(frames), state=np.array([0, 0.5, 1], np.float32), task="fold"),
        horizon=10, action_dim=7,
    )  # fmt: skip
    np.testing.assert_allclose(np.asarray(report["actions"], np.float32), expected, rtol=1e-5)


def test_save_actions_keeps_every_chunk(cli, server_url, tmp_path):
    path = tmp_path / "actions.npz"
    run = cli("send", server_url, *small("--repeat", "4", "--save-actions", str(path), "--json"))
    assert run.code == 0, run.err
    chunks = load_action_chunks(path)
    assert chunks.shape == (4, 10, 7)
    np.testing.assert_allclose(chunks[-1], np.asarray(json.loads(run.out)["actions"]), rtol=1e-6)
    assert not np.allclose(chunks[0], chunks[1])  # the synthetic arm moves between frames


def test_synthetic_camera_spec_and_video_file(cli, server_url, tmp_path):
    video = tmp_path / "clip.avi"
    writer = cv2.VideoWriter(str(video), cv2.VideoWriter_fourcc(*"MJPG"), 30.0, (64, 48))
    for t in range(5):
        frame = synthetic_frames(1, 48, 64, t=t)["wrist"]
        writer.write(cv2.cvtColor(frame, cv2.COLOR_RGB2BGR))
    writer.release()
    run = cli(
        "send", server_url, "--camera", "top=synthetic:3?width=64&height=48",
        "--video", f"side={video}", "--repeat", "2", "--json",
    )  # fmt: skip
    assert run.code == 0, run.err
    report = json.loads(run.out)
    assert set(report["bytes_per_camera"]) == {"top", "side"}
    assert report["requests"] == 2


def test_recorded_observations_replay_in_order(cli, server_url, tmp_path):
    recording = tmp_path / "run.vlaobs"
    assert (
        cli("record", str(recording), *small("--frames", "3", "--rate", "0", "--cameras", "1")).code
        == 0
    )
    saved = tmp_path / "replayed.npz"
    run = cli("send", server_url, "--obs", str(recording), "--save-actions", str(saved), "--json")
    assert run.code == 0, run.err
    assert json.loads(run.out)["requests"] == 3  # every recorded observation, once
    chunks = load_action_chunks(saved)
    for t in range(3):
        frames = synthetic_frames(1, 48, 64, t=t)
        expected = oracle_actions(
            PolicyInput(frames, task="pick up the red block"), horizon=10, action_dim=7
        )
        np.testing.assert_allclose(chunks[t], expected, rtol=1e-5)


@pytest.mark.parametrize(
    ("args", "reason"),
    [
        (("--image", "wrist=/no/such.png"), "cannot read image file"),
        (("--image", "wrist"), "NAME=PATH"),
        (("--obs", "/no/such.vlaobs"), "cannot open recording"),
        (("--camera", "wrist=/no/such/dir/clip.mp4"), "camera"),
        (("--save-actions", "/no/such/dir/a.npz"), "the folder /no/such/dir does not exist"),
    ],
)
def test_bad_input_exits_1_with_one_line(cli, counting_server, error_line, args, reason):
    run = cli("send", counting_server.url, *small(*args))
    assert run.code == 1
    assert reason in error_line(run.err)
    assert run.out == ""
    assert counting_server.requests == 0


@pytest.mark.parametrize(
    ("args", "reason"),
    [
        (("--encoding", "jpeg", "--verify"), "lossless"),
        (("--repeat", "0"), "argument --repeat: must be at least 1, got '0'"),
        (("--rate", "0"), "argument --rate: takes 'recorded' or a number"),
        (("--rate", "fast"), "argument --rate: takes 'recorded' or a number"),
        (("--rate", "recorded"), "--rate recorded needs a recording: add --obs FILE"),
        (("--timeout", "0"), "argument --timeout: must be a number of seconds above 0, got '0'"),
        (("--timeout", "-1"), "argument --timeout: must be a number of seconds above 0"),
        (("--timeout", "nan"), "argument --timeout: must be a finite number"),
        (("--jpeg-quality", "0"), "argument --jpeg-quality: must be in 1..100"),
        (("--cameras", "0"), "argument --cameras: must be at least 1"),
        (("--state", "1,x"), "argument --state: takes comma-separated finite numbers"),
        (("--save-actions", "a.txt"), "argument --save-actions: the file must end in .npz"),
    ],
)
def test_bad_command_lines_are_usage_errors(cli, counting_server, usage_error, args, reason):
    line = usage_error(cli("send", counting_server.url, *small(*args)))
    assert reason in line and "(see 'vla-client send --help')" in line
    assert counting_server.requests == 0


def test_totals_and_per_request_sizes(cli, server_url):
    run = cli("send", server_url, *small("--repeat", "3", "--cameras", "1", "--json"))
    assert run.code == 0, run.err
    report = json.loads(run.out)
    sent, received = report["bytes_sent_per_request"], report["bytes_received_per_request"]
    assert len(sent) == len(received) == 3
    assert report["bytes_sent"] == sum(sent) and report["bytes_received"] == sum(received)
    assert all(size > report["bytes_per_camera"]["wrist"] for size in sent)
    assert all(size > 0 for size in received)

    run = cli("send", server_url, *small("--repeat", "2", "--cameras", "1", "--encoding", "raw"))
    assert run.code == 0, run.err
    line = next(line for line in run.out.splitlines() if line.startswith("sent "))
    # raw frames of one size: requests differ by a few bytes at most, the total is twice one
    match = re.fullmatch(
        r"sent (\d+\.\d) kB in total, (\d+\.\d) kB( to [\d.]+ kB)? per request, "
        r"received [\d.]+ [kM]?B in total, .+ per request",
        line,
    )
    assert match, line
    assert float(match[1]) == pytest.approx(2 * float(match[2]), abs=0.25)


def write_recording(path, times):
    """A recording of tiny synthetic frames whose steps were recorded at `times` (seconds)."""
    with ObservationWriter(path) as writer:
        for t, wall_time in enumerate(times):
            writer.write(Observation(synthetic_frames(1, 24, 32, t=t)), wall_time=1000 + wall_time)


def test_rate_recorded_keeps_the_recorded_timing(cli, counting_server, tmp_path):
    # 2 s: six steps 0.1 s apart, a one-second pause, six more 0.1 s apart
    times = [0.1 * i for i in range(6)] + [1.5 + 0.1 * i for i in range(6)]
    recording = tmp_path / "paced.vlaobs"
    write_recording(recording, times)
    run = cli("send", counting_server.url, "--obs", str(recording), "--rate", "recorded", "--json")
    assert run.code == 0, run.err
    assert paced(json.loads(run.out)["duration_s"], 2.0)
    arrivals = counting_server.policy.arrivals
    assert len(arrivals) == len(times)
    assert paced(arrivals[-1] - arrivals[0], 2.0)
    assert paced(arrivals[6] - arrivals[5], 1.0)  # the pause is kept
    assert paced(arrivals[5] - arrivals[0], 0.5)


def test_without_rate_a_recording_replays_as_fast_as_the_server_answers(
    cli, counting_server, tmp_path
):
    recording = tmp_path / "slow.vlaobs"
    write_recording(recording, [0.5 * i for i in range(5)])  # 2 s recorded
    run = cli("send", counting_server.url, "--obs", str(recording), "--json")
    assert run.code == 0, run.err
    assert json.loads(run.out)["duration_s"] < 1.0
    assert counting_server.requests == 5


def test_rate_n_paces_any_source(cli, counting_server):
    run = cli("send", counting_server.url, *small("--repeat", "11", "--rate", "20", "--json"))
    assert run.code == 0, run.err
    arrivals = counting_server.policy.arrivals
    assert paced(arrivals[-1] - arrivals[0], 0.5)


def test_a_file_that_is_not_a_recording_is_refused(cli, server_url, tmp_path, error_line):
    path = tmp_path / "notes.txt"
    path.write_bytes(b"\x00\x00\x00\x02hi")
    run = cli("send", server_url, "--obs", str(path))
    assert run.code == 1
    assert "not a vla-client observation recording" in error_line(run.err)


def test_record_serve_compare_with_the_replay_policy(cli, server_url, tmp_path):
    """The documented workflow: record, save a server's answers, serve them back, compare."""
    from vla_client.server import LocalServer, create_app
    from vla_client.server.policies.replay import ReplayPolicy

    recording, expected, replayed = (tmp_path / n for n in ("run.vlaobs", "a.npz", "b.npz"))
    assert cli("record", str(recording), *small("--frames", "4", "--rate", "0")).code == 0
    run = cli("send", server_url, "--obs", str(recording), "--save-actions", str(expected))
    assert run.code == 0, run.err
    with LocalServer(create_app(ReplayPolicy(expected))) as replay_server:
        run = cli(
            "send", replay_server.url, "--obs", str(recording), "--save-actions", str(replayed)
        )
    assert run.code == 0, run.err
    np.testing.assert_array_equal(load_action_chunks(replayed), load_action_chunks(expected))


@pytest.mark.parametrize("path", ["/v1/actions/realtime", "/openpi/policy"])
def test_websocket_urls_send_msgpack_without_a_wire_flag(cli, server_url, path):
    url = server_url.replace("http://", "ws://") + path
    run = cli("send", url, "--encoding", "raw", "--repeat", "2", "--json")
    assert run.code == 0, run.err
    report = json.loads(run.out)
    assert report["wire"] == "msgpack" and report["requests"] == 2
    assert np.asarray(report["actions"]).shape == tuple(report["action_shape"])
