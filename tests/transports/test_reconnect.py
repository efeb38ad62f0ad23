"""The server dies mid-loop and comes back: the websocket client reconnects, never stale.

The server is a real ``vla-client serve`` process, killed and restarted on the same port. Each
observation in the loop differs (its state is the step number), so a chunk computed for an
earlier observation would not match the reference chunk for the one that was sent.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from oracles import oracle_actions
from vla_client.cameras.scene import synthetic_frames
from vla_client.client import ActionClient
from vla_client.errors import TransportError
from vla_client.observation import Observation
from vla_client.server.policy import PolicyInput
from vla_client.transports import Backoff, WebSocketTransport

SRC = str(Path(__file__).resolve().parents[2] / "src")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def start_server(port: int) -> subprocess.Popen[bytes]:
    """In-process policy: a SIGKILLed worker would leave its shared memory behind."""
    env = {**os.environ, "PYTHONPATH": SRC + os.pathsep + os.environ.get("PYTHONPATH", "")}
    return subprocess.Popen(
        [sys.executable, "-m", "vla_client.cli", "serve", "--port", str(port), "--in-process",
         "--action-horizon", "6", "--action-dim", "4"],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip


def stop_server(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        process.send_signal(signal.SIGKILL)
        process.wait(10)


@pytest.fixture
def port() -> Iterator[int]:
    yield free_port()


def observation_for(step: int) -> Observation:
    return Observation(synthetic_frames(1, 32, 32, seed=1), state=[float(step)] * 3, task="go")


def expected(observation: Observation) -> np.ndarray:
    policy_input = PolicyInput(images=dict(observation.images), state=observation.state, task="go")
    return oracle_actions(policy_input, horizon=6, action_dim=4)


def run_until(client: ActionClient, step: int, ok: int, seconds: float) -> tuple[int, int, int]:
    """Infer until `ok` successes (or time is up); returns (step, successes, failures)."""
    successes = failures = 0
    deadline = time.monotonic() + seconds
    while successes < ok and time.monotonic() < deadline:
        step += 1
        observation = observation_for(step)
        try:
            result = client.infer(observation, request_id=f"step-{step}")
        except TransportError:
            failures += 1
            time.sleep(0.02)  # the control loop's tick; infer itself never waits out a backoff
            continue
        assert result.request_id == f"step-{step}"
        np.testing.assert_allclose(result.actions, expected(observation), rtol=1e-5)
        successes += 1
    return step, successes, failures


def test_client_reconnects_after_the_server_restarts(port: int) -> None:
    server = start_server(port)
    transport = WebSocketTransport(
        f"ws://127.0.0.1:{port}", timeout_s=5.0, connect_timeout_s=2.0,
        backoff=Backoff(initial_s=0.05, max_s=0.4),
    )  # fmt: skip
    try:
        with ActionClient("ws://unused", transport=transport) as client:
            step, ok, _ = run_until(client, 0, ok=3, seconds=30)
            assert ok == 3 and transport.stats.connects == 1
            stop_server(server)
            step, ok, failures = run_until(client, step, ok=1, seconds=1.0)
            assert ok == 0 and failures > 0
            server = start_server(port)
            step, ok, _ = run_until(client, step, ok=3, seconds=30)
            assert ok == 3
            assert transport.stats.connects == 2
            assert transport.stats.connect_failures >= 1
    finally:
        stop_server(server)
