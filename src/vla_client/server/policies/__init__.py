"""Policies the reference server can run, by name (``vla-client serve --policy NAME``).

Built in: ``reference`` (deterministic, for tests and benchmarks), ``replay`` (recorded chunks),
``torch`` (a small CNN, on the GPU when there is one), ``reach`` (solves the built-in
evaluation task from its frames: ``vla-client eval``), ``reach-flow`` (a stochastic
flow-matching policy for the same task that does real-time chunking: ``vla-client eval --mode
rtc``) and ``lerobot`` (a LeRobot pretrained
folder: ``--policy-option path=DIR``). `OpenpiPolicy` serves any object
with openpi's policy interface. Names of one's own: see `loading`.

Names load on first use (see `vla_client._lazy`), so the worker that unpacks one policy imports
that policy's module and no other.
"""

from typing import TYPE_CHECKING

from vla_client._lazy import lazy_face

if TYPE_CHECKING:
    from vla_client.server.policies.builtin import POLICIES as POLICIES
    from vla_client.server.policies.builtin import make_policy as make_policy
    from vla_client.server.policies.flow import FlowPolicy as FlowPolicy
    from vla_client.server.policies.lerobot import LeRobotPolicy as LeRobotPolicy
    from vla_client.server.policies.openpi import OpenpiPolicy as OpenpiPolicy
    from vla_client.server.policies.reach import ReachPolicy as ReachPolicy
    from vla_client.server.policies.reach_flow import ReachFlowPolicy as ReachFlowPolicy
    from vla_client.server.policies.reference import ReferencePolicy as ReferencePolicy
    from vla_client.server.policies.reference import reference_actions as reference_actions
    from vla_client.server.policies.replay import ReplayPolicy as ReplayPolicy
    from vla_client.server.policies.torch_cnn import TorchCNNPolicy as TorchCNNPolicy

# What `lazy_face` hands out: each name of the block above, from the same module.
_FACE = {
    "POLICIES": "vla_client.server.policies.builtin",
    "make_policy": "vla_client.server.policies.builtin",
    "LeRobotPolicy": "vla_client.server.policies.lerobot",
    "OpenpiPolicy": "vla_client.server.policies.openpi",
    "FlowPolicy": "vla_client.server.policies.flow",
    "ReachPolicy": "vla_client.server.policies.reach",
    "ReachFlowPolicy": "vla_client.server.policies.reach_flow",
    "ReferencePolicy": "vla_client.server.policies.reference",
    "reference_actions": "vla_client.server.policies.reference",
    "ReplayPolicy": "vla_client.server.policies.replay",
    "TorchCNNPolicy": "vla_client.server.policies.torch_cnn",
}
__getattr__, __dir__, __all__ = lazy_face(__name__, _FACE)
