"""Policies the reference server can run, by name (``vla-client serve --policy NAME``)."""

from __future__ import annotations

from collections.abc import Callable

from vla_client.server.policies.reference import ReferencePolicy, reference_actions
from vla_client.server.policies.replay import ReplayPolicy
from vla_client.server.policies.torch_cnn import TorchCNNPolicy
from vla_client.server.policy import Policy

# torch_cnn imports torch only when its policy loads (in the worker), so listing it is free.
POLICIES: dict[str, Callable[..., Policy]] = {
    "reference": ReferencePolicy,
    "replay": ReplayPolicy,
    "torch": TorchCNNPolicy,
}


def make_policy(name: str, **options: object) -> Policy:
    """Build the policy registered under `name`."""
    try:
        factory = POLICIES[name]
    except KeyError:
        raise ValueError(f"unknown policy {name!r}; choose one of {', '.join(POLICIES)}") from None
    return factory(**options)


__all__ = [
    "POLICIES",
    "ReferencePolicy",
    "ReplayPolicy",
    "TorchCNNPolicy",
    "make_policy",
    "reference_actions",
]
