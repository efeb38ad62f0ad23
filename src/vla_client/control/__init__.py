"""The runtime of a robot control loop around any inference callable.

`ChunkExecutor` turns action chunks into one action per tick with background prefetch, tick
alignment, blending and stale-reply protection; `SafetyGate` checks each action before the robot
gets it; `Watchdog` decides what happens when the server goes silent; `ControlLoop` runs it all
at a fixed rate and measures its jitter. Nothing here depends on a transport: `infer` is any
callable shaped like `ActionClient.infer`.
"""

from typing import TYPE_CHECKING

from vla_client._lazy import lazy_face

if TYPE_CHECKING:
    from vla_client.control.chunk import ActionSource as ActionSource
    from vla_client.control.chunk import ChunkExecutor as ChunkExecutor
    from vla_client.control.chunk import cross_fade as cross_fade
    from vla_client.control.loop import ControlLoop as ControlLoop
    from vla_client.control.names import EXECUTION_MODES as EXECUTION_MODES
    from vla_client.control.safety import SafetyGate as SafetyGate
    from vla_client.control.sim import SimRobot as SimRobot
    from vla_client.control.stats import ExecutorStats as ExecutorStats
    from vla_client.control.stats import LatencySample as LatencySample
    from vla_client.control.stats import LoopStats as LoopStats
    from vla_client.control.stats import Percentiles as Percentiles
    from vla_client.control.stats import percentiles as percentiles
    from vla_client.control.types import Action as Action
    from vla_client.control.types import ApplyAction as ApplyAction
    from vla_client.control.types import InferFn as InferFn
    from vla_client.control.types import Observe as Observe
    from vla_client.control.types import TickLog as TickLog
    from vla_client.control.watchdog import Watchdog as Watchdog
    from vla_client.control.watchdog import WatchdogTrip as WatchdogTrip
    from vla_client.errors import ClockStoppedError as ClockStoppedError
    from vla_client.errors import ModeNotSupportedError as ModeNotSupportedError
    from vla_client.errors import RefusalsError as RefusalsError
    from vla_client.errors import ServerSilentError as ServerSilentError
    from vla_client.errors import UnsafeActionError as UnsafeActionError

# What `lazy_face` hands out: each name of the block above, from the same module.
_FACE = {
    "EXECUTION_MODES": "vla_client.control.names",
    "ActionSource": "vla_client.control.chunk",
    "ChunkExecutor": "vla_client.control.chunk",
    "cross_fade": "vla_client.control.chunk",
    "ControlLoop": "vla_client.control.loop",
    "SafetyGate": "vla_client.control.safety",
    "SimRobot": "vla_client.control.sim",
    "ExecutorStats": "vla_client.control.stats",
    "LatencySample": "vla_client.control.stats",
    "LoopStats": "vla_client.control.stats",
    "Percentiles": "vla_client.control.stats",
    "percentiles": "vla_client.control.stats",
    "Action": "vla_client.control.types",
    "ApplyAction": "vla_client.control.types",
    "InferFn": "vla_client.control.types",
    "Observe": "vla_client.control.types",
    "TickLog": "vla_client.control.types",
    "Watchdog": "vla_client.control.watchdog",
    "WatchdogTrip": "vla_client.control.watchdog",
    "ClockStoppedError": "vla_client.errors",
    "ModeNotSupportedError": "vla_client.errors",
    "RefusalsError": "vla_client.errors",
    "ServerSilentError": "vla_client.errors",
    "UnsafeActionError": "vla_client.errors",
}
__getattr__, __dir__, __all__ = lazy_face(__name__, _FACE)
