"""A reference server running the built-in reach policy, for the evaluation tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from vla_client.server import LocalServer, create_app
from vla_client.server.policies import ReachPolicy


@pytest.fixture(scope="session")
def reach_url() -> Iterator[str]:
    """The reach policy on a free loopback port."""
    with LocalServer(create_app(ReachPolicy())) as server:
        yield server.url
