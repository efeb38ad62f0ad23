"""`vla-client serve --policy lerobot --policy-option path=DIR` for an ACT folder, against
LeRobot itself: a real server on 127.0.0.1 serving a small ACT (random weights, saved with
``save_pretrained``), the real `ActionClient`, and LeRobot's own steps on the same observation as
the reference, which the served chunk must equal exactly; and the folders that are refused.
(Diffusion: test_lerobot_diffusion.py, a module of its own so that one server runs at a time.)"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import lerobot_folders as folders
import numpy as np
import pytest

import vla_client
from vla_client import ActionClient, Observation
from vla_client.cli import main
from vla_client.errors import PolicyLoadError, ServerError
from vla_client.server.policies.lerobot import LeRobotPolicy

pytestmark = pytest.mark.timeout(300)  # a server start loads torch and lerobot in its worker


@pytest.fixture(scope="module")
def act_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return folders.save_folder(folders.act_config(), tmp_path_factory.mktemp("act"))


@pytest.fixture(scope="module")
def act_reference(act_folder: Path) -> folders.LeRobotReference:
    return folders.LeRobotReference(act_folder)


@pytest.fixture(scope="module")
def act_url(act_folder: Path) -> Iterator[str]:
    yield from folders.serve(act_folder)


@pytest.mark.parametrize(("encoding", "wire"), folders.WIRES)
def test_an_act_chunk_equals_lerobots_own(
    act_url: str, act_reference: folders.LeRobotReference, encoding: str, wire: str
) -> None:
    frames, state = folders.observation(seed=1)
    with ActionClient(act_url, encoding=encoding, wire=wire, timeout_s=60) as client:
        result = client.infer(Observation(frames, state=state))
    expected = act_reference.chunk(frames, state)
    assert expected.shape == (folders.ACT_CHUNK, folders.ACTION_DIM)
    assert result.actions.dtype == np.float32
    assert np.array_equal(result.actions, expected)
    assert result.timings.server["model_ms"] > 0


def test_frames_of_another_size_are_resized_as_lerobot_resizes_them(
    act_url: str, act_reference: folders.LeRobotReference
) -> None:
    rng = np.random.default_rng(4)
    frames = {name: rng.integers(0, 256, (120, 160, 3), dtype=np.uint8) for name in folders.CAMERAS}
    state = rng.uniform(-1, 1, folders.STATE_DIM).astype(np.float32)
    with ActionClient(act_url, encoding="raw", wire="msgpack", resize="none") as client:
        result = client.infer(Observation(frames, state=state))
    expected = act_reference.chunk(frames, state)
    assert np.array_equal(result.actions, expected)


def test_lerobots_camera_keys_are_taken_as_aliases(
    act_url: str, act_reference: folders.LeRobotReference
) -> None:
    frames, state = folders.observation(seed=2)
    keyed = {f"observation.images.{name}": frame for name, frame in frames.items()}
    with ActionClient(act_url, encoding="raw", wire="msgpack") as client:
        result = client.infer(Observation(keyed, state=state))
    assert np.array_equal(result.actions, act_reference.chunk(frames, state))


def test_a_shorter_horizon_is_the_chunks_first_steps(
    act_url: str, act_reference: folders.LeRobotReference
) -> None:
    frames, state = folders.observation(seed=3)
    with ActionClient(act_url, encoding="raw", wire="msgpack") as client:
        result = client.infer(Observation(frames, state=state), action_horizon=4)
    expected = act_reference.chunk(frames, state)
    assert np.array_equal(result.actions, expected[:4])


def test_the_metadata_says_what_config_json_says(act_url: str, act_folder: Path) -> None:
    with ActionClient(act_url) as client:
        metadata = client.metadata()
    assert metadata.input.image_keys == list(folders.CAMERAS)
    assert metadata.input.camera_aliases == {
        f"observation.images.{name}": name for name in folders.CAMERAS
    }
    assert metadata.input.image_size == list(folders.IMAGE_SHAPE[1:])
    assert metadata.input.image_size_required is False
    assert metadata.input.state_dim == folders.STATE_DIM
    assert metadata.output.action_dim == folders.ACTION_DIM
    assert metadata.output.action_horizon == folders.ACT_CHUNK
    assert metadata.policy_family == "lerobot"
    assert metadata.policy == {"type": "act", "path": str(act_folder.resolve())}


def test_reading_the_spec_imports_neither_torch_nor_lerobot(act_folder: Path) -> None:
    script = (
        "import sys\n"
        "from vla_client.server.policies import make_policy\n"
        "from vla_client.server.policy import metadata_document\n"
        f"policy = make_policy('lerobot', path={str(act_folder)!r})\n"
        "document = metadata_document(policy.spec, model='m')\n"
        "assert document['output']['action_horizon'] == 10, document\n"
        "print(sorted(m for m in ('torch', 'lerobot') if m in sys.modules))\n"
    )
    source = str(Path(vla_client.__file__).resolve().parents[1])
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([source, os.environ.get("PYTHONPATH", "")])}
    found = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True, env=env
    ).stdout
    assert found.strip() == "[]"


def test_a_bad_folder_stops_serve_with_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = tmp_path / "nowhere"
    code = main(["serve", "--policy", "lerobot", "--policy-option", f"path={missing}"])
    err = capsys.readouterr().err
    assert code == 2
    assert err.count("\n") == 1, err
    assert f"LeRobot policy folder {missing} is not a directory" in err


def _copy(folder: Path, target: Path, **changes: object) -> Path:
    """`folder`'s files in `target`, with `changes` made to its config.json."""
    target.mkdir()
    for path in folder.iterdir():
        (target / path.name).write_bytes(path.read_bytes())
    config = json.loads((folder / "config.json").read_text())
    config.update(changes)
    (target / "config.json").write_text(json.dumps(config))
    return target


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"type": "pi0"}, "policy type 'pi0' is not served; served: act, diffusion"),
        (
            {"input_features": {"observation.state": {"type": "STATE", "shape": [6]}}},
            "input_features has no VISUAL feature",
        ),
        ({"chunk_size": 0}, "chunk_size must be a positive integer"),
        (
            {"output_features": {}},
            "output_features needs 'action' of shape",
        ),
    ],
)
def test_a_config_that_cannot_be_served_is_refused_with_one_line(
    act_folder: Path, tmp_path: Path, changes: dict[str, object], message: str
) -> None:
    folder = _copy(act_folder, tmp_path / "changed", **changes)
    with pytest.raises(PolicyLoadError, match=re.escape(message)) as raised:
        LeRobotPolicy(path=str(folder))
    assert "\n" not in str(raised.value)


