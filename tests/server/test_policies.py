"""Replay and PyTorch policies, directly and served through the worker layout."""

from __future__ import annotations

import dataclasses
import os
import pickle
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import vla_client
from vla_client.cameras.scene import synthetic_frames
from vla_client.client import ActionClient
from vla_client.errors import ServerError
from vla_client.observation import Observation
from vla_client.server import LocalServer, PolicyInput, ServerConfig, create_app, make_policy
from vla_client.server.policies import ReferencePolicy, ReplayPolicy, TorchCNNPolicy
from vla_client.server.policy import PolicySpec


@pytest.fixture
def recording(tmp_path: Path) -> tuple[Path, np.ndarray]:
    chunks = np.random.default_rng(0).normal(size=(3, 6, 4)).astype(np.float32)
    path = tmp_path / "chunks.npz"
    np.savez(path, actions=chunks)
    return path, chunks


def test_replay_plays_chunks_in_order_and_wraps(recording: tuple[Path, np.ndarray]) -> None:
    path, chunks = recording
    policy = make_policy("replay", path=path)
    assert (policy.spec.action_horizon, policy.spec.action_dim) == (6, 4)
    frames = synthetic_frames(1, 16, 16)
    played = [policy.infer(PolicyInput(images=frames)) for _ in range(4)]
    for got, want in zip(played, [chunks[0], chunks[1], chunks[2], chunks[0]], strict=True):
        np.testing.assert_array_equal(got, want)
    short = policy.infer(PolicyInput(images=frames, action_horizon=2))
    np.testing.assert_array_equal(short, chunks[1][:2])
    with pytest.raises(ValueError, match="longer than the recorded"):
        policy.infer(PolicyInput(images=frames, action_horizon=7))


def test_replay_announces_one_step_its_family_and_the_cameras_given(
    recording: tuple[Path, np.ndarray],
) -> None:
    path, _ = recording
    spec = ReplayPolicy(path).spec
    assert (spec.family, spec.num_inference_steps, spec.camera_names) == ("replay", 1, ())
    assert ReplayPolicy(path, camera_names=("front", "wrist")).spec.camera_names == (
        "front", "wrist"
    )  # fmt: skip


def test_replay_refuses_bad_files(tmp_path: Path) -> None:
    np.save(tmp_path / "flat.npy", np.zeros(5))
    np.savez(tmp_path / "other.npz", nope=np.zeros((1, 2, 2)))
    np.save(tmp_path / "nan.npy", np.full((1, 2, 2), np.nan))
    for name, message in [("flat.npy", "expected numeric"), ("other.npz", "no 'actions'"),
                          ("nan.npy", "NaN"), ("missing.npy", "cannot read")]:  # fmt: skip
        with pytest.raises(ValueError, match=message):
            ReplayPolicy(tmp_path / name)


def test_replay_served_through_the_worker(recording: tuple[Path, np.ndarray]) -> None:
    path, chunks = recording
    frames = synthetic_frames(2, 36, 64)
    with (
        LocalServer(create_app(ReplayPolicy(path))) as server,
        ActionClient(server.url, encoding="png") as client,
    ):
        results = [client.infer(Observation(images=frames)).actions for _ in range(2)]
    np.testing.assert_allclose(results[0], chunks[0])
    np.testing.assert_allclose(results[1], chunks[1])


def test_server_import_does_not_import_torch() -> None:
    code = (
        "import sys, vla_client.server as s; s.make_policy('torch'); print('torch' in sys.modules)"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    )
    assert result.stdout.strip() == "False"


torch = pytest.importorskip("torch")


def observations(n: int) -> list[PolicyInput]:
    return [
        PolicyInput(images=synthetic_frames(3, 72, 128, seed=i), state=np.full(3, i, np.float32))
        for i in range(n)
    ]


