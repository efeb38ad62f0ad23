"""Smaller things a new user tripped on (issue 45 item 11), each as the user types it:
``metadata`` prints a summary to read (JSON behind ``--json``), ``vla-client --version``,
``send --print-actions``, ``eval --plot`` says where the plot went, the CUDA ``docker run``
hands over the GPUs, and the ROS 2 bag guide's sample bag is written and replayed."""

from __future__ import annotations

import importlib.util
import json
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from vla_client import __version__
from vla_client.server import LocalServer, ReferencePolicy, ServerConfig, create_app
from vla_client.server.policies import ReachPolicy

ROOT = Path(__file__).resolve().parents[2]
PI05 = ("base_0_rgb", "left_wrist_0_rgb", "right_wrist_0_rgb")


@pytest.fixture(scope="module")
def pi05_url() -> Iterator[str]:
    policy = ReferencePolicy(
        camera_names=PI05, camera_aliases={"wrist": "left_wrist_0_rgb"}, state_dim=8,
        image_size=(96, 128), action_horizon=10, action_dim=8,
    )  # fmt: skip
    with LocalServer(create_app(policy, ServerConfig(in_process=True))) as server:
        yield server.url


def test_metadata_prints_a_summary_to_read(cli, pi05_url) -> None:
    run = cli("metadata", pi05_url, "--camera-map", "front=base_0_rgb", "--resize", "pad")
    assert run.code == 0, run.err
    lines = run.out.splitlines()
    assert lines[0] == f"server         {pi05_url} (vla-client {__version__})"
    assert (
        "cameras        base_0_rgb, left_wrist_0_rgb, right_wrist_0_rgb (aliases: "
        "wrist->left_wrist_0_rgb)"
    ) in lines
    assert "image size     96x128 (height x width); the client resizes: pad" in lines
    assert "state          8 values" in lines
    assert "actions        10 steps x 8 values, float32 continuous" in lines
    assert "camera map     front->base_0_rgb" in lines
    assert lines[-1] == "(--json prints the whole document)"
    assert not run.out.lstrip().startswith("{")


def test_metadata_json_is_the_whole_document(cli, pi05_url) -> None:
    run = cli("metadata", pi05_url, "--json")
    assert run.code == 0, run.err
    document = json.loads(run.out)
    assert document["input"]["image_keys"] == list(PI05)
    assert document["client_checks"]["state_dim"] == 8


def test_version_is_printed() -> None:
    run = subprocess.run(
        [sys.executable, "-m", "vla_client.cli", "--version"],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert (run.returncode, run.stdout, run.stderr) == (0, f"vla-client {__version__}\n", "")


def test_send_prints_the_actions_it_got(cli, pi05_url) -> None:
    run = cli("send", pi05_url, "--repeat", "2", "--print-actions")
    assert run.code == 0, run.err
    lines = run.out.splitlines()
    heading = lines.index("actions of request 2 (10 steps x 8 values):")
    rows = lines[heading + 1 : heading + 11]
    assert [row.split()[0] for row in rows] == [str(step) for step in range(10)]
    printed = np.array([[float(value) for value in row.split()[1:]] for row in rows])
    assert printed.shape == (10, 8) and np.isfinite(printed).all()
    assert "actions of request 1 (10 steps x 8 values):" in lines


def test_send_print_actions_with_json_gives_every_chunk(cli, pi05_url) -> None:
    run = cli("send", pi05_url, "--repeat", "3", "--print-actions", "--json")
    assert run.code == 0, run.err
    document = json.loads(run.out)
    assert np.asarray(document["all_actions"]).shape == (3, 10, 8)


@pytest.mark.skipif(importlib.util.find_spec("matplotlib") is None, reason="needs matplotlib")
def test_eval_plot_says_where_it_wrote_the_plot(cli, tmp_path: Path) -> None:
    plot = tmp_path / "success.png"
    with LocalServer(create_app(ReachPolicy())) as server:
        run = cli("eval", server.url, "--episodes", "1", "--round-trip-ms", "20",
                  "--plot", str(plot))  # fmt: skip
    assert run.code == 0, run.err
    assert run.out.splitlines()[-1] == f"saved plot to {plot}"
    assert plot.read_bytes().startswith(b"\x89PNG")


def test_every_docker_run_of_the_cuda_image_hands_over_the_gpus() -> None:
    runs = [
        line
        for text in ((ROOT / "docs" / "server.md").read_text(), (ROOT / "Dockerfile").read_text())
        for line in text.replace("\\\n", " ").splitlines()
        if "docker run" in line
    ]
    cuda = [line for line in runs if "vla-client:cuda" in line]
    assert len(cuda) == 2, runs  # the guide's and the Dockerfile's
    assert all("--gpus all" in line for line in cuda), cuda


def test_the_bag_guides_sample_bag_is_written_and_replayed(cli, tmp_path, monkeypatch) -> None:
    pytest.importorskip("rosbags")
    page = (ROOT / "docs" / "rerun.md").read_text()
    marker = r"<!-- sample bag: run by tests/cli/test_small_fixes.py -->\n```python\n(.*?)```"
    (snippet,) = re.findall(marker, page, flags=re.S)
    monkeypatch.chdir(tmp_path)
    exec(compile(snippet, "rerun.md", "exec"), {})
    with LocalServer(create_app(ReferencePolicy(), ServerConfig(in_process=True))) as server:
        run = cli("send", server.url, "--bag", "episode", "--topic", "/camera/image_raw=wrist",
                  "--topic", "/joint_states=state", "--save-actions", "would-do.npz")  # fmt: skip
    assert run.code == 0, run.err
    assert run.out.startswith(f"30 request(s) to {server.url}")
    with np.load(tmp_path / "would-do.npz") as saved:
        assert saved["actions"].shape == (30, 16, 7)
