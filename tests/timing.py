"""Bounds on a measured time that a busy machine meets: the suite runs beside other jobs, and a
process may wait its turn for a CPU for a good part of a second. A test checks that a time is
what the code asks for (paced, not as fast as possible; a pause kept, not dropped; a timeout of
its own, not the default), with room for that wait; how close to the asked-for time the code
comes is measured by the benchmarks (``benchmarks/bench_control_loop.py``: tick jitter)."""

from __future__ import annotations

EARLY_S = 0.25
"""How much shorter than asked a measured gap may look: its first end came late (a request's
own latency), its second on time."""
LATE_S = 1.0
"""How much longer than asked a measured gap may be on a loaded machine."""


def paced(measured_s: float, expected_s: float) -> bool:
    """Whether `measured_s` is `expected_s` as a busy machine keeps it."""
    return expected_s - EARLY_S <= measured_s <= expected_s + LATE_S
