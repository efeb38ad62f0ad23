"""``vla-client view``: the contact sheet and videos of a recording, and one-line refusals of
files that are not whole recordings (by ``view`` and ``send --obs`` alike)."""

from __future__ import annotations

import struct

import cv2
import numpy as np
import pytest

from vla_client.cameras.scene import synthetic_frames
from vla_client.cli.sheet import fit_height, label_tile, title_height
from vla_client.cli.view import step_label
from vla_client.codecs import packb
from vla_client.observation import Observation
from vla_client.recording import FORMAT, MAGIC, ObservationWriter, load_observations

TIMES = [0.0, 0.1, 0.2, 0.3, 0.4]  # seconds after the first step, 10 Hz


@pytest.fixture
def recording(tmp_path):
    """Five steps of two 48x64 cameras recorded at 10 Hz."""
    path = tmp_path / "run.vlaobs"
    with ObservationWriter(path) as writer:
        for t, wall_time in enumerate(TIMES):
            frames = synthetic_frames(("wrist", "top"), 48, 64, t=t)
            writer.write(Observation(frames, task="wipe"), wall_time=5000.0 + wall_time)
    return path


def read_rgb(path):
    image = cv2.imread(str(path))
    assert image is not None, path
    return cv2.cvtColor(image, cv2.COLOR_BGR2RGB)


def test_contact_sheet_has_a_labelled_tile_per_step_and_camera(cli, recording, tmp_path):
    out = tmp_path / "sheet.png"
    run = cli("view", str(recording), "--out", str(out), "--frames", "3", "--tile-height", "96")
    assert run.code == 0, run.err
    assert f"wrote {out}: 3 of 5 step(s)" in run.out
    sheet = read_rgb(out)
    bar, width = sheet.shape[0] - 3 * 96, round(64 * 96 / 48)
    assert bar >= title_height(96)  # taller when the title wraps on this narrow sheet
    assert sheet.shape == (bar + 3 * 96, 2 * width, 3)
    assert sheet[:bar].any()  # the title is written
    times = [5000.0 + t for t in TIMES]
    steps = load_observations(recording)
    for row, index in enumerate([0, 2, 4]):  # three steps spread from the first to the last
        for column, camera in enumerate(("wrist", "top")):
            frame = steps[index].observation.images[camera]
            top, left = bar + row * 96, column * width
            tile = sheet[top : top + 96, left : left + width]
            label = step_label(index, times)
            assert label == f"#{index}  +{TIMES[index]:.2f} s"
            # exactly the frame with this step's label burned in ...
            np.testing.assert_array_equal(tile, label_tile(frame, 96, [label, camera]))
            # ... which is not the bare frame, nor the frame labelled with another number
            assert (tile != fit_height(frame, 96)).any()
            other = step_label(index + 1, [*times, times[-1] + 0.1])
            assert (tile != label_tile(frame, 96, [other, camera])).any()


def test_videos_one_per_camera_with_every_step(cli, recording, tmp_path):
    videos = tmp_path / "videos"
    run = cli("view", str(recording), "--out", str(tmp_path / "s.png"), "--video", str(videos))
    assert run.code == 0, run.err
    steps = load_observations(recording)
    for camera in ("wrist", "top"):
        path = videos / f"{camera}.mp4"
        assert f"wrote {path}: 5 frame(s) at 10.0 fps" in run.out
        capture = cv2.VideoCapture(str(path))
        assert capture.get(cv2.CAP_PROP_FPS) == pytest.approx(10.0)
        frames = []
        while (read := capture.read())[0]:
            frames.append(cv2.cvtColor(read[1], cv2.COLOR_BGR2RGB))
        capture.release()
        assert len(frames) == 5 and frames[0].shape == (48, 64, 3)
        # lossy, but each video frame is nearest to its own step's frame
        for index, frame in enumerate(frames):
            distances = [
                np.abs(frame.astype(int) - s.observation.images[camera]).mean() for s in steps
            ]
            assert int(np.argmin(distances)) == index


def test_default_sheet_goes_next_to_the_recording(cli, recording):
    run = cli("view", str(recording))
    assert run.code == 0, run.err
    height, width = read_rgb(recording.with_suffix(".png")).shape[:2]
    assert width == 2 * 240 and height - 5 * 180 >= title_height(180)


def _header(version: int) -> bytes:
    document = packb({"format": FORMAT, "version": version, "image_format": "png"})
    return MAGIC + struct.pack(">I", len(document)) + document


@pytest.mark.parametrize(
    ("content", "problem"),
    [
        (lambda whole: whole[:-7], "is truncated: it ends inside its step 4"),
        (lambda whole: whole[: len(MAGIC) + 2], "is truncated: it ends inside its header"),
        (lambda whole: MAGIC, "is truncated: it ends before its header"),
        (
            lambda whole: _header(2),
            "was written by a newer vla-client (recording format version 2; this one reads "
            "version 1): upgrade vla-client to read it",
        ),
        (
            lambda whole: b"hello, world\n",
            "is not a vla-client observation recording (it does not start like one)",
        ),
        (lambda whole: b"", "is not a vla-client observation recording (it is empty)"),
    ],
    ids=["truncated", "truncated-header", "no-header", "newer", "not-a-recording", "empty"],
)
@pytest.mark.parametrize("command", ["view", "send"])
def test_a_bad_recording_is_one_line_naming_the_file(
    cli, counting_server, error_line, recording, tmp_path, content, problem, command
):
    bad = tmp_path / "bad.vlaobs"
    bad.write_bytes(content(recording.read_bytes()))
    args = (
        ("view", str(bad))
        if command == "view"
        else ("send", counting_server.url, "--obs", str(bad))
    )
    run = cli(*args)
    assert run.code == 1
    assert error_line(run.err) == f"vla-client: error: {str(bad)!r} {problem}"
    assert not bad.with_suffix(".png").exists()
    assert counting_server.requests == 0


def test_an_empty_recording(cli, tmp_path, error_line):
    path = tmp_path / "empty.vlaobs"
    ObservationWriter(path).close()
    run = cli("view", str(path))
    assert run.code == 1
    assert "holds no observations" in error_line(run.err)


def test_a_recording_given_as_a_camera_says_how_to_view_it(cli, recording, error_line):
    for command in ("cameras", "send"):
        run = cli(command, "--camera", f"x={recording}")
        assert run.code == 1
        assert error_line(run.err) == (
            f"vla-client: error: {recording} is an observation recording, not a camera: replay "
            f"it with 'vla-client send --obs {recording}' or see its frames with "
            f"'vla-client view {recording}'"
        )


def test_view_output_checks_come_first(cli, recording, tmp_path, error_line, usage_error):
    bad = tmp_path / "bad.vlaobs"
    bad.write_bytes(recording.read_bytes()[:-7])  # truncated: read first, it would be the error
    run = cli("view", str(bad), "--out", str(tmp_path / "missing" / "s.png"))
    assert "--out" in error_line(run.err) and "does not exist" in run.err
    file = tmp_path / "file"
    file.write_text("")
    run = cli("view", str(bad), "--video", str(file))
    assert "--video" in error_line(run.err) and "that is a file, not a folder" in run.err
    assert "--out: the file must end in .png" in usage_error(
        cli("view", str(bad), "--out", "x.bmp")
    )
