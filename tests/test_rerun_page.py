"""docs/rerun.md as written: every command of its ``console`` blocks and its Python block run
here, in a folder holding the files they name (a ROS 2 bag ``episode`` written by `rosbags`, a
recording ``episode.vlaobs``), against a local reference server, and what they write is read
back."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import numpy as np
import pytest

from ros_bags import frames, write_bag
from rrd import free_port, read_rrd, saving_viewer
from vla_client.cli import main
from vla_client.observation import Observation
from vla_client.recording import ObservationWriter, load_action_chunks, load_observations
from vla_client.server import LocalServer, ReferencePolicy, create_app

pytest.importorskip("rerun")
pytest.importorskip("rosbags")

PAGE = Path(__file__).resolve().parents[1] / "docs" / "rerun.md"
DOCS_URL = "http://127.0.0.1:8000"
MARK = "<!-- run by: tests/test_rerun_page.py -->\n"


def blocks(language: str) -> list[str]:
    return re.findall(re.escape(MARK) + f"```{language}\n(.*?)```", PAGE.read_text(), re.S)


def commands() -> list[str]:
    found = [line[2:] for block in blocks("console") for line in block.splitlines()]
    assert len(found) == 7
    return found


@pytest.fixture(scope="module")
def server_url():
    with LocalServer(create_app(ReferencePolicy(action_horizon=10, action_dim=7))) as server:
        yield server.url


@pytest.fixture
def folder(tmp_path, monkeypatch):
    """The files the page names, in the current folder."""
    stamps = [1_700_000_000.0 + i / 15 for i in range(30)]
    joints = [np.linspace(-1, 1, 7) * np.cos(t) for t in range(60)]
    write_bag(
        tmp_path / "episode", "sqlite3",
        {"/camera/image_raw": ("bgr8", frames(30, 48, 64), stamps)},
        ("/joint_states", joints, [stamps[0] + i / 30 for i in range(60)]),
    )  # fmt: skip
    with ObservationWriter(tmp_path / "episode.vlaobs") as writer:
        for t in range(5):
            observation = Observation({"wrist": frames(1, 24, 32, seed=t)[0]}, state=[t, 0.0])
            writer.write(observation, wall_time=100.0 + t / 10, applied_action=np.ones(2) * t)
    monkeypatch.chdir(tmp_path)
    return tmp_path


@pytest.mark.parametrize("command", commands(), ids=lambda c: c[:60])
def test_each_command_runs_and_writes_what_the_page_says(
    command, server_url, folder, monkeypatch, capsys
):
    words = shlex.split(command)
    assert words[0] == "vla-client"
    args = [server_url if word == DOCS_URL else word for word in words[1:]]
    if args[-1] == "--rerun":  # the viewer: a real rerun process where it listens
        from vla_client.viz import rerun_log

        port = free_port()
        monkeypatch.setattr(rerun_log, "VIEWER_PORT", port)
        with saving_viewer(port, folder / "viewer.rrd"):
            assert main(args) == 0, capsys.readouterr().err
        assert len(read_rrd(folder / "viewer.rrd")["/plan/19"]) == 10
        return
    assert main(args) == 0, capsys.readouterr().err
    written = [word for word in args if word.endswith((".rrd", ".npz", ".vlaobs"))]
    out = folder / written[-1]
    if out.suffix == ".rrd":
        entities = {entity.split("/")[-2] for entity in read_rrd(out) if "/" in entity[1:]}
        assert "camera" in entities and {"plan", "robot"} & entities, sorted(entities)
    elif out.suffix == ".npz":
        assert load_action_chunks(out).shape == (30, 10, 7)  # a chunk per step of the bag
    else:
        assert len(load_observations(out)) == 30


def test_the_python_block_runs_and_logs_the_loop(server_url, folder):
    (code,) = blocks("python")
    code = code.replace("ticks=200", "ticks=40").replace(DOCS_URL, server_url)
    namespace: dict[str, object] = {}
    exec(compile(code, str(PAGE), "exec"), namespace)
    rows = read_rrd(folder / "run.rrd")
    assert len(rows["/robot/state"]) == 40
    assert len(rows["/robot/action"]) == namespace["stats"].applied  # type: ignore[attr-defined]
