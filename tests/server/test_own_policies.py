"""Policies of one's own in the default worker layout: defined in a script's ``__main__``, their
life (load, warm-up, ready, close) and what happens when they misbehave."""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx
import numpy as np
import pytest
from my_policies import Lifecycle, Misbehaving

from vla_client import ActionClient, Observation, encode_request
from vla_client.server import LocalServer, ServerConfig, create_app
from vla_client.server.config import WorkerSettings

GENERATIONS = "/v1/actions/generations"

SCRIPT = """
import os
import numpy as np
from vla_client import ActionClient, Observation
from vla_client.server import LocalServer, Policy, PolicyInput, PolicySpec, ServerConfig, create_app

class WhereAmI(Policy):
    \"\"\"Answers the id of the process it runs in, and the brightness of what it saw.\"\"\"

    def __init__(self):
        self._spec = PolicySpec(family="where", action_horizon=2, action_dim=2)

    @property
    def spec(self):
        return self._spec

    def infer(self, observation: PolicyInput) -> np.ndarray:
        brightness = float(observation.images["cam"].mean())
        return np.array([[os.getpid(), brightness]] * 2, np.float32)

with LocalServer(create_app(WhereAmI(), ServerConfig())) as server:
    with ActionClient(server.url) as client:
        frame = np.full((8, 8, 3), 77, np.uint8)
        actions = client.infer(Observation({"cam": frame})).actions
print(os.getpid(), int(actions[0, 0]), float(actions[0, 1]))
"""


def test_a_policy_defined_in_a_script_is_served_by_the_worker(tmp_path: Path) -> None:
    script = tmp_path / "serve_mine.py"
    script.write_text(SCRIPT)
    done = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    script_pid, worker_pid, brightness = done.stdout.split()
    assert worker_pid != script_pid  # it ran in the worker process, not in the script's
    assert float(brightness) == 77.0


class _Locked(Misbehaving):
    def __init__(self) -> None:
        super().__init__()
        self.lock = threading.Lock()  # a handle of this process: cannot travel


def test_a_policy_that_cannot_travel_says_why() -> None:
    with pytest.raises(RuntimeError, match=r"cannot be sent to the worker process .*load\(\)"):
        LocalServer(create_app(_Locked(), ServerConfig())).start()


def _frames() -> dict[str, np.ndarray]:
    return {"wrist": np.zeros((48, 64, 3), np.uint8), "top": np.zeros((48, 64, 3), np.uint8)}


def test_load_then_warm_up_in_the_worker_then_ready_then_close(tmp_path: Path) -> None:
    log, gate = tmp_path / "life.log", tmp_path / "gate"
    app = create_app(Lifecycle(str(log), gate=str(gate)), ServerConfig())
    server = LocalServer(app).start(wait_ready=False)
    try:
        health = httpx.get(f"{server.url}/health", timeout=5)  # listening, not loaded
        assert (health.status_code, health.json()) == (503, {"status": "loading"})
        body, content_type = encode_request(Observation(_frames(), state=np.zeros(5)))
        early = httpx.post(server.url + GENERATIONS, content=body,
                           headers={"Content-Type": content_type}, timeout=5)  # fmt: skip
        assert early.status_code == 503 and early.headers["retry-after"] == "1"
        assert early.json() == {"detail": "the policy is loading"}
        assert httpx.get(f"{server.url}/v1/actions/metadata", timeout=5).status_code == 200
        gate.touch()
        deadline = time.monotonic() + 30
        while httpx.get(f"{server.url}/health", timeout=5).status_code != 200:
            assert time.monotonic() < deadline
            time.sleep(0.05)
        assert httpx.get(f"{server.url}/health", timeout=5).json() == {"status": "ok"}
        steps = log.read_text().splitlines()
        assert steps[0].startswith("load ") and steps[0] != f"load {__import__('os').getpid()}"
        assert steps[1:] == ["warm_up wrist:48x64x3,top:48x64x3 state:5"]
        with ActionClient(server.url) as client:
            result = client.infer(Observation(_frames(), state=np.zeros(5)))
        np.testing.assert_array_equal(result.actions, np.full((3, 2), 0.5, np.float32))
    finally:
        server.stop()
    assert log.read_text().splitlines()[-1] == "close"


