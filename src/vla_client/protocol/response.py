"""Action replies: built by servers, read back by clients.

The envelope is SGLang's `action_generation_response`; the raw form is its
`action_raw_response`; openpi's websocket replies are raw-shaped dicts with ``actions``.
`read_actions` accepts all three, so one client works against every server that speaks the API.
"""

from __future__ import annotations

import os
import time
from typing import Any

import numpy as np

from vla_client.errors import ProtocolError


def new_request_id() -> str:
    """A fresh request id, ``act_<32 hex digits>`` as SGLang generates them."""
    return f"act_{os.urandom(16).hex()}"


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


def read_actions(reply: Any) -> tuple[np.ndarray, str | None]:
    """The float32 action array and request id from an envelope, raw or openpi reply."""
    if not isinstance(reply, dict):
        raise ProtocolError(f"reply must be an object, got {type(reply).__name__}")
    if "data" in reply:
        data = reply["data"]
        if not isinstance(data, list) or not data:
            raise ProtocolError("envelope has no data entries")
        try:
            chunks = [_as_float32(entry["action"]["values"]) for entry in data]
        except (KeyError, TypeError) as exc:
            raise ProtocolError(f"envelope entry lacks action values: {exc}") from None
        actions = chunks[0] if len(chunks) == 1 else np.stack(chunks)
        request_id = reply.get("id")
    elif "actions" in reply:
        actions = _as_float32(reply["actions"])
        request_id = reply.get("request_id")
    else:
        raise ProtocolError(
            f"reply has neither 'data' nor 'actions' (keys: {sorted(map(str, reply))})"
        )
    if actions.ndim not in (2, 3) or 0 in actions.shape:
        raise ProtocolError(f"actions must be [H, D] or [B, H, D], got shape {actions.shape}")
    return actions, None if request_id is None else str(request_id)


def _as_float32(values: Any) -> np.ndarray:
    try:
        return np.asarray(values, dtype=np.float32)
    except (ValueError, TypeError) as exc:
        raise ProtocolError(f"actions are not a numeric array: {exc}") from None


def _as_batch(actions: np.ndarray) -> np.ndarray:
    array = np.asarray(actions, dtype=np.float32)
    if array.ndim == 2:
        array = array[None]
    if array.ndim != 3:
        raise ValueError(f"action output must have shape [H, D] or [B, H, D], got {array.shape}")
    if 0 in array.shape:
        raise ValueError(f"action output dimensions must be non-zero, got {array.shape}")
    return array
