"""The boundary between serving and inference: a `Policy` sees arrays, never wire formats.

By the time a policy runs, the entrypoint has decoded every image to an HxWx3 uint8 RGB array
and validated the state and parameters. A policy declares what it expects (`PolicySpec`, which
becomes the metadata document) and maps a batch of `PolicyInput`s to action chunks.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np


@dataclass(frozen=True)
class PolicyInput:
    """One observation as a policy receives it: arrays and plain values only."""

    images: dict[str, np.ndarray]
    state: np.ndarray | None = None
    task: str = ""
    action_horizon: int | None = None
    num_inference_steps: int | None = None
    seed: int | None = None


@dataclass(frozen=True)
class PolicySpec:
    """What a policy takes and gives.

    `camera_names` empty means any camera names are accepted; `camera_aliases` maps other names
    a client may use (LeRobot's, say) to them. `image_size` is (height, width): with
    `image_size_required` frames of another size are refused, without it the size is only
    announced, for clients that resize before sending.
    """

    family: str
    action_horizon: int
    action_dim: int
    camera_names: tuple[str, ...] = ()
    image_size: tuple[int, int] | None = None
    state_dim: int | None = None
    num_inference_steps: int | None = None
    extra_capabilities: dict[str, Any] = field(default_factory=dict)
    camera_aliases: dict[str, str] = field(default_factory=dict)
    image_size_required: bool = False


class Policy(ABC):
    """A policy served by the reference server."""

    @property
    @abstractmethod
    def spec(self) -> PolicySpec:
        """What this policy expects and returns."""

    @abstractmethod
    def infer(self, observation: PolicyInput) -> np.ndarray:
        """One float32 action chunk ``[H, D]`` for one observation."""

    def infer_batch(self, observations: Sequence[PolicyInput]) -> list[np.ndarray]:
        """Chunks for several observations; policies that batch on a device override this."""
        return [self.infer(observation) for observation in observations]

    def close(self) -> None:  # noqa: B027 - optional hook, most policies hold nothing
        """Release resources (device memory, files)."""


def metadata_document(
    spec: PolicySpec, *, model: str, websockets: bool = True, openpi_layout: str = "flat"
) -> dict[str, Any]:
    """The GET /v1/actions/metadata body for `spec` (SGLang's generic layout); `websockets`
    says whether the server also serves the realtime and openpi websockets, `openpi_layout`
    which request layout its openpi endpoint reads."""
    return {
        "object": "action.metadata",
        "model": model,
        "model_path": model,
        "policy_family": spec.family,
        "input": {
            "image_keys": list(spec.camera_names),
            "image_size": list(spec.image_size) if spec.image_size else None,
            "image_size_required": spec.image_size_required,
            "camera_aliases": dict(spec.camera_aliases),
            "state_dim": spec.state_dim,
            "openpi_layout": openpi_layout,
        },
        "output": {
            "action_type": "continuous",
            "action_horizon": spec.action_horizon,
            "action_dim": spec.action_dim,
            "padded_action_dim": spec.action_dim,
            "dtype": "float32",
        },
        "defaults": {"num_inference_steps": spec.num_inference_steps},
        "capabilities": {
            "realtime_websocket": websockets,
            "openpi_websocket": websockets,
            "batch_inputs": False,
            "multiple_candidates": False,
            "return_digest": True,
            **spec.extra_capabilities,
        },
    }