def test_a_client_started_while_the_policy_loads_waits_for_it(tmp_path: Path) -> None:
    """A robot program started beside a server still loading its policy (issue 37): the
    server's 503 ``the policy is loading`` is asked again until the policy is ready, past the
    three attempts within 5 s a warm server's 503 gets (which gave up after 2 s before)."""
    gate = tmp_path / "gate"
    app = create_app(Lifecycle(str(tmp_path / "log"), gate=str(gate)), ServerConfig())
    server = LocalServer(app).start(wait_ready=False)
    try:
        threading.Timer(3.5, gate.touch).start()  # Retry-After is 1 s: 3 attempts and more
        with ActionClient(server.url) as client:
            result = client.infer(Observation(_frames(), state=np.zeros(5)))
            retries = client.stats.retries
    finally:
        server.stop()
    np.testing.assert_array_equal(result.actions, np.full((3, 2), 0.5, np.float32))
    assert retries >= 3


@pytest.mark.parametrize("in_process", [False, True])
@pytest.mark.parametrize(
    ("fail", "said"),
    [
        ("load", "policy failed to load: FileNotFoundError: no checkpoint at"),
        ("warm_up", "policy failed to warm up: RuntimeError: CUDA out of memory"),
    ],
)
def test_a_policy_that_fails_to_start_stops_local_server_saying_why(
    tmp_path: Path, fail: str, said: str, in_process: bool
) -> None:
    app = create_app(
        Lifecycle(str(tmp_path / "log"), fail=fail), ServerConfig(in_process=in_process)
    )
    with pytest.raises(RuntimeError, match=said):
        LocalServer(app).start()


@pytest.fixture(scope="module")
def misbehaving() -> LocalServer:
    config = ServerConfig(worker=WorkerSettings(inference_timeout_s=1.0), infer_timeout_s=10)
    with LocalServer(create_app(Misbehaving(), config)) as server:
        yield server


def _post(server: LocalServer, task: str) -> httpx.Response:
    body, content_type = encode_request(
        Observation({"cam": np.zeros((8, 8, 3), np.uint8)}, task=task)
    )
    return httpx.post(
        server.url + GENERATIONS, content=body, headers={"Content-Type": content_type}, timeout=30
    )


@pytest.mark.parametrize(
    ("task", "status", "detail"),
    [
        ("shape", 500, "policy returned actions of shape [4, 9]; expected [H, 3] with H in 1..4"),
        ("dtype", 500, "policy returned actions of dtype object; expected numbers (float32)"),
        ("nan", 500, "policy returned NaN or infinite actions"),
        ("inf", 500, "policy returned NaN or infinite actions"),
        ("ragged", 500, "policy returned actions that are not an array"),
        ("raise", 500, "policy failed (RuntimeError); details are in the server log"),
        ("hang", 504, "inference took longer than 1 s; the worker was stopped"),
    ],
)
def test_a_misbehaving_policy_fails_that_request_only(
    misbehaving: LocalServer, task: str, status: int, detail: str
) -> None:
    reply = _post(misbehaving, task)
    assert reply.status_code == status, reply.text
    assert reply.json()["detail"].startswith(detail)
    assert "/opt/weights" not in reply.text
    with ActionClient(misbehaving.url) as client:  # it goes on serving (a new worker after a hang)
        after = client.infer(Observation({"cam": np.zeros((8, 8, 3), np.uint8)}, task="fine"))
    np.testing.assert_array_equal(after.actions, np.full((4, 3), 0.5, np.float32))


def test_a_failed_start_shows_on_health_and_requests_without_a_retry(tmp_path: Path) -> None:
    app = create_app(Lifecycle(str(tmp_path / "log"), fail="load"), ServerConfig())
    server = LocalServer(app).start(wait_ready=False)
    try:
        deadline = time.monotonic() + 30
        while (health := httpx.get(f"{server.url}/health", timeout=5)).json()[
            "status"
        ] == "loading":
            assert time.monotonic() < deadline
            time.sleep(0.05)
        assert (health.status_code, health.json()) == (503, {"status": "failed"})
        body, content_type = encode_request(Observation(_frames(), state=np.zeros(5)))
        reply = httpx.post(server.url + GENERATIONS, content=body,
                           headers={"Content-Type": content_type}, timeout=5)  # fmt: skip
        assert reply.status_code == 503 and "retry-after" not in reply.headers
        assert reply.json() == {"detail": "the policy failed to start; see the server log"}
        assert "secret" not in health.text + reply.text
    finally:
        server.stop()
