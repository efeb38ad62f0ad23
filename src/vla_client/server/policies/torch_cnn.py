"""A small PyTorch policy (extra ``torch``): a compact CNN image encoder and an MLP head.

It stands in for a real VLA model where the serving path matters more than the answers: it
takes any number of cameras at any size, batches requests into one forward pass and returns
``[H, D]`` chunks. Weights are fixed-seed random (deterministic across runs) or a local
``state_dict`` file; nothing is downloaded.

The device path is the one a real engine uses: uint8 frames go to pinned host memory, reach the
GPU with non-blocking copies and are converted and normalised there, so the host never touches
float pixels. On the CPU the same code runs without pinning. torch is imported in `load()`,
which the worker calls, so the entrypoint never imports it.

JPEG frames can be decoded on the GPU instead of at the entrypoint (`jpeg_decode`): ``auto``
does so when the policy runs on CUDA and a GPU decoder is installed (see
`vla_client.server.engine.device_decode`), ``worker`` always hands them to the policy (decoded
on the CPU of the worker where no GPU decoder is), ``entrypoint`` never. The replies' timings say
what ran: ``decode_cuda_ms`` or ``decode_cpu_ms`` for frames the policy decoded; neither when
the entrypoint decoded them (inside ``preprocess_ms``).
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from vla_client.server.engine.device_decode import FrameDecoder, frame_decoder
from vla_client.server.policy import Policy, PolicyInput, PolicySpec
from vla_client.validation import check_choice

INPUT_SIZE = 96
FEATURES = 64
JPEG_DECODE = ("auto", "worker", "entrypoint")


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
        jpeg_decode: str = "auto",
    ) -> None:
        check_choice("jpeg_decode", jpeg_decode, JPEG_DECODE)
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
        self.jpeg_decode = jpeg_decode
        self._model: Any = None
        self._device: Any = None
        self._decoder: FrameDecoder | None = None
        self._timings: dict[str, float] = {}
        # Pinned staging buffers by (shape, position in the batch): each frame of a batch needs
        # its own, since the copies to the device are still running while the next is staged.
        self._pinned: dict[tuple[tuple[int, ...], int], Any] = {}
        self._staged = 0

    @property
    def spec(self) -> PolicySpec:
        return self._spec

    def __getstate__(self) -> dict[str, Any]:
        """Settings only: the worker builds the model itself in `load()`."""
        return {**self.__dict__, "_model": None, "_device": None, "_pinned": {}, "_decoder": None}

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
        self._decoder = frame_decoder(self._device)

    def warm_up(self, example: PolicyInput) -> None:
        """One forward pass, so kernels are chosen and memory allocated before serving."""
        self.infer_batch([example])

    def decodes_jpeg(self) -> bool:
        """As `jpeg_decode` says: ``auto`` only on CUDA with a GPU decoder installed."""
        on_gpu = self._decoder is not None and self._decoder.path == "cuda"
        return self.jpeg_decode == "worker" or (self.jpeg_decode == "auto" and on_gpu)

    def batch_timings(self) -> Mapping[str, float]:
        return self._timings

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
            decoded = self._decode_jpegs(observations)
            features = torch.stack(
                [self._camera_features(o, index, decoded) for index, o in enumerate(observations)]
            )
            if spec.state_dim is not None:
                states = torch.stack([self._state(o) for o in observations])
                features = torch.cat([features, states], dim=1)
            actions = self._model.head(features).view(-1, spec.action_horizon, spec.action_dim)
            chunks = actions.float().cpu().numpy()
        return [
            chunk[: o.action_horizon or spec.action_horizon]
            for chunk, o in zip(chunks, observations, strict=True)
        ]

    def _decode_jpegs(self, observations: Sequence[PolicyInput]) -> dict[tuple[int, str], Any]:
        """The batch's JPEG frames (1-D arrays) decoded in one call, on the device where it can;
        the time it took goes to `batch_timings` under the decoder's path."""
        import torch

        self._timings = {}
        keys = [
            (index, name)
            for index, observation in enumerate(observations)
            for name, frame in observation.images.items()
            if frame.ndim == 1
        ]
        if not keys:
            return {}
        assert self._decoder is not None
        start = time.perf_counter()
        tensors = self._decoder([observations[index].images[name] for index, name in keys])
        if self._device.type == "cuda":
            torch.cuda.synchronize(self._device)  # so the time is the decode's own
        self._timings = {f"decode_{self._decoder.path}_ms": (time.perf_counter() - start) * 1000}
        return dict(zip(keys, tensors, strict=True))

    def _camera_features(
        self, observation: PolicyInput, index: int, decoded: dict[tuple[int, str], Any]
    ) -> Any:
        import torch
        import torch.nn.functional as functional

        names = sorted(observation.images)
        on_device = [
            decoded[index, name]  # decoded from JPEG, already on the device
            if (index, name) in decoded
            else self._to_device(observation.images[name])
            for name in names
        ]
        pixels = [
            functional.interpolate(
                frame.permute(2, 0, 1)[None].float() / 255.0,
                size=(INPUT_SIZE, INPUT_SIZE),
                mode="bilinear",
                antialias=False,
                align_corners=False,
            )
            for frame in on_device
        ]
        encoded = self._model.encoder(torch.cat(pixels))
        return encoded.mean(dim=0)

    def _to_device(self, frame: np.ndarray) -> Any:
        import torch

        if self._device.type != "cuda":
            # In the worker the frame is a read-only view of shared memory. The tensor is only
            # read (the caller's `.float()` copies it), so torch's warning that writing to it
            # would be undefined, printed once into every CPU server's log, does not apply.
            with warnings.catch_warnings():
                warnings.filterwarnings("ignore", "The given NumPy array is not writable")
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
