"""The server without uvloop (Windows has no build; the ``server`` extra leaves it out there):
uvicorn falls back to asyncio's event loop and serves the same actions."""

from __future__ import annotations

import json
import subprocess
import sys

from vla_client import ActionClient, Observation
from vla_client.cameras.scene import synthetic_frames

SERVE_WITHOUT_UVLOOP = """
import json, sys
sys.modules["uvloop"] = None  # as if not installed: importing it raises ImportError
from vla_client import ActionClient, Observation
from vla_client.cameras.scene import synthetic_frames
from vla_client.server import LocalServer, ReferencePolicy, ServerConfig, create_app

policy = ReferencePolicy(action_horizon=10, action_dim=7)  # as the suite's server_url
observation = Observation(synthetic_frames(3, 32, 48, seed=3), task="t")
with LocalServer(create_app(policy, ServerConfig())) as server:
    with ActionClient(server.url, encoding="png") as client:
        served = client.infer(observation).actions
print(json.dumps({"served": served.tolist(), "uvloop_loaded": sys.modules["uvloop"] is not None}))
"""


def test_the_server_serves_on_asyncio_without_uvloop(server_url: str) -> None:
    """The same actions as the suite's server (with uvloop where installed) for the same frames."""
    result = subprocess.run(
        [sys.executable, "-c", SERVE_WITHOUT_UVLOOP],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    report = json.loads(result.stdout.splitlines()[-1])
    assert report["uvloop_loaded"] is False
    observation = Observation(synthetic_frames(3, 32, 48, seed=3), task="t")
    with ActionClient(server_url, encoding="png") as client:
        expected = client.infer(observation).actions.tolist()
    assert len(expected) == 10 and report["served"] == expected
