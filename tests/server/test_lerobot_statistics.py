"""A LeRobot folder whose processors lack statistics for a feature its ``config.json``
normalises is refused at start, in one line; checked on folders written here in LeRobot's
saved layout (``save_pretrained`` of the policy and its processors), without lerobot or torch.

The case found: ``config.json`` renamed a camera (``top`` to ``front``) while the normaliser's
statistics stayed under ``top``. LeRobot's normaliser passes a feature it has no statistics
for through untouched, so the server loaded, served, and fed that camera un-normalised.
"""

from __future__ import annotations

import json
import os
import struct
import subprocess
import sys
from pathlib import Path

import pytest

import vla_client

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
from load_test import free_port

from vla_client.errors import PolicyLoadError
from vla_client.server.policies.lerobot import LeRobotPolicy

CAMERAS = {"observation.images.top": [3, 96, 128], "observation.images.wrist": [3, 96, 128]}
MODES = {"VISUAL": "MEAN_STD", "STATE": "MEAN_STD", "ACTION": "MEAN_STD"}


def safetensors(path: Path, names: list[str]) -> None:
    """A safetensors file of one float32 per name (its format: a little-endian u64 header
    length, the JSON header, the data)."""
    header = {name: {"dtype": "F32", "shape": [1], "data_offsets": [4 * i, 4 * i + 4]}
              for i, name in enumerate(names)}  # fmt: skip
    text = json.dumps(header).encode()
    path.write_bytes(struct.pack("<Q", len(text)) + text + bytes(4 * len(names)))


def features(cameras: dict[str, list[int]]) -> dict[str, dict[str, object]]:
    table: dict[str, dict[str, object]] = {
        key: {"type": "VISUAL", "shape": shape} for key, shape in cameras.items()
    }
    table["observation.state"] = {"type": "STATE", "shape": [6]}
    return table


def processor(folder: Path, file: str, step: str, table: dict[str, dict[str, object]]) -> None:
    state_file = file.replace(".json", f"_step_1_{step}.safetensors")
    safetensors(folder / state_file, [f"{key}.{stat}" for key in table for stat in ("mean", "std")])
    steps = [
        {"registry_name": "device_processor", "config": {"device": "cpu"}},
        {"registry_name": step, "config": {"eps": 1e-8, "features": table, "norm_map": MODES},
         "state_file": state_file},
    ]  # fmt: skip
    (folder / file).write_text(json.dumps({"name": file.removesuffix(".json"), "steps": steps}))


def lerobot_folder(folder: Path, *, config_cameras: dict[str, list[int]] = CAMERAS) -> Path:
    """An ACT folder as LeRobot saves it; `config_cameras` are the cameras config.json says
    (the processors keep `CAMERAS`)."""
    folder.mkdir()
    config = {
        "type": "act",
        "chunk_size": 10,
        "input_features": features(config_cameras),
        "output_features": {"action": {"type": "ACTION", "shape": [5]}},
        "normalization_mapping": MODES,
    }
    (folder / "config.json").write_text(json.dumps(config))
    safetensors(folder / "model.safetensors", ["weight"])
    action = {"action": {"type": "ACTION", "shape": [5]}}
    processor(folder, "policy_preprocessor.json", "normalizer_processor",
              {**features(CAMERAS), **action})  # fmt: skip
    processor(folder, "policy_postprocessor.json", "unnormalizer_processor", action)
    return folder


def test_a_consistent_folder_is_served(tmp_path: Path) -> None:
    policy = LeRobotPolicy(path=str(lerobot_folder(tmp_path / "act")))
    assert set(policy.spec.camera_names) == {"top", "wrist"}


def test_a_camera_renamed_in_config_only_is_refused_naming_it(tmp_path: Path) -> None:
    renamed = {"observation.images.front": [3, 96, 128], "observation.images.wrist": [3, 96, 128]}
    folder = lerobot_folder(tmp_path / "act", config_cameras=renamed)
    with pytest.raises(PolicyLoadError) as error:
        LeRobotPolicy(path=str(folder))
    message = str(error.value)
    assert "\n" not in message
    assert "config.json normalises observation.images.front (MEAN_STD)" in message
    assert "policy_preprocessor.json holds no statistics for it" in message
    assert "'observation.images.top'" in message, "says what the statistics are for"


def test_actions_without_statistics_in_the_postprocessor_are_refused(tmp_path: Path) -> None:
    folder = lerobot_folder(tmp_path / "act")
    processor(folder, "policy_postprocessor.json", "unnormalizer_processor", {})
    with pytest.raises(PolicyLoadError, match=r"normalises action \(MEAN_STD\) but policy_post"):
        LeRobotPolicy(path=str(folder))


def test_a_processor_without_its_normaliser_is_refused(tmp_path: Path) -> None:
    folder = lerobot_folder(tmp_path / "act")
    (folder / "policy_preprocessor.json").write_text(json.dumps({"steps": []}))
    with pytest.raises(PolicyLoadError, match="has no readable normalizer_processor step"):
        LeRobotPolicy(path=str(folder))


def test_features_left_unnormalised_need_no_statistics(tmp_path: Path) -> None:
    folder = lerobot_folder(tmp_path / "act")
    config = json.loads((folder / "config.json").read_text())
    config["input_features"]["observation.images.front"] = {"type": "VISUAL", "shape": [3, 96, 128]}
    config["normalization_mapping"] = {**MODES, "VISUAL": "IDENTITY"}
    (folder / "config.json").write_text(json.dumps(config))
    assert "front" in LeRobotPolicy(path=str(folder)).spec.camera_names


def test_serve_refuses_the_folder_with_one_line(tmp_path: Path) -> None:
    renamed = {"observation.images.front": [3, 96, 128], "observation.images.wrist": [3, 96, 128]}
    folder = lerobot_folder(tmp_path / "act", config_cameras=renamed)
    source = str(Path(vla_client.__file__).resolve().parents[1])
    done = subprocess.run(
        [sys.executable, "-m", "vla_client.cli", "serve", "--port", str(free_port()),
         "--policy", "lerobot", "--policy-option", f"path={folder}"],
        capture_output=True, text=True, timeout=120,
        env={**os.environ, "PYTHONPATH": source},
    )  # fmt: skip
    assert done.returncode == 2, "a usage error, before anything starts"
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "observation.images.front" in lines[0], done.stderr
