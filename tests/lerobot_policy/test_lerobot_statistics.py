"""A folder LeRobot saved, then edited so that ``config.json`` names a camera the processors'
statistics do not (``top`` renamed ``front`` in the config only): `serve` refuses it at start
with one line. Before, it loaded and served, feeding that camera un-normalised (chunks off by
up to 0.08 on a range of 2.2). The unedited folders pass the same check (the server's own
tests of it, in tests/server/test_lerobot_statistics.py, write the files without lerobot)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from lerobot_folders import act_config, diffusion_config, save_folder

import vla_client
from vla_client.server.policies.lerobot import read_folder

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
from load_test import free_port


@pytest.mark.parametrize("make", [act_config, diffusion_config], ids=["act", "diffusion"])
def test_a_camera_renamed_in_config_json_only_stops_serve_with_one_line(
    make: object, tmp_path: Path
) -> None:
    folder = save_folder(make(), tmp_path / "policy")  # type: ignore[operator]
    assert read_folder(folder).cameras == ("top", "wrist"), "as saved, the folder is served"
    config_path = folder / "config.json"
    config = json.loads(config_path.read_text())
    features = config["input_features"]
    features["observation.images.front"] = features.pop("observation.images.top")
    config_path.write_text(json.dumps(config))
    source = str(Path(vla_client.__file__).resolve().parents[1])
    path = os.pathsep.join([source, os.environ.get("PYTHONPATH", "")])
    done = subprocess.run(
        [sys.executable, "-m", "vla_client.cli", "serve", "--port", str(free_port()),
         "--policy", "lerobot", "--policy-option", f"path={folder}"],
        capture_output=True, text=True, timeout=120, env={**os.environ, "PYTHONPATH": path},
    )  # fmt: skip
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert "observation.images.front" in lines[0] and "policy_preprocessor.json" in lines[0]
