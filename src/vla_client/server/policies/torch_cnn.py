"""A small PyTorch policy (extra ``torch``): a compact CNN image encoder and an MLP head.

It stands in for a real VLA model where the serving path matters more than the answers: it
takes any number of cameras at any size, batches requests into one forward pass and returns
``[H, D]`` chunks. Weights are fixed-seed random (deterministic across runs) or a local
``state_dict`` file; nothing is downloaded.

The device path is the one a real engine uses: uint8 frames go to pinned host memory, reach the
GPU with non-blocking copies and are converted and normalised there, so the host never touches
float pixels. On the CPU the same code runs without pinning. torch is imported in `load()`,
which the worker calls, so the entrypoint never imports it.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from vla_client.server.policy import Policy, PolicyInput, PolicySpec

INPUT_SIZE = 96
FEATURES = 64


class TorchCNNPolicy(Policy):
    """A small PyTorch CNN (extra torch), batched, on the GPU when there is one.

    CNN per camera, features averaged over cameras, state appended, MLP to ``H * D``.
    """

    def __init__(
        self,
        *,
        action_horizon: int = 16,
        action_dim: int = 7,
        camera_names: tuple[str, ...] = (),
        state_dim: int | None = None,
        weights: str | Path | None = None,
        seed: int = 0,
        device: str = "auto",
    ) -> None:
        self._spec = PolicySpec(
            family="torch-cnn",
            action_horizon=action_horizon,
            action_dim=action_dim,
            camera_names=camera_names,
            image_size=(INPUT_SIZE, INPUT_SIZE),
            state_dim=state_dim,
            num_inference_steps=1,
        )
        self.weights = Path(weights) if weights is not None else None
        self.seed = seed
        self.device_name = device
        self._model: Any = None
        self._device: Any = None
        # Pinned staging buffers by (shape, position in the batch): each frame of a batch needs
        # its own, since the copies to the device are still running while the next is staged.
        self._pinned: dict[tuple[tuple[int, ...], int], Any] = {}
        self._staged = 0

    @property
    def spec(self) -> PolicySpec:
        return self._spec

    def __getstate__(self) -> dict[str, Any]:
        """Settings only: the worker builds the model itself in `load()`."""
        return {**self.__dict__, "_model": None, "_device": None, "_pinned": {}}

    def load(self) -> None:
        """Build the network (seeded or from `weights`) on the chosen device."""
        import torch

        self._device = torch.device(
            ("cuda" if torch.cuda.is_available() else "cpu")
            if self.device_name == "auto"
            else self.device_name
        )
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(self.seed)
            model = build_network(self._spec)
        if self.weights is not None:
            state = torch.load(self.weights, map_location="cpu", weights_only=True)
            model.load_state_dict(state)
        self._model = model.to(self._device).eval()

    def infer(self, observation: PolicyInput) -> np.ndarray:
        return self.infer_batch([observation])[0]

    def infer_batch(self, observations: Sequence[PolicyInput]) -> list[np.ndarray]:
        import torch

        if self._model is None:
            self.load()
        spec = self._spec
        self._staged = 0
        if len(self._pinned) > 256:
            self._pinned.clear()
        with torch.inference_mode():
            features = torch.stack([self._camera_features(o) for o in observations])
            if spec.state_dim is not None:
                states = torch.stack([self._state(o) for o in observations])
                features = torch.cat([features, states], dim=1)
            actions = self._model.head(features).view(-1, spec.action_horizon, spec.action_dim)
            chunks = actions.float().cpu().numpy()
        return [
            chunk[: o.action_horizon or spec.action_horizon]
            for chunk, o in zip(chunks, observations, strict=True)
        ]

    def _camera_features(self, observation: PolicyInput) -> Any:
        import torch
        import torch.nn.functional as functional

        names = sorted(observation.images)
        pixels = [
            functional.interpolate(
                self._to_device(observation.images[name]).permute(2, 0, 1)[None].float() / 255.0,
                size=(INPUT_SIZE, INPUT_SIZE),
                mode="bilinear",
                antialias=False,
                align_corners=False,
            )
            for name in names
        ]
        encoded = self._model.encoder(torch.cat(pixels))
        return encoded.mean(dim=0)

    def _to_device(self, frame: np.ndarray) -> Any:
        import torch

        if self._device.type != "cuda":
            return torch.from_numpy(np.ascontiguousarray(frame))
        key = (frame.shape, self._staged)
        self._staged += 1
        staging = self._pinned.get(key)
        if staging is None:
            staging = torch.empty(frame.shape, dtype=torch.uint8, pin_memory=True)
            self._pinned[key] = staging
        staging.numpy()[...] = frame
        return staging.to(self._device, non_blocking=True)

    def _state(self, observation: PolicyInput) -> Any:
        import torch

        dim = self._spec.state_dim or 0
        state = np.zeros(dim, np.float32)
        if observation.state is not None:
            values = observation.state.reshape(-1)[:dim]
            state[: values.size] = values
        return torch.from_numpy(state).to(self._device)

    def close(self) -> None:
        self._model = None
        self._pinned.clear()


def build_network(spec: PolicySpec) -> Any:
    """The untrained network for `spec`: ``.encoder`` (images) and ``.head`` (features)."""
    from torch import nn

    encoder = nn.Sequential(
        nn.Conv2d(3, 16, 5, stride=2, padding=2), nn.ReLU(),
        nn.Conv2d(16, 32, 3, stride=2, padding=1), nn.ReLU(),
        nn.Conv2d(32, FEATURES, 3, stride=2, padding=1), nn.ReLU(),
        nn.AdaptiveAvgPool2d(1), nn.Flatten(),
    )  # fmt: skip
    head = nn.Sequential(
        nn.Linear(FEATURES + (spec.state_dim or 0), 128), nn.ReLU(),
        nn.Linear(128, spec.action_horizon * spec.action_dim), nn.Tanh(),
    )  # fmt: skip
    return nn.ModuleDict({"encoder": encoder, "head": head})