def test_torch_policy_is_deterministic_and_batches_like_single_calls() -> None:
    policy = TorchCNNPolicy(state_dim=3, device="cpu")
    clone = pickle.loads(pickle.dumps(policy))
    assert clone._model is None, "pickling must carry settings, not the network"
    policy.load()
    clone.load()
    batch = policy.infer_batch(observations(3))
    singles = [clone.infer(o) for o in observations(3)]
    for got, want in zip(batch, singles, strict=True):
        assert got.shape == (16, 7) and got.dtype == np.float32
        np.testing.assert_allclose(got, want, atol=1e-5)
    assert not np.allclose(batch[0], batch[1]), "different observations, different chunks"


def test_torch_policy_loads_weights_from_a_local_file(tmp_path: Path) -> None:
    trained = TorchCNNPolicy(seed=7, device="cpu")
    trained.load()
    path = tmp_path / "weights.pt"
    torch.save(trained._model.state_dict(), path)
    from_file = TorchCNNPolicy(weights=path, seed=0, device="cpu")
    from_file.load()
    seeded_otherwise = TorchCNNPolicy(seed=0, device="cpu")
    seeded_otherwise.load()
    obs = observations(1)
    np.testing.assert_allclose(from_file.infer(obs[0]), trained.infer(obs[0]), atol=1e-6)
    assert not np.allclose(from_file.infer(obs[0]), seeded_otherwise.infer(obs[0]))


def test_torch_policy_served_through_the_worker() -> None:
    frames = synthetic_frames(3, 90, 160)
    direct = TorchCNNPolicy(device="cpu")
    direct.load()
    want = direct.infer(PolicyInput(images=frames, action_horizon=4))
    with (
        LocalServer(create_app(TorchCNNPolicy(device="cpu"))) as server,
        ActionClient(server.url, encoding="raw", wire="msgpack") as client,
    ):
        got = client.infer(Observation(images=frames), action_horizon=4).actions
    np.testing.assert_allclose(got, want, atol=1e-5)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_torch_policy_on_cuda_matches_cpu() -> None:
    cpu, cuda = TorchCNNPolicy(device="cpu"), TorchCNNPolicy(device="cuda")
    cpu.load()
    cuda.load()
    for got, want in zip(
        cuda.infer_batch(observations(4)), cpu.infer_batch(observations(4)), strict=True
    ):
        np.testing.assert_allclose(got, want, atol=1e-3)


def test_the_torch_policy_reads_shared_memory_without_a_warning() -> None:
    pytest.importorskip("torch")
    # torch warns once per process, so a fresh one: the worker's frames are read-only views.
    code = (
        "import numpy as np\n"
        "from vla_client.server import PolicyInput\n"
        "from vla_client.server.policies.torch_cnn import TorchCNNPolicy\n"
        "frame = np.zeros((48, 64, 3), np.uint8)\n"
        "frame.flags.writeable = False\n"
        "policy = TorchCNNPolicy(device='cpu')\n"
        "policy.load()\n"
        "print(policy.infer(PolicyInput(images={'a': frame})).shape)\n"
    )
    env = {**os.environ, "PYTHONPATH": str(Path(vla_client.__file__).resolve().parents[1])}
    done = subprocess.run(
        [sys.executable, "-W", "error", "-c", code], capture_output=True, text=True, env=env,
        timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout == "(16, 7)\n"
    assert "not writable" not in done.stderr


class _NeedsState(ReferencePolicy):
    """The reference policy, announcing a state of 3 values it cannot go without."""

    @property
    def spec(self) -> PolicySpec:
        return dataclasses.replace(super().spec, state_required=True)


def test_a_policy_that_requires_a_state_refuses_a_request_without_one() -> None:
    frames = synthetic_frames(1, 32, 32, seed=2)
    with (
        LocalServer(create_app(_NeedsState(state_dim=3), ServerConfig(in_process=True))) as server,
        ActionClient(server.url, check_contract=False) as client,
    ):
        with pytest.raises(ServerError, match="needs a state of 3 values") as refused:
            client.infer(Observation(frames))
        served = client.infer(Observation(frames, state=[0.1, 0.2, 0.3]))
    assert refused.value.status_code == 400
    assert served.actions.shape == (16, 7)
