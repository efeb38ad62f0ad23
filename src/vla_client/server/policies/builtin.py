"""The built-in policies by name, and `make_policy`, which builds any policy from its name.

Kept apart from the package's face so that a process needing one policy imports that policy's
module alone: the inference worker, unpacking a `ReferencePolicy`, loads neither the torch
policy's image decoders nor the replay policy's recording reader.
"""

from __future__ import annotations

from collections.abc import Callable

from vla_client.server.policies.lerobot import LeRobotPolicy
from vla_client.server.policies.reach import ReachPolicy
from vla_client.server.policies.reach_flow import ReachFlowPolicy
from vla_client.server.policies.reference import ReferencePolicy
from vla_client.server.policies.replay import ReplayPolicy
from vla_client.server.policies.torch_cnn import TorchCNNPolicy
from vla_client.server.policy import Policy

# torch_cnn and lerobot import torch (and lerobot) only when their policy loads (in the worker),
# so listing them is free.
POLICIES: dict[str, Callable[..., Policy]] = {
    "reference": ReferencePolicy,
    "replay": ReplayPolicy,
    "torch": TorchCNNPolicy,
    "reach": ReachPolicy,
    "reach-flow": ReachFlowPolicy,
    "lerobot": LeRobotPolicy,
}


def make_policy(name: str, **options: object) -> Policy:
    """Build the policy `name` gives (a built-in, a plugin or ``package.module:attribute``; see
    `vla_client.server.policies.loading`); `PolicyLoadError` naming the cause."""
    from vla_client.server.policies.loading import load_policy

    return load_policy(name, options)
