"""Fingerprints of decoded frames, so a client can prove the server saw exactly its pixels."""

from __future__ import annotations

import hashlib

import numpy as np


def frame_digest(frame: np.ndarray) -> dict[str, object]:
    """Shape, dtype and SHA-256 of the frame's C-order bytes."""
    contiguous = np.ascontiguousarray(frame)
    return {
        "shape": list(contiguous.shape),
        "dtype": contiguous.dtype.str,
        "sha256": hashlib.sha256(contiguous.data).hexdigest(),
    }
