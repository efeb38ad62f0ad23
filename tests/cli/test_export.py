"""``vla-client export``: what is refused before any work, without LeRobot (the export itself,
with LeRobot, is tested in tests/lerobot_robot)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from vla_client.observation import Observation
from vla_client.recording import ObservationWriter

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def recording(tmp_path: Path) -> Path:
    path = tmp_path / "run.vlaobs"
    with ObservationWriter(path, fps=10) as writer:
        frame = np.zeros((8, 8, 3), np.uint8)
        writer.record(Observation({"cam": frame}, state=[1.0], task="t"), np.float32([0.5]))
    return path


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--repo-id", "no-slash"], "argument --repo-id: must be OWNER/NAME"),
        (["--repo-id", "a/b c"], "argument --repo-id: must be OWNER/NAME"),
        (["--fps", "0"], "argument --fps: must be at least 1, got '0'"),
        (["--fps", "12.5"], "argument --fps: must be a whole number, got '12.5'"),
        (["--task", " "], "argument --task: must be a task in words"),
        (["--fps", "1001"], "argument --fps: must be at most 1000, got '1001'"),
        (["--images", "--videos"], "argument --videos: not allowed with argument --images"),
    ],
)
def test_a_bad_option_is_a_usage_error(cli, recording, tmp_path, extra, message):
    run = cli("export", str(recording), "--lerobot", str(tmp_path / "out"), *extra)
    assert (run.code, run.out) == (2, "")
    assert message in run.err
    assert not (tmp_path / "out").exists()


def test_the_target_folder_is_required(cli, recording):
    run = cli("export", str(recording))
    assert run.code == 2
    assert "the following arguments are required: --lerobot" in run.err


def test_a_folder_with_something_in_it_is_never_written_into(cli, recording, tmp_path):
    target = tmp_path / "dataset"
    target.mkdir()
    (target / "keep.txt").write_text("mine")
    run = cli("export", str(recording), "--lerobot", str(target))
    assert run.code == 1
    assert "is a folder that is not empty: the dataset goes into a new or empty folder" in run.err
    assert [p.name for p in target.iterdir()] == ["keep.txt"]
    file_target = tmp_path / "file"
    file_target.write_text("x")
    run = cli("export", str(recording), "--lerobot", str(file_target))
    assert (run.code, "is not a folder" in run.err) == (1, True)
    run = cli("export", str(recording), "--lerobot", str(file_target / "dataset"))
    assert (run.code, f"{file_target} is not a folder" in run.err) == (1, True)


def test_missing_parent_folders_are_no_refusal_and_are_not_left_behind(cli, recording, tmp_path):
    """The docs' ``--lerobot datasets/run`` makes ``datasets``: a missing parent is made when
    the dataset is written (tests/lerobot_robot shows it); a run that fails first makes none."""
    run = cli("export", str(recording), "--lerobot", str(tmp_path / "missing" / "dataset"))
    assert "does not exist" not in run.err
    assert not (tmp_path / "missing").exists()


def test_a_vla_client_record_file_is_refused_saying_how_to_get_actions(cli, tmp_path):
    """``vla-client record`` stores observations only; the refusal says so before anything
    else (LeRobot installed or not) and names the ways to a recording with actions."""
    path = tmp_path / "run.vlaobs"
    made = cli("record", str(path), "--frames", "2", "--rate", "0", "--height", "16",
               "--width", "16", "--cameras", "1")  # fmt: skip
    assert made.code == 0, made.err
    run = cli("export", str(path), "--lerobot", str(tmp_path / "datasets" / "run"))
    assert run.code == 1
    assert run.err.startswith(
        f"vla-client: error: {path} holds no action: 'vla-client record' made it, and records "
        "observations only. "
    )
    assert "ControlLoop(record=writer.record)" in run.err
    assert "'vla-client serve --record DIR', then 'vla-client send URL --obs FILE'" in run.err
    assert len(run.err.splitlines()) == 1
    assert not (tmp_path / "datasets").exists()


def test_a_file_that_is_not_a_recording_is_refused(cli, tmp_path):
    other = tmp_path / "other.vlaobs"
    other.write_bytes(b"hello")
    run = cli("export", str(other), "--lerobot", str(tmp_path / "out"))
    assert run.code == 1
    assert "is not a vla-client observation recording" in run.err
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("fps", [10, None])
def test_without_lerobot_the_error_names_the_venv_recipe(tmp_path, fps):
    """lerobot made unimportable in a fresh interpreter, so this holds in either venv; a
    header without fps still gets the install recipe first (no --fps fixes a missing lerobot)."""
    recording = tmp_path / "run.vlaobs"
    with ObservationWriter(recording, **({} if fps is None else {"fps": fps})) as writer:
        frame = np.zeros((8, 8, 3), np.uint8)
        writer.record(Observation({"cam": frame}, state=[1.0, 2.0], task="t"), np.float32([0.5]))
    code = (
        "import sys; sys.modules['lerobot'] = None\n"
        "from vla_client.cli import main\n"
        f"sys.exit(main(['export', {str(recording)!r}, '--lerobot', {str(tmp_path / 'out')!r}]))"
    )
    run = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
        env={"PYTHONPATH": str(ROOT / "src"), "PATH": ""},
    )  # fmt: skip
    assert run.returncode == 1, run.stderr
    assert run.stderr.startswith("vla-client: error: the LeRobot export needs lerobot 0.4")
    assert ".ci/lerobot_venv.sh DIR" in run.stderr
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"repo_id": "name"}, "repo_id must be 'owner/name'"),
        ({"repo_id": 3}, "repo_id must be 'owner/name'"),
        ({"fps": 0}, "fps must be an integer > 0; got 0"),
        ({"fps": 2.5}, "fps must be an integer > 0; got 2.5"),
        ({"fps": True}, "fps must be an integer > 0; got True"),
        ({"task": ""}, "task must be a non-empty string or None"),
        ({"videos": "yes"}, "videos must be True, False or None"),
        ({"fps": 10**6}, "fps 1000000 is not a rate of 1 to 1000 frames a second"),
    ],
)
def test_the_python_calls_options_are_checked_before_anything_is_read(tmp_path, options, message):
    from vla_client.lerobot import export_lerobot_dataset

    missing = tmp_path / "missing.vlaobs"  # never opened: the options fail first
    with pytest.raises(ValueError, match=message):
        export_lerobot_dataset(missing, tmp_path / "out", **options)
    assert not (tmp_path / "out").exists()


def test_an_eval_episode_holds_its_actions_and_gets_past_the_action_check(cli, tmp_path):
    """``vla-client eval --record DIR`` then ``vla-client export`` as a user types them: each
    tick's step holds the action applied on it (the ticks before the first chunk none), the
    header says its rate and what made it, and the export goes on to LeRobot (not installed
    here: the install line, naming the recipe, where 0.3 refused the file as one without
    actions, blaming 'vla-client record')."""
    from vla_client.recording import ObservationReader

    folder = tmp_path / "episodes"
    run = cli("eval", "--episodes", "1", "--max-steps", "12", "--record", str(folder))
    assert run.code == 0, run.err
    (path,) = folder.iterdir()
    with ObservationReader(path) as reader:
        header = dict(reader.metadata)
        actions = [step.applied_action for _, step in reader.read()]
    assert (header["source"], header["fps"]) == ("eval", 10.0)
    assert len(actions) == 12 and actions[0] is None  # no chunk yet on the first tick
    acted = [action for action in actions if action is not None]
    assert len(acted) >= 6 and all(action.shape == (2,) for action in acted)
    export = cli("export", str(path), "--lerobot", str(tmp_path / "dataset"))
    assert export.code == 1
    assert "holds no action" not in export.err
    if not _has_lerobot():
        assert "the LeRobot export needs lerobot 0.4" in export.err
        assert "docs/install.md#lerobot" in export.err


def _has_lerobot() -> bool:
    import importlib.util

    return importlib.util.find_spec("lerobot") is not None


def test_an_eval_recording_of_0_3_without_actions_is_named_as_such(cli, tmp_path):
    path = tmp_path / "aligned-0ms-seed0.vlaobs"
    with ObservationWriter(path, seed=0, mode="aligned", rate_hz=10.0, delay_s=0.0) as writer:
        writer.write(Observation({"top": np.zeros((8, 8, 3), np.uint8)}, state=[0.0]))
    run = cli("export", str(path), "--lerobot", str(tmp_path / "dataset"))
    assert run.code == 1
    assert run.err.startswith(
        f"vla-client: error: {path} holds no action: 'vla-client eval --record' of vla-client "
        "0.3 made it, whose episodes held no actions (this version's hold the action of each "
        "tick: record the run again). "
    )
