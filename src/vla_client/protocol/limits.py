"""How much one request may make its reader decode: a server reading requests, and a robot
reading a recording of them (`vla_client.recording.Recording`), bound it the same way."""

from __future__ import annotations

from dataclasses import dataclass

from vla_client.codecs.image_decode import DEFAULT_MAX_PIXELS


@dataclass(frozen=True)
class DecodeLimits:
    """Bounds on what one request may make the server decode."""

    max_cameras: int = 16
    max_image_pixels: int = DEFAULT_MAX_PIXELS
