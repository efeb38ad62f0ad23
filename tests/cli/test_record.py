"""``vla-client record``: what goes in the file comes back out, frame for frame."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from vla_client.cameras.scene import synthetic_frames
from vla_client.cli.record import next_due
from vla_client.recording import ObservationReader, load_observations


def test_records_synthetic_frames_losslessly_with_state_and_task(cli, tmp_path):
    path = tmp_path / "run.vlaobs"
    run = cli(
        "record", str(path), "--frames", "3", "--rate", "0", "--cameras", "2",
        "--height", "40", "--width", "56", "--state", "1,2,3", "--task", "wipe",
    )  # fmt: skip
    assert run.code == 0, run.err
    assert "recorded 3 observation(s)" in run.out
    recorded = load_observations(path)
    assert len(recorded) == 3
    for t, step in enumerate(recorded):
        expected = synthetic_frames(2, 40, 56, t=t)
        assert list(step.observation.images) == ["wrist", "left"]
        for name, frame in expected.items():
            np.testing.assert_array_equal(step.observation.images[name], frame)
        np.testing.assert_array_equal(step.observation.state, [1, 2, 3])
        assert step.observation.task == "wipe"
    assert recorded[0].wall_time <= recorded[-1].wall_time


def test_cameras_keep_their_capture_times_and_raw_mode_is_bigger(cli, tmp_path):
    sizes = {}
    for mode in ("png", "raw"):
        path = tmp_path / f"{mode}.vlaobs"
        extra = ["--raw"] if mode == "raw" else []
        run = cli(
            "record",
            str(path),
            "--camera",
            "top=synthetic?width=64&height=48",
            "--frames",
            "2",
            "--rate",
            "50",
            *extra,
        )
        assert run.code == 0, run.err
        with ObservationReader(path) as reader:
            assert reader.header["image_format"] == mode
            steps = list(reader)
        assert [set(s.observation.capture_times) for s in steps] == [{"top"}, {"top"}]
        assert steps[0].observation.capture_times["top"] < steps[1].observation.capture_times["top"]
        sizes[mode] = path.stat().st_size
    assert sizes["png"] < sizes["raw"]


def test_bad_options_are_usage_errors(cli, tmp_path, usage_error):
    assert "--frames" in usage_error(cli("record", str(tmp_path / "x.vlaobs"), "--frames", "0"))
    assert "--rate" in usage_error(cli("record", str(tmp_path / "x.vlaobs"), "--rate", "nan"))
    assert ".vlaobs" in usage_error(cli("record", str(tmp_path / "x.obs")))


def test_the_output_folder_is_checked_before_any_camera_opens(cli, tmp_path, error_line):
    # the camera does not exist: opened first, it would be what the error is about
    path = tmp_path / "no" / "dir" / "x.vlaobs"
    run = cli("record", str(path), "--camera", "wrist=/dev/video99", "--frames", "1")
    assert run.code == 1
    assert error_line(run.err) == (
        f"vla-client: error: the recording {path}: the folder {path.parent} does not exist"
    )


def test_the_first_frames_are_paced_too(tmp_path):
    """A fresh process (a cold start, slow on its first frame) still spaces its first frames
    by about the period, rather than catching up with frames back to back."""
    path = tmp_path / "paced.vlaobs"
    subprocess.run(
        [sys.executable, "-m", "vla_client.cli", "record", str(path), "--frames", "4",
         "--rate", "10", "--height", "48", "--width", "64"],
        check=True, capture_output=True, timeout=120,
    )  # fmt: skip
    with ObservationReader(path) as reader:
        gaps = np.diff(reader.wall_times())
    assert gaps.min() > 0.08, gaps  # at 10 Hz; sleeps never end early, so no lower is right


def test_next_due_keeps_the_beat_and_restarts_it_rather_than_catch_up():
    assert next_due(None, 0.1, 5.0) == 5.1  # after the first frame, from when it was done
    assert next_due(5.1, 0.1, 5.12) == pytest.approx(5.2)  # on the beat
    assert next_due(5.2, 0.1, 5.45) == pytest.approx(5.55)  # over a period late: a new beat
