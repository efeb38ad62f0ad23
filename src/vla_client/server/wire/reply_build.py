"""Action replies, built on the server: the envelope and the raw form.

The documents are described in `vla_client.protocol.reply_read`, where a client reads them back.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np


def build_envelope(
    actions: np.ndarray,
    *,
    request_id: str,
    model: str,
    numpy_values: bool,
    denoise_steps: int | None = None,
    timings: dict[str, float] | None = None,
    extra: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The envelope for an ``[H, D]`` or ``[B, H, D]`` float action array."""
    batch = _as_batch(actions)
    data = [
        {
            "index": i,
            "input_index": i,
            "candidate_index": 0,
            "action": {
                "type": "continuous",
                "dtype": "float32",
                "shape": list(chunk.shape),
                "values": chunk if numpy_values else chunk.tolist(),
            },
        }
        for i, chunk in enumerate(batch)
    ]
    envelope: dict[str, Any] = {
        "id": request_id,
        "object": "action.generation",
        "created": int(time.time()),
        "model": model,
        "data": data,
        "usage": {
            "batch_size": len(batch),
            "action_horizon": int(batch.shape[1]),
            "action_dim": int(batch.shape[2]),
            "denoise_steps": denoise_steps,
            "prefix_cache_hit": False,
        },
    }
    if timings is not None:
        envelope["timings"] = timings
    envelope.update(extra or {})
    return envelope


def build_raw(
    actions: np.ndarray,
    *,
    request_id: str,
    numpy_values: bool,
    parameters: dict[str, Any] | None = None,
    timings: dict[str, float] | None = None,
    extra: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The raw reply: ``{"request_id", "actions", "parameters", "timings"?}``."""
    chunk = np.asarray(actions, dtype=np.float32)
    _as_batch(chunk)
    raw: dict[str, Any] = {
        "request_id": request_id,
        "actions": chunk if numpy_values else chunk.tolist(),
        "parameters": parameters or {},
    }
    if timings is not None:
        raw["timings"] = timings
    raw.update(extra or {})
    return raw


def _as_batch(actions: np.ndarray) -> np.ndarray:
    array = np.asarray(actions, dtype=np.float32)
    if array.ndim == 2:
        array = array[None]
    if array.ndim != 3:
        raise ValueError(f"action output must have shape [H, D] or [B, H, D], got {array.shape}")
    if 0 in array.shape:
        raise ValueError(f"action output dimensions must be non-zero, got {array.shape}")
    return array
