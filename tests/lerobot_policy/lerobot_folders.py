"""Small ACT and Diffusion policies, built from LeRobot's config classes with random weights and
saved as LeRobot saves a trained one (``save_pretrained`` of the policy and of its processors),
and LeRobot's own way to run one step on them: the reference the server must equal.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import torch
from lerobot.async_inference.helpers import raw_observation_to_observation
from lerobot.configs.types import FeatureType, PolicyFeature
from lerobot.datasets.utils import hw_to_dataset_features
from lerobot.policies.act.configuration_act import ACTConfig
from lerobot.policies.diffusion.configuration_diffusion import DiffusionConfig
from lerobot.policies.factory import get_policy_class, make_pre_post_processors
from lerobot.policies.utils import populate_queues

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "server"))
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
import load_test
from serve_process import start_serve

CAMERAS = ("top", "wrist")
IMAGE_SHAPE = (3, 96, 128)
STATE_DIM = 6
ACTION_DIM = 5
ACT_CHUNK = 10
DIFFUSION_STEPS = 8
TORCH_THREADS = 1
"""The torch threads of the server's worker and of the reference: CPU kernels split their sums
by thread, so bit-equal chunks need the same count on both sides."""
WIRES = [("raw", "msgpack"), ("png", "json")]
"""Encodings and wires that are lossless, so that LeRobot sees the pixels the test sent."""


def features() -> tuple[dict[str, PolicyFeature], dict[str, PolicyFeature]]:
    """Two cameras of `IMAGE_SHAPE`, a state of `STATE_DIM`, actions of `ACTION_DIM`."""
    inputs = {
        f"observation.images.{name}": PolicyFeature(type=FeatureType.VISUAL, shape=IMAGE_SHAPE)
        for name in CAMERAS
    }
    inputs["observation.state"] = PolicyFeature(type=FeatureType.STATE, shape=(STATE_DIM,))
    return inputs, {"action": PolicyFeature(type=FeatureType.ACTION, shape=(ACTION_DIM,))}


def act_config() -> ACTConfig:
    """A small ACT (one layer each way, no pretrained backbone) with chunks of `ACT_CHUNK`."""
    inputs, outputs = features()
    return ACTConfig(
        input_features=inputs,
        output_features=outputs,
        chunk_size=ACT_CHUNK,
        n_action_steps=ACT_CHUNK,
        dim_model=64,
        n_heads=2,
        dim_feedforward=128,
        n_encoder_layers=1,
        n_decoder_layers=1,
        latent_dim=8,
        pretrained_backbone_weights=None,
        device="cpu",
    )


def diffusion_config() -> DiffusionConfig:
    """A small Diffusion policy: two observation steps, `DIFFUSION_STEPS` actions per chunk,
    three denoising steps."""
    inputs, outputs = features()
    return DiffusionConfig(
        input_features=inputs,
        output_features=outputs,
        n_obs_steps=2,
        horizon=16,
        n_action_steps=DIFFUSION_STEPS,
        num_inference_steps=3,
        down_dims=(32, 64),
        kernel_size=3,
        n_groups=8,
        diffusion_step_embed_dim=32,
        spatial_softmax_num_keypoints=8,
        crop_shape=(84, 112),
        pretrained_backbone_weights=None,
        use_group_norm=True,
        device="cpu",
    )


def dataset_stats(seed: int = 3) -> dict[str, dict[str, np.ndarray]]:
    """Made-up normalisation statistics (mean/std and min/max) for every feature."""
    rng = np.random.default_rng(seed)
    inputs, outputs = features()
    stats = {}
    for key, feature in {**inputs, **outputs}.items():
        shape = (3, 1, 1) if feature.type is FeatureType.VISUAL else feature.shape
        low = rng.uniform(-2, -1, shape).astype(np.float32)
        stats[key] = {
            "mean": rng.uniform(-0.5, 0.5, shape).astype(np.float32),
            "std": rng.uniform(0.5, 2.0, shape).astype(np.float32),
            "min": low,
            "max": low + rng.uniform(1, 3, shape).astype(np.float32),
        }
    return stats


def save_folder(config: Any, folder: Path, seed: int = 0) -> Path:
    """The policy `config` describes, seeded random weights, saved with its processors."""
    torch.manual_seed(seed)
    policy = get_policy_class(config.type)(config)
    policy.save_pretrained(folder)
    preprocessor, postprocessor = make_pre_post_processors(config, dataset_stats=dataset_stats())
    preprocessor.save_pretrained(folder)
    postprocessor.save_pretrained(folder)
    return folder


def serve(folder: Path) -> Iterator[str]:
    """``vla-client serve --policy lerobot --policy-option path=FOLDER`` on a free port with
    `TORCH_THREADS` threads, its URL once it is ready; stopped afterwards."""
    port = load_test.free_port()
    threads = str(TORCH_THREADS)
    server = start_serve(
        port,
        *("--policy", "lerobot", "--policy-option", f"path={folder}", "--torch-threads", threads),
        timeout_s=240,
    )
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.terminate()
        server.communicate(timeout=30)


class LeRobotReference:
    """The folder loaded the way LeRobot's PolicyServer loads it, and one step run the way
    LeRobot runs it: its raw-observation preparation, the preprocessor, the policy's
    ``predict_action_chunk`` (for Diffusion after filling its observation queues as
    ``select_action`` does at an episode's start) and the postprocessor on every step."""

    def __init__(self, folder: Path) -> None:
        self.policy = _load_policy(folder)
        self.preprocessor, self.postprocessor = make_pre_post_processors(
            self.policy.config, pretrained_path=str(folder)
        )
        hardware: dict[str, Any] = {f"joint_{i}": float for i in range(STATE_DIM)}
        hardware.update({name: (*IMAGE_SHAPE[1:], 3) for name in CAMERAS})
        self.features = hw_to_dataset_features(hardware, "observation", use_video=False)

    def chunk(
        self, frames: dict[str, np.ndarray], state: np.ndarray, seed: int | None = None
    ) -> np.ndarray:
        threads = torch.get_num_threads()
        torch.set_num_threads(TORCH_THREADS)
        try:
            return self._chunk(frames, state, seed)
        finally:
            torch.set_num_threads(threads)

    def _chunk(self, frames: dict[str, np.ndarray], state: np.ndarray, seed: int | None) -> Any:
        raw: dict[str, Any] = dict(frames)
        raw.update({f"joint_{i}": float(v) for i, v in enumerate(state)})
        observation = raw_observation_to_observation(
            raw, self.features, self.policy.config.image_features
        )
        batch = self.preprocessor(observation)
        if self.policy.config.type == "diffusion":
            self.policy.reset()
            batch = {key: value for key, value in batch.items() if key != "action"}
            batch["observation.images"] = torch.stack(
                [batch[key] for key in self.policy.config.image_features], dim=-4
            )
            self.policy._queues = populate_queues(self.policy._queues, batch)
        if seed is not None:
            torch.manual_seed(seed)
        actions = self.policy.predict_action_chunk(batch)
        steps = [self.postprocessor(actions[:, i, :]) for i in range(actions.shape[1])]
        return torch.stack(steps, dim=1).squeeze(0).numpy()


def _load_policy(folder: Path) -> Any:
    policy_type = json.loads((folder / "config.json").read_text())["type"]
    return get_policy_class(policy_type).from_pretrained(str(folder)).eval()


def observation(seed: int = 1) -> tuple[dict[str, np.ndarray], np.ndarray]:
    """Random frames at the policy's size (height, width, 3) and a random state."""
    rng = np.random.default_rng(seed)
    frames = {name: rng.integers(0, 256, (*IMAGE_SHAPE[1:], 3), dtype=np.uint8) for name in CAMERAS}
    return frames, rng.uniform(-1, 1, STATE_DIM).astype(np.float32)