def test_a_folder_without_its_processors_is_refused(act_folder: Path, tmp_path: Path) -> None:
    folder = _copy(act_folder, tmp_path / "bare")
    (folder / "policy_postprocessor.json").unlink()
    with pytest.raises(PolicyLoadError, match=re.escape("lacks policy_postprocessor.json")):
        LeRobotPolicy(path=str(folder))


@pytest.mark.parametrize("path", [5, "", None])
def test_a_path_that_is_not_a_folders_is_refused(path: object) -> None:
    with pytest.raises(PolicyLoadError, match="path must be a folder's path"):
        LeRobotPolicy(path=path)  # type: ignore[arg-type]


def test_an_unknown_device_is_refused(act_folder: Path) -> None:
    with pytest.raises(ValueError, match="device"):
        LeRobotPolicy(path=str(act_folder), device="tpu")


def test_a_request_without_the_state_is_refused_and_the_server_serves_on(
    act_url: str, act_reference: folders.LeRobotReference
) -> None:
    frames, state = folders.observation(seed=6)
    with ActionClient(act_url, encoding="raw", wire="msgpack", check_contract=False) as client:
        with pytest.raises(ServerError, match="needs a state of 6 values") as refused:
            client.infer(Observation(frames))
        result = client.infer(Observation(frames, state=state))
    assert refused.value.status_code == 400
    assert np.array_equal(result.actions, act_reference.chunk(frames, state))
