"""A recording (``.vlaobs``: a server's ``serve --record``, a loop's ``record=``, an ``eval
--record`` episode) as a Rerun ``.rrd`` file, with the entities a live `RerunLog` writes.

Each step is placed on ``loop_time`` at its recorded wall time since the first step: its frames
(``camera/NAME``) and state (``robot/state``); a loop's step its applied action
(``robot/action``); a server's step the chunk it answered (``plan/N``, rows one step period
apart: the recording's median gap) and its own timings (``latency/server_preprocess``,
``latency/server_inference``).
"""

from __future__ import annotations

import itertools
import statistics
from pathlib import Path

import numpy as np

from vla_client.recording import ObservationReader
from vla_client.viz.rerun_log import RerunLog

SERVER_STAGES = {"preprocess_ms": "server_preprocess", "inference_ms": "server_inference"}


def recording_to_rerun(recording: str | Path, out: str | Path) -> int:
    """Write `recording` to the ``.rrd`` file `out`; returns the number of steps written.
    `RecordingError` for a file that is not a recording."""
    with ObservationReader(recording) as reader:
        times = reader.wall_times()
        gaps = [b - a for a, b in itertools.pairwise(times) if b > a]
        period_s = statistics.median(gaps) if gaps else 0.1
        log = RerunLog(out, period_s=period_s, block=True)
        try:
            log.use_clock(lambda: times[0] if times else 0.0, period_s)
            for _, step in reader.read(None):
                t, observation = step.wall_time, step.observation
                served = step.served
                actions = None if served is None else np.asarray(served.actions)
                latencies = {
                    stage: float(served.timings[key])
                    for key, stage in SERVER_STAGES.items()
                    if served is not None and key in served.timings
                }
                log.put_sent(t, observation, actions, latencies, replied_at=t)
                log.tick(t, observation, step.applied_action)
        finally:
            log.close(timeout=None)  # every step written, however long that takes
    return len(times)
