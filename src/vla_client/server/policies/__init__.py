"""Policies the reference server can run, by name (``vla-client serve --policy NAME``).

Built in: ``reference`` (deterministic, for tests and benchmarks), ``replay`` (recorded chunks),
``torch`` (a small CNN, on the GPU when there is one) and ``reach`` (solves the built-in
evaluation task from its frames: ``vla-client eval``). `OpenpiPolicy` serves any object
with openpi's policy interface. Names of one's own: see `loading`.
"""

from __future__ import annotations

from collections.abc import Callable

from vla_client.server.policies.openpi import OpenpiPolicy
from vla_client.server.policies.reach import ReachPolicy
from vla_client.server.policies.reference import ReferencePolicy, reference_actions
from vla_client.server.policies.replay import ReplayPolicy
from vla_client.server.policies.torch_cnn import TorchCNNPolicy
from vla_client.server.policy import Policy

# torch_cnn imports torch only when its policy loads (in the worker), so listing it is free.
POLICIES: dict[str, Callable[..., Policy]] = {
    "reference": ReferencePolicy,
    "replay": ReplayPolicy,
    "torch": TorchCNNPolicy,
    "reach": ReachPolicy,
}


def make_policy(name: str, **options: object) -> Policy:
    """Build the policy `name` gives (a built-in, a plugin or ``package.module:attribute``; see
    `vla_client.server.policies.loading`); `PolicyLoadError` naming the cause."""
    from vla_client.server.policies.loading import load_policy

    return load_policy(name, options)


__all__ = [
    "POLICIES",
    "OpenpiPolicy",
    "ReachPolicy",
    "ReferencePolicy",
    "ReplayPolicy",
    "TorchCNNPolicy",
    "make_policy",
    "reference_actions",
]
