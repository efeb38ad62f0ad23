"""Closed-loop evaluation in simulation, through the real client, executor and network.

The built-in task is `vla_client.tasks.ReachTask` (a robot and a moving target, seen by two
cameras); `GymWorld` makes a Gymnasium environment with pixel observations the robot instead.
`run_episode` plays one episode through any inference callable with the `ChunkExecutor`, in
real or simulated time; `NetworkDelay`, `delayed` and `SimulatedTime` put a network delay
between the robot and the server. ``vla-client eval`` runs it all from the command line.
"""

from typing import TYPE_CHECKING

from vla_client._lazy import lazy_face

if TYPE_CHECKING:
    from vla_client.sim.episode import MODES as MODES
    from vla_client.sim.episode import EpisodeResult as EpisodeResult
    from vla_client.sim.episode import EvalConfig as EvalConfig
    from vla_client.sim.episode import Mode as Mode
    from vla_client.sim.episode import World as World
    from vla_client.sim.episode import run_episode as run_episode
    from vla_client.sim.gym import GymWorld as GymWorld
    from vla_client.sim.network import DelayedTransport as DelayedTransport
    from vla_client.sim.network import NetworkDelay as NetworkDelay
    from vla_client.sim.network import SimulatedTime as SimulatedTime
    from vla_client.sim.network import delayed as delayed
    from vla_client.sim.network import measure_round_trip as measure_round_trip

# What `lazy_face` hands out: each name of the block above, from the same module.
_FACE = {
    "MODES": "vla_client.sim.episode",
    "EpisodeResult": "vla_client.sim.episode",
    "EvalConfig": "vla_client.sim.episode",
    "Mode": "vla_client.sim.episode",
    "World": "vla_client.sim.episode",
    "run_episode": "vla_client.sim.episode",
    "GymWorld": "vla_client.sim.gym",
    "DelayedTransport": "vla_client.sim.network",
    "NetworkDelay": "vla_client.sim.network",
    "SimulatedTime": "vla_client.sim.network",
    "delayed": "vla_client.sim.network",
    "measure_round_trip": "vla_client.sim.network",
}
__getattr__, __dir__, __all__ = lazy_face(__name__, _FACE)
