"""Policies the reference server can run, by name (``vla-client serve --policy NAME``)."""

from __future__ import annotations

from collections.abc import Callable

from vla_client.server.policies.reference import ReferencePolicy, reference_actions
from vla_client.server.policy import Policy

POLICIES: dict[str, Callable[..., Policy]] = {"reference": ReferencePolicy}


def make_policy(name: str, **options: object) -> Policy:
    """Build the policy registered under `name`."""
    try:
        factory = POLICIES[name]
    except KeyError:
        raise ValueError(f"unknown policy {name!r}; choose one of {', '.join(POLICIES)}") from None
    return factory(**options)


__all__ = ["POLICIES", "ReferencePolicy", "make_policy", "reference_actions"]
