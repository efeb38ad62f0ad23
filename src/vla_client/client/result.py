"""What one inference gives back: the action chunk and where the time went."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np


@dataclass(frozen=True)
class Timings:
    """Milliseconds per stage, client-side and as the server reported them.

    `fit_ms` is what fitting the observation to the server took (renaming, resizing to its
    image size); `round_trip_ms` runs from the first byte sent to the last byte received;
    `network_ms` is that minus the server's own `total_ms` when the server reports one, which
    needs no synchronised clocks. `server` holds the server's timings verbatim
    (`preprocess_ms`, `inference_ms`, ...). `bytes_sent` counts the request's body and, over
    ``ipc://``, the frames written to shared memory beside it.
    """

    encode_ms: float
    round_trip_ms: float
    decode_ms: float
    bytes_sent: int
    bytes_received: int
    server: dict[str, float] = field(default_factory=dict)
    fit_ms: float = 0.0

    @property
    def total_ms(self) -> float:
        """Client fit + encode + round trip + decode."""
        return self.fit_ms + self.encode_ms + self.round_trip_ms + self.decode_ms

    @property
    def network_ms(self) -> float | None:
        """Round trip minus the server's total time, when the server reports one."""
        server_total = self.server.get("total_ms")
        return None if server_total is None else max(0.0, self.round_trip_ms - server_total)


@dataclass(frozen=True)
class ActionResult:
    """An action chunk as float32 ``[H, D]`` (``[B, H, D]`` for batched replies).

    `digests` is present when the request asked for `return_digest`: per camera, the shape,
    dtype and SHA-256 of the pixels the server decoded; `sent_digests` the same of the frames
    the client sent, after fitting them to the server (renamed, resized), to compare with
    (`mismatched_cameras`). `raw` is the parsed reply as received. `action_keys` names the
    columns of a chunk joined from named parts (GR00T's action keys):
    ``result.actions[:, result.action_keys["arm"]]`` is the arm's; None where the server
    answers one unnamed chunk.
    """

    actions: np.ndarray
    request_id: str | None
    timings: Timings
    raw: dict[str, Any]
    digests: dict[str, dict[str, Any]] | None = None
    action_keys: dict[str, slice] | None = None
    sent_digests: dict[str, dict[str, Any]] | None = None

    @property
    def horizon(self) -> int:
        """Number of steps in the chunk."""
        return int(self.actions.shape[-2])

    @property
    def action_dim(self) -> int:
        """Size of each action vector."""
        return int(self.actions.shape[-1])
