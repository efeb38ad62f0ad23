"""Several entrypoint processes sharing one inference worker (``serve --api-servers N``)."""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterable
from pathlib import Path

import httpx
import numpy as np
import pytest
from serve_process import wait_until_healthy
from worker_doubles import FaultyPolicy

from oracles import oracle_actions
from vla_client.cameras.scene import synthetic_frames
from vla_client.errors import InferenceError
from vla_client.observation import Observation
from vla_client.protocol import GENERATIONS_PATH as GENERATIONS
from vla_client.protocol import encode_request, loads, read_actions
from vla_client.server import PolicyInput, ReferencePolicy, ServerConfig, create_app
from vla_client.server.api_servers import kept_worker
from vla_client.server.config import WorkerSettings
from vla_client.server.worker import SEGMENT_PREFIX, WorkerRunner

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
import load_test


def command_line(pid: int) -> str:
    return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()


def test_two_entrypoints_share_one_worker_and_stop_cleanly() -> None:
    server = load_test.ServerProcess("--api-servers", "2").start()
    try:
        assert server.process is not None
        processes = {pid: command_line(pid) for pid in load_test.process_tree(server.process.pid)}
        workers = [pid for pid, line in processes.items() if "vla_client.server.worker" in line]
        entrypoints = _entrypoints(server.process.pid)
        assert len(workers) == 1 and len(entrypoints) == 2, processes
        (folder,) = Path(tempfile.gettempdir()).glob(f"vla-client-{server.process.pid}-*")

        observations = [
            Observation(images=synthetic_frames(2, 96, 128, seed=i), task=f"task {i}")
            for i in range(48)
        ]
        replies: dict[int, httpx.Response] = {}

        def client(indices: range) -> None:
            with httpx.Client(base_url=server.url, timeout=30) as http:
                for i in indices:
                    body, content_type = encode_request(
                        observations[i], encoding="raw", wire="msgpack"
                    )
                    reply = http.post(
                        GENERATIONS,
                        content=body,
                        headers={"content-type": content_type},
                    )
                    replies[i] = reply

        threads = [threading.Thread(target=client, args=(range(k, 48, 8),)) for k in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(60)
        assert sorted(replies) == list(range(48))
        for i, reply in replies.items():
            assert reply.status_code == 200, reply.text
            seen = PolicyInput(images=observations[i].images, task=observations[i].task)
            expected = oracle_actions(seen, horizon=16, action_dim=7)
            actions, _ = read_actions(loads(reply.content, "msgpack"))
            np.testing.assert_allclose(actions, expected, rtol=1e-6)
        # A slot's name carries the pid of the entrypoint that made it: both took requests.
        makers = {
            name.split("_")[1] for name in os.listdir("/dev/shm") if name.startswith(SEGMENT_PREFIX)
        }
        assert {str(pid) for pid in entrypoints} <= makers
    finally:
        server.stop()
    assert server.process is not None and server.process.returncode == 0
    assert not load_test.leaked_segments(entrypoints)
    assert not folder.exists(), "the folder with the worker's socket should be gone"
    assert not still_running(processes), processes


def still_running(pids: Iterable[int], wait_s: float = 10.0) -> list[int]:
    """Those of `pids` still alive after up to `wait_s` (resource trackers take a moment)."""
    deadline = time.monotonic() + wait_s
    while True:
        alive = [pid for pid in pids if os.path.exists(f"/proc/{pid}")]
        if not alive or time.monotonic() > deadline:
            return alive
        time.sleep(0.05)


def with_shared_worker(scenario, links: int, policy=None):
    """Run `scenario(runners)`: a worker kept alive as `serve` keeps it, and `links`
    runners connected to it, all in this process."""

    async def run(address: str):
        runners = [WorkerRunner(ReferencePolicy(), address=address) for _ in range(links)]
        for runner in runners:
            await runner.start()
        try:
            return await scenario(runners)
        finally:
            for runner in runners:
                await runner.close()

    address = f"\0vla-client-test-{os.getpid()}-{id(scenario)}"  # abstract: nothing to clean up
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as listener:
        listener.bind(address)
        listener.listen(8)
        settings = WorkerSettings(max_batch=8)
        with kept_worker(policy or FaultyPolicy(), settings, listener):
            return asyncio.run(run(address))


def test_batches_from_different_entrypoints_share_one_policy_call() -> None:
    frames = synthetic_frames(1, 32, 32)

    async def scenario(runners: list[WorkerRunner]) -> list[float]:
        sleeper, *others = runners
        first = asyncio.create_task(sleeper.infer(PolicyInput(images=frames, task="sleep:0.6")))
        await asyncio.sleep(0.2)  # the worker is busy: the next two batches wait for it
        replies = await asyncio.gather(
            *(runner.infer(PolicyInput(images=frames, task="go")) for runner in others)
        )
        await first
        return [float(actions[0, 0]) for actions, _ in replies]

    # FaultyPolicy writes the batch size into chunk[0, 0].
    assert with_shared_worker(scenario, links=3) == [2.0, 2.0]


def test_an_entrypoint_with_a_batch_running_still_joins_the_next_policy_call() -> None:
    """While the worker runs a batch of entrypoint A's, A's next requests and B's wait in the
    worker, and the next policy call takes all four. (Held back at A until its batch came
    back, A's two reached the worker after the call with B's two had started: two calls of
    two, half the batch a fixed-cost forward pass could have run.)"""
    frames = synthetic_frames(1, 32, 32)

    async def scenario(runners: list[WorkerRunner]) -> list[float]:
        a, b = runners
        first = asyncio.create_task(a.infer(PolicyInput(images=frames, task="sleep:0.6")))
        await asyncio.sleep(0.2)  # the worker is busy with A's batch
        replies = await asyncio.gather(
            *(runner.infer(PolicyInput(images=frames, task="go")) for runner in (a, a, b, b))
        )
        await first
        return [float(actions[0, 0]) for actions, _ in replies]

    # FaultyPolicy writes the batch size into chunk[0, 0].
    assert with_shared_worker(scenario, links=2) == [4.0] * 4


def test_a_killed_shared_worker_fails_its_requests_and_comes_back() -> None:
    frames = synthetic_frames(1, 32, 32)

    async def scenario(runners: list[WorkerRunner]) -> tuple[int, int]:
        first, second = runners
        old_pid = first.worker_pid
        crashing = [runner.infer(PolicyInput(images=frames, task="crash")) for runner in runners]
        for outcome in await asyncio.gather(*crashing, return_exceptions=True):
            assert isinstance(outcome, InferenceError) and outcome.status_code == 503
            assert "worker exited" in outcome.detail
        for _ in range(200):  # the serve side restarts the worker, links reconnect
            try:
                actions, _ = await second.infer(PolicyInput(images=frames, task="go"))
                break
            except InferenceError:
                await asyncio.sleep(0.05)
        else:
            pytest.fail("the shared worker did not come back")
        assert actions.shape == (16, 7)
        await first.infer(PolicyInput(images=frames, task="go"))
        assert first.worker_pid == second.worker_pid
        return old_pid or 0, first.worker_pid or 0

    old_pid, new_pid = with_shared_worker(scenario, links=2)
    assert old_pid and new_pid and new_pid != old_pid


def test_weights_that_cannot_load_are_one_error_line(tmp_path: Path) -> None:
    weights = tmp_path / "weights.pt"
    weights.write_bytes(b"not a state dict")
    completed = subprocess.run(
        [sys.executable, "-m", "vla_client.cli", "serve", "--api-servers", "2",
         "--policy", "torch", "--weights", str(weights), "--port", str(load_test.free_port())],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert completed.returncode == 2
    assert completed.stderr.startswith(
        f"vla-client: error: --weights {weights}: policy failed to load: "
    )
    assert completed.stderr.count("\n") == 1


def test_a_killed_entrypoint_is_replaced_and_the_other_keeps_serving() -> None:
    server = load_test.ServerProcess("--api-servers", "2").start()
    assert server.process is not None
    entrypoints = replaced = _entrypoints(server.process.pid)
    body, content_type = encode_request(
        Observation(images=synthetic_frames(1, 64, 64)), encoding="raw", wire="msgpack"
    )
    try:
        os.kill(entrypoints[0], signal.SIGKILL)
        with httpx.Client(base_url=server.url, timeout=30) as http:
            statuses = [
                http.post(
                    GENERATIONS, content=body, headers={"content-type": content_type}
                ).status_code
                for _ in range(20)
            ]
        assert statuses == [200] * 20
        deadline = time.monotonic() + 20
        while len(replaced := _entrypoints(server.process.pid)) < 2:
            assert time.monotonic() < deadline, "the killed entrypoint was not replaced"
            time.sleep(0.1)
        assert entrypoints[0] not in replaced and entrypoints[1] in replaced
    finally:
        server.stop()
    assert not load_test.leaked_segments([*entrypoints, *replaced])


def _entrypoints(pid: int) -> list[int]:
    """The entrypoint processes under `pid` (uvicorn starts them with multiprocessing's spawn)."""
    found = []
    for child in load_test.process_tree(pid):
        try:
            if "multiprocessing.spawn" in command_line(child):
                found.append(child)
        except OSError:  # gone meanwhile
            pass
    return found


def test_an_entrypoint_listens_only_once_linked_to_the_shared_worker() -> None:
    """uvicorn replaces a killed entrypoint with a new one beside the survivors; if that one
    listened before its link to the (running) worker was up, it would answer "the policy is
    loading" (503) to the requests it takes while its siblings serve. Its lifespan ends only
    once linked, and then its /health is ok."""
    address = f"\0vla-client-test-{os.getpid()}-late-worker"
    runner = WorkerRunner(ReferencePolicy(), address=address)
    app = create_app(ReferencePolicy(), ServerConfig(), runner=runner)
    start_the_worker, stop_the_worker = threading.Event(), threading.Event()

    def worker() -> None:
        start_the_worker.wait(30)
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as listener:
            listener.bind(address)
            listener.listen(8)
            with kept_worker(ReferencePolicy(), WorkerSettings(), listener):
                stop_the_worker.wait(60)

    async def scenario() -> tuple[bool, int]:
        messages: asyncio.Queue[dict[str, str]] = asyncio.Queue()
        messages.put_nowait({"type": "lifespan.startup"})
        started = asyncio.Event()

        async def send(message: dict[str, str]) -> None:
            if message["type"] == "lifespan.startup.complete":
                started.set()

        scope = {"type": "lifespan", "asgi": {"version": "3.0"}, "state": {}}
        lifespan = asyncio.create_task(app(scope, messages.get, send))
        await asyncio.sleep(0.5)  # no worker to link to yet
        listened_before_the_link = started.is_set()
        start_the_worker.set()
        await asyncio.wait_for(started.wait(), 30)
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://entrypoint") as http:
            health = (await http.get("/health")).status_code
        messages.put_nowait({"type": "lifespan.shutdown"})
        await asyncio.wait_for(lifespan, 30)
        return listened_before_the_link, health

    thread = threading.Thread(target=worker, daemon=True)
    thread.start()
    try:
        listened_before_the_link, health = asyncio.run(scenario())
    finally:
        start_the_worker.set()
        stop_the_worker.set()
        thread.join(30)
    assert not listened_before_the_link
    assert health == 200


def test_an_entrypoint_slower_to_start_than_the_health_check_is_not_killed() -> None:
    """uvicorn kills an entrypoint that does not answer its health check within
    ``timeout_worker_healthcheck``; one still importing the app cannot answer, so on a busy
    machine every entrypoint was killed and restarted, forever. Here each entrypoint takes 3 s
    to import its policy's module against a 1 s health check: both start, once, and serve."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    here = Path(__file__).resolve().parent
    script = (
        "import sys; sys.path.insert(0, sys.argv[1])\n"
        "from slow_start_policy import SlowStartPolicy\n"
        "from vla_client.server import ServerConfig\n"
        "from vla_client.server.api_servers import serve\n"
        "serve(SlowStartPolicy(), ServerConfig(port=int(sys.argv[2])), 2, log_level='info',"
        " timeout_worker_healthcheck=1)\n"
    )
    source = str(Path(__file__).resolve().parents[2] / "src")
    server = subprocess.Popen(
        [sys.executable, "-c", script, str(here), str(port)],
        env={**os.environ, "PYTHONPATH": source},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        wait_until_healthy(port, server, timeout_s=60)
        body, content_type = encode_request(
            Observation(images=synthetic_frames(1, 64, 64)), encoding="raw", wire="msgpack"
        )
        reply = httpx.post(
            f"http://127.0.0.1:{port}{GENERATIONS}",
            content=body,
            headers={"content-type": content_type},
            timeout=30,
        )
        assert reply.status_code == 200, reply.text
        assert len(_entrypoints(server.pid)) == 2
    finally:
        server.terminate()
        errors = server.communicate(timeout=30)[1].decode()
    assert "died" not in errors, errors[-2000:]
