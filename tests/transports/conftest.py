"""Fixtures for the transport tests: the reference server and scripted misbehaving servers."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import numpy as np
import pytest
from scripted_server import Script, ScriptedServer

from vla_client.cameras.scene import synthetic_frames
from vla_client.observation import Observation
from vla_client.server import LocalServer, ReferencePolicy, ServerConfig, create_app


@pytest.fixture
def scripted() -> Iterator[Callable[[Script], ScriptedServer]]:
    servers: list[ScriptedServer] = []

    def start(script: Script) -> ScriptedServer:
        servers.append(ScriptedServer(script))
        return servers[-1]

    yield start
    for server in servers:
        server.close()


@pytest.fixture(scope="module")
def reference_server() -> Iterator[LocalServer]:
    """The reference server, policy in-process, with both websockets."""
    app = create_app(ReferencePolicy(action_horizon=8, action_dim=5), ServerConfig(in_process=True))
    with LocalServer(app) as server:
        yield server


@pytest.fixture(scope="module")
def small_observation() -> Observation:
    return Observation(synthetic_frames(2, 48, 64, seed=3), state=np.linspace(0, 1, 5), task="t")
