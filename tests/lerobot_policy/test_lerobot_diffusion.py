"""`vla-client serve --policy lerobot` for a Diffusion folder: each request served as an
episode's first step, its chunk equal to LeRobot's own (the observation queues filled as
``select_action`` fills them, then ``predict_action_chunk`` and the postprocessor) under the
same seed."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import lerobot_folders as folders
import numpy as np
import pytest

from vla_client import ActionClient, Observation
from vla_client.server.policies.lerobot import LeRobotPolicy

pytestmark = pytest.mark.timeout(300)  # a server start loads torch and lerobot in its worker


@pytest.fixture(scope="module")
def diffusion_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return folders.save_folder(folders.diffusion_config(), tmp_path_factory.mktemp("diffusion"))


@pytest.fixture(scope="module")
def diffusion_reference(diffusion_folder: Path) -> folders.LeRobotReference:
    return folders.LeRobotReference(diffusion_folder)


@pytest.fixture(scope="module")
def diffusion_url(diffusion_folder: Path) -> Iterator[str]:
    yield from folders.serve(diffusion_folder)


@pytest.mark.parametrize(("encoding", "wire"), folders.WIRES)
def test_a_diffusion_chunk_equals_lerobots_own_with_the_same_seed(
    diffusion_url: str, diffusion_reference: folders.LeRobotReference, encoding: str, wire: str
) -> None:
    frames, state = folders.observation(seed=5)
    with ActionClient(diffusion_url, encoding=encoding, wire=wire, timeout_s=60) as client:
        first = client.infer(Observation(frames, state=state), seed=11)
        again = client.infer(Observation(frames, state=state), seed=11)
        other = client.infer(Observation(frames, state=state), seed=12)
    expected = diffusion_reference.chunk(frames, state, seed=11)
    assert expected.shape == (folders.DIFFUSION_STEPS, folders.ACTION_DIM)
    assert np.array_equal(first.actions, expected)
    # Each request starts an episode: the queues hold only its own observation, so the same
    # seed gives the same chunk however many requests came before; another seed another one.
    assert np.array_equal(again.actions, expected)
    assert not np.array_equal(other.actions, expected)


def test_diffusions_horizon_is_its_n_action_steps(diffusion_folder: Path) -> None:
    spec = LeRobotPolicy(path=str(diffusion_folder)).spec
    assert (spec.action_horizon, spec.num_inference_steps) == (folders.DIFFUSION_STEPS, 3)
    assert spec.about == {"type": "diffusion", "path": str(diffusion_folder.resolve())}
