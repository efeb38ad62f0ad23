"""The ranges a simulated run accepts, importable without numpy: ``vla-client eval`` and
``ros2`` check their options against them while parsing (`episode` and `network` take them
from here)."""

from __future__ import annotations

RATE_RANGE_HZ = (0.1, 1000.0)
"""Control rates accepted: from a tick every 10 s to a fast joint controller's 1 kHz."""
MAX_DELAY_S = 10.0
"""The longest one-way delay or jitter accepted: longer is a typo, not a network."""
