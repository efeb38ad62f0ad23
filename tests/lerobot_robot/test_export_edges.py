"""``vla-client export --lerobot`` on small hand-made recordings: lossless images, tasks given
on the command line, an empty target folder, and every refusal leaving nothing behind."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest
from sim_arm import draw

from vla_client.cli import main
from vla_client.lerobot import export_lerobot_dataset
from vla_client.observation import Observation
from vla_client.recording import ObservationWriter


def observation(t: int, *, task: str = "", size: tuple[int, int] = (24, 32)) -> Observation:
    frame = draw((*size, 3), [np.sin(t + i) for i in range(4)], stamp=t)
    return Observation({"top": frame}, state=[t, -t / 3], task=task)


def write(path: Path, steps: list[tuple[Observation, np.ndarray | None, int | None]], **header):  # type: ignore[no-untyped-def]
    with ObservationWriter(path, **header) as writer:
        for obs, action, episode in steps:
            writer.write(obs, applied_action=action, episode=episode)
    return path


def export(cli_args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(["export", *cli_args])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_images_come_back_exact_and_tasks_from_the_command_line_fill_the_gaps(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--images`` keeps frames as PNG: LeRobotDataset gives back every pixel. Steps without
    a task take ``--task``; one with a task keeps it. The empty target folder is taken."""
    from lerobot.datasets.lerobot_dataset import LeRobotDataset

    steps = [(observation(t, task="lift" if t == 3 else ""), np.float32([t, 1]), t // 3)
             for t in range(6)]  # fmt: skip
    path = write(tmp_path / "run.vlaobs", steps, fps=15, state_names=["x", "y"])
    root = tmp_path / "dataset"
    root.mkdir()
    code, out, err = export([str(path), "--lerobot", str(root), "--images", "--task", "push"],
                            capsys)  # fmt: skip
    assert code == 0, err
    assert "exported 6 frame(s) in 2 episode(s) and 2 task(s) at 15 fps" in out
    dataset = LeRobotDataset("local/dataset", root=root)
    assert dataset.features["observation.images.top"]["dtype"] == "image"
    assert dataset.features["observation.state"]["names"] == ["x", "y"]
    assert dataset.features["action"]["names"] == ["action_0", "action_1"]
    for t, (obs, action, episode) in enumerate(steps):
        item = dataset[t]
        pixels = (item["observation.images.top"].numpy().transpose(1, 2, 0) * 255).round()
        np.testing.assert_array_equal(pixels, obs.images["top"])
        # A float64 state (as given here) is stored as LeRobot's float32.
        assert obs.state is not None and obs.state.dtype == np.float64
        np.testing.assert_array_equal(item["observation.state"].numpy(), np.float32(obs.state))
        np.testing.assert_array_equal(item["action"].numpy(), action)
        assert int(item["episode_index"]) == episode
        assert item["task"] == ("lift" if t == 3 else "push")


def test_the_python_call_returns_what_it_wrote(tmp_path: Path) -> None:
    path = write(tmp_path / "run.vlaobs", [(observation(t, task="a"), np.float32([t, 0]), None)
                                           for t in range(3)])  # fmt: skip
    summary = export_lerobot_dataset(path, tmp_path / "out", fps=10, videos=False,
                                     repo_id="me/run")  # fmt: skip
    assert (summary.frames, summary.episodes, summary.tasks) == (3, 1, ("a",))
    assert (summary.repo_id, summary.fps, summary.served_actions) == ("me/run", 10, 0)
    assert summary.root == tmp_path / "out"


ONE = np.float32([0, 1])
BAD_RECORDINGS = {
    "no action": ([(observation(0, task="a"), None, None)], {"fps": 10},
                  "holds no action: .*'vla-client serve --record DIR'"),
    "an infinite fps": ([(observation(0, task="a"), ONE, 0)], {"fps": float("inf")},
                        "the recording's fps inf is not a rate of 1 to 1000 frames a second"),
    "an absurd fps": ([(observation(0, task="a"), ONE, 0)], {"fps": 1e300},
                      "the recording's fps 1e\\+300 is not a rate of 1 to 1000"),
    "a 1-value action": ([(observation(0, task="a"), np.float32([0]), 0)], {"fps": 10},
                         "action has 1 value: LeRobot 0.4 cannot write a 1-value action"),
    "another camera size": (
        [(observation(0, task="a"), ONE, 0), (observation(1, task="a", size=(24, 30)), ONE, 0)],
        {"fps": 10}, r"step 1 has cameras \{'top': \(24, 30, 3\)\}",
    ),
    "another action length": (
        [(observation(0, task="a"), ONE, 0), (observation(1, task="a"), np.float32([0, 1, 2]), 0)],
        {"fps": 10}, "step 1 has .* 3 action values; the first step has .* and 2",
    ),
    "no task": ([(observation(0), ONE, 0)], {"fps": 10},
                r"step 0 has no task: give one for such steps \(--task\)"),
    "no fps": ([(observation(0, task="a"), ONE, 0)], {},
               r"the recording's header has no fps: give the dataset's rate \(--fps\)"),
    "a fraction of fps": ([(observation(0, task="a"), ONE, 0)], {"fps": 12.5},
                          "fps 12.5 is not a whole number"),
    "too few names": ([(observation(0, task="a"), ONE, 0)],
                      {"fps": 10, "state_names": ["x"]}, "state_names must be 2 distinct names"),
    "empty": ([], {"fps": 10}, "holds no whole step"),
}  # fmt: skip


@pytest.mark.parametrize("case", sorted(BAD_RECORDINGS))
def test_a_recording_that_cannot_be_a_dataset_is_refused_and_nothing_is_left(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], case: str
) -> None:
    steps, header, message = BAD_RECORDINGS[case]
    path = write(tmp_path / "run.vlaobs", steps, **header)
    code, out, err = export([str(path), "--lerobot", str(tmp_path / "dataset")], capsys)
    assert (code, out) == (1, "")
    assert err.startswith("vla-client: error: ")
    assert re.search(message, err), err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run.vlaobs"]  # no staging left


