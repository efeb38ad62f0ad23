"""Expected values computed outside the code under test, for tests that check values.

A test that computes its expectation with the same code the server runs proves only that the
code agrees with itself: a digest over the wrong bytes, or a policy that reads the wrong
camera, passes. These oracles are written again from the definitions, in plain Python:

- `frame_sha256` / `frame_digest_of`: the digest a server must report for a frame, the SHA-256
  of the frame's C-order bytes (``np.ascontiguousarray(frame).tobytes()``), hashed here with
  `hashlib`, not with `vla_client.codecs.frame_digest`.
- `oracle_actions`: the reference policy's chunk, ``actions[h, d] = tanh(sum_i cos(d * i) *
  v_i + phase) * cos(0.1 * h * d)`` (d and i counted from 1), where ``v`` is each camera's mean
  R, G, B over 255 (cameras by name), then the state, and ``phase`` is the task's CRC-32 modulo
  1000 over 1000; a second implementation of what `ReferencePolicy` documents, in scalar loops.
"""

from __future__ import annotations

import binascii
import hashlib
import math
from collections.abc import Mapping
from typing import Any

import numpy as np


def frame_sha256(frame: np.ndarray) -> str:
    """SHA-256 (hex) of the frame's bytes in C order."""
    return hashlib.sha256(np.ascontiguousarray(frame).tobytes()).hexdigest()


def frame_digest_of(frame: np.ndarray) -> dict[str, object]:
    """The digest entry a server reports for an HxWx3 uint8 frame it decoded as `frame`."""
    assert frame.dtype == np.uint8, "digests here are of uint8 frames"
    return {"shape": list(frame.shape), "dtype": "|u1", "sha256": frame_sha256(frame)}


def oracle_actions(observation: Any, *, horizon: int, action_dim: int) -> np.ndarray:
    """The reference policy's chunk for anything with ``images``, ``state`` and ``task``."""
    return actions_for(
        observation.images, observation.state, observation.task or "", horizon, action_dim
    )


def actions_for(
    images: Mapping[str, np.ndarray],
    state: Any,
    task: str,
    horizon: int,
    action_dim: int,
) -> np.ndarray:
    """`oracle_actions` from its parts."""
    values: list[float] = []
    for name in sorted(images):
        frame = np.asarray(images[name])
        pixels = frame.shape[0] * frame.shape[1]
        if frame.ndim == 2:  # depth: the mean, least and greatest known distance in metres
            scale = 1000.0 if frame.dtype == np.uint16 else 1.0
            known = [float(v) / scale for v in frame.ravel().tolist()]
            known = [v for v in known if math.isfinite(v) and v > 0]
            values.extend([sum(known) / len(known), min(known), max(known)] if known else [0.0] * 3)
            continue
        for channel in range(3):
            values.append(int(frame[:, :, channel].astype(np.int64).sum()) / pixels / 255.0)
    if state is not None:
        values.extend(float(v) for v in np.asarray(state, dtype=np.float32).ravel())
    phase = (binascii.crc32(task.encode("utf-8")) % 1000) / 1000.0
    base = [
        math.tanh(sum(math.cos(d * i) * v for i, v in enumerate(values, start=1)) + phase)
        for d in range(1, action_dim + 1)
    ]
    rows = [[base[d - 1] * math.cos(0.1 * h * d) for d in range(1, action_dim + 1)]
            for h in range(horizon)]  # fmt: skip
    return np.array(rows, dtype=np.float32).reshape(horizon, action_dim)


def assert_actions_equal(actions: np.ndarray, expected: np.ndarray) -> None:
    """The chunk matches the oracle to float32 rounding."""
    assert actions.shape == expected.shape, (actions.shape, expected.shape)
    np.testing.assert_allclose(actions, expected, rtol=1e-5, atol=1e-6)


def independent_frame(value: Any) -> np.ndarray | None:
    """An image value of a request as the HxWx3 uint8 frame the action API defines, or None.

    Written from the forms' definitions with the standard library, Pillow and plain numpy (no
    OpenCV, no vla_client): ``{"b64_json" | "base64": text}`` (a ``data:`` URL prefix allowed)
    or raw bytes holding an encoded image; ``{"values" | "data", "dtype"?, "shape"?}`` tensor
    payloads; nested ``[H][W][C]`` lists; msgpack ``__ndarray__`` maps. The frame rules: HxW
    is grey, 1 channel is repeated, a 4th (alpha) is dropped; ints must be in 0..255, floats in
    [0, 1] (scaled by 255 and rounded). None for anything that is no valid image.
    """
    try:
        array = _independent_array(value)
        return None if array is None else _independent_rgb(array)
    except (ValueError, TypeError, OverflowError, OSError, SyntaxError, binascii.Error):
        return None


def _key(value: dict[Any, Any], name: str) -> Any:
    found = value.get(name)
    return value.get(name.encode()) if found is None else found


def _independent_array(value: Any) -> np.ndarray | None:
    import base64
    import io

    from PIL import Image

    if isinstance(value, bytes):
        with Image.open(io.BytesIO(value)) as image:
            return np.asarray(image.convert("RGB"))
    if isinstance(value, np.ndarray):  # a document before packing
        return value
    if isinstance(value, list):
        return np.array(value)
    if not isinstance(value, dict):
        return None
    if _key(value, "__ndarray__"):
        dtype = _key(value, "dtype")
        dtype = np.dtype(dtype.decode() if isinstance(dtype, bytes) else dtype)
        shape = tuple(_key(value, "shape"))
        return np.frombuffer(_key(value, "data"), dtype=dtype).reshape(shape)
    if "b64_json" in value or "base64" in value:
        text = value.get("b64_json")
        text = value.get("base64") if text is None else text
        if isinstance(text, str) and text.startswith("data:") and "," in text:
            text = text.split(",", 1)[1]
        data = base64.b64decode(text, validate=True)
        return _independent_array(data) if data else None
    values = value.get("values")
    values = value.get("data") if values is None else values
    if values is None:
        return None
    dtype = value.get("dtype")
    if isinstance(values, bytes):
        array = np.frombuffer(values, dtype=np.dtype(dtype or "uint8"))
    else:
        array = np.array(values, dtype=None if dtype is None else np.dtype(dtype))
    shape = value.get("shape")
    return array if shape is None else array.reshape(tuple(shape))


def _independent_rgb(array: np.ndarray) -> np.ndarray | None:
    if array.ndim == 2:
        array = array[:, :, None]
    if array.ndim != 3 or 0 in array.shape or array.shape[2] not in (1, 3, 4):
        return None
    if array.dtype.kind in "iu":
        if array.min() < 0 or array.max() > 255:
            return None
        array = array.astype(np.uint8)
    elif array.dtype.kind == "f":
        if not np.isfinite(array).all() or array.min() < 0 or array.max() > 1:
            return None
        array = np.rint(array.astype(np.float64) * 255).astype(np.uint8)
    else:
        return None
    if array.shape[2] == 1:
        array = np.concatenate([array, array, array], axis=2)
    return np.ascontiguousarray(array[:, :, :3])
