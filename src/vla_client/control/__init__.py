"""The runtime of a robot control loop around any inference callable.

`ChunkExecutor` turns action chunks into one action per tick with background prefetch, tick
alignment, blending and stale-reply protection; `SafetyGate` checks each action before the robot
gets it; `Watchdog` decides what happens when the server goes silent; `ControlLoop` runs it all
at a fixed rate and measures its jitter. Nothing here depends on a transport: `infer` is any
callable shaped like `ActionClient.infer`.
"""

from vla_client.control.chunk import ActionSource, ChunkExecutor, cross_fade
from vla_client.control.loop import ControlLoop
from vla_client.control.safety import SafetyGate
from vla_client.control.sim import SimRobot
from vla_client.control.stats import (
    ExecutorStats,
    LatencySample,
    LoopStats,
    Percentiles,
    percentiles,
)
from vla_client.control.types import Action, ApplyAction, InferFn, Observe
from vla_client.control.watchdog import Watchdog, WatchdogTrip
from vla_client.errors import ServerSilentError, UnsafeActionError

__all__ = [
    "Action",
    "ActionSource",
    "ApplyAction",
    "ChunkExecutor",
    "ControlLoop",
    "ExecutorStats",
    "InferFn",
    "LatencySample",
    "LoopStats",
    "Observe",
    "Percentiles",
    "SafetyGate",
    "ServerSilentError",
    "SimRobot",
    "UnsafeActionError",
    "Watchdog",
    "WatchdogTrip",
    "cross_fade",
    "percentiles",
]