def test_steps_no_action_was_taken_on_are_left_out_and_counted(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A control loop's (or ``vla-client eval --record``'s) ticks before its first chunk, and
    one while it waited for the next, hold no action: the export leaves them out and says so."""
    from lerobot.datasets.lerobot_dataset import LeRobotDataset

    actions = [None, None, np.float32([2, 1]), None, np.float32([4, 1])]
    steps = [(observation(t, task="a"), action, 0) for t, action in enumerate(actions)]
    path = write(tmp_path / "run.vlaobs", steps, fps=10)
    root = tmp_path / "dataset"
    code, out, err = export([str(path), "--lerobot", str(root), "--images"], capsys)
    assert code == 0, err
    assert "exported 2 frame(s) in 1 episode(s)" in out
    assert "left out 3 step(s) no action was taken on" in out
    dataset = LeRobotDataset("local/dataset", root=root)
    assert [dataset[i]["action"].tolist() for i in range(2)] == [[2.0, 1.0], [4.0, 1.0]]


def test_a_recording_cut_inside_its_last_step_exports_its_whole_steps(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A recorder killed mid-write leaves a partial last step: the steps before it export, and
    the output says what was dropped. Parent folders of the target are made."""
    from lerobot.datasets.lerobot_dataset import LeRobotDataset

    steps = [(observation(t, task="a"), np.float32([t, 1]), 0) for t in range(4)]
    path = write(tmp_path / "run.vlaobs", steps, fps=10)
    path.write_bytes(path.read_bytes()[:-10])
    root = tmp_path / "datasets" / "nested" / "run"
    code, out, err = export([str(path), "--lerobot", str(root), "--images"], capsys)
    assert code == 0, err
    assert "exported 3 frame(s) in 1 episode(s)" in out
    assert "dropped the end of the recording: " in out and "ends inside its step 3" in out
    assert len(LeRobotDataset("local/run", root=root)) == 3


def test_the_default_storage_is_video_only_where_lerobot_reads_it_back(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """With no --images/--videos, the export stores video only where LeRobot's default reader
    decodes it here, and the dataset it writes reads back frame by frame."""
    from lerobot.datasets.lerobot_dataset import LeRobotDataset

    from vla_client.lerobot.dataset import video_unreadable

    steps = [(observation(t, task="a"), np.float32([t, 1]), 0) for t in range(3)]
    path = write(tmp_path / "run.vlaobs", steps, fps=10)
    code, out, err = export([str(path), "--lerobot", str(tmp_path / "out")], capsys)
    assert code == 0, err
    dataset = LeRobotDataset("local/out", root=tmp_path / "out")
    stored = dataset.features["observation.images.top"]["dtype"]
    assert stored == ("video" if video_unreadable() is None else "image")
    assert ("frames stored as PNG images" in out) == (stored == "image")
    assert dataset[2]["observation.images.top"].shape == (3, 24, 32)


def test_the_documented_way_from_a_record_file_to_a_dataset_runs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """docs/cli.md's three commands, as written there: a ``vla-client record`` file replayed to
    a recording server, whose recording exports."""
    import glob
    import shlex
    import socket
    import subprocess
    import sys
    import time
    import urllib.request

    page = (Path(__file__).resolve().parents[2] / "docs" / "cli.md").read_text()
    block = page.split("or replay the file to a server that records")[1].split("```bash\n")[1]
    serve, send, export_line = (
        shlex.split(line.split("  #")[0].rstrip(" &"))
        for line in block.split("```")[0].splitlines()
    )
    monkeypatch.chdir(tmp_path)
    assert main(["record", "run.vlaobs", "--frames", "3", "--rate", "10", "--cameras", "1",
                 "--height", "24", "--width", "32", "--state", "0.5,-0.5"]) == 0  # fmt: skip
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    server = subprocess.Popen(
        [sys.executable, "-m", "vla_client.cli", *serve[1:], "--port", str(port)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                urllib.request.urlopen(url + "/health", timeout=1).close()
                break
            except OSError:
                time.sleep(0.2)
        assert main([send[1], url, *send[2:]]) == 0
    finally:
        server.terminate()
        server.wait(30)
    capsys.readouterr()
    (recorded,) = glob.glob(export_line[2])
    assert main([*export_line[1:2], recorded, *export_line[3:]]) == 0, capsys.readouterr().err
    assert "exported 3 frame(s) in 1 episode(s)" in capsys.readouterr().out
