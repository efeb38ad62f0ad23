"""The inference worker's OpenMP settings: torch's thread count and the idle threads' wait
policy, read back from the worker process itself (`ThreadReport`, ``/proc/PID/environ``)."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from pathlib import Path

import pytest
from serve_process import start_serve
from worker_doubles import ThreadReport

from vla_client.server import PolicyInput, ServerConfig
from vla_client.server.config import WorkerSettings
from vla_client.server.worker import WorkerRunner
from vla_client.server.worker.threads import default_torch_threads, worker_threads

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
from load_test import free_port

pytest.importorskip("torch")


def worker_sees(settings: WorkerSettings, entrypoints: int = 1) -> tuple[int, dict[str, str]]:
    """torch's thread count in a started worker and that worker's environment."""

    async def run() -> tuple[int, dict[str, str]]:
        runner = WorkerRunner(ThreadReport(), settings, entrypoints=entrypoints)
        await runner.start()
        try:
            actions, _ = await runner.infer(PolicyInput(images={}))
            threads, pid = (int(value) for value in actions[0])
            assert pid == runner.worker_pid
            raw = Path(f"/proc/{pid}/environ").read_bytes()
            pairs = (item.partition(b"=") for item in raw.split(b"\0") if item)
            return threads, {key.decode(): value.decode() for key, _, value in pairs}
        finally:
            await runner.close()

    return asyncio.run(run())


@pytest.fixture
def clean_environment(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    monkeypatch.delenv("OMP_WAIT_POLICY", raising=False)
    return monkeypatch


@pytest.mark.skipif(not Path("/proc/self/environ").exists(), reason="reads /proc/PID/environ")
def test_by_default_the_worker_leaves_a_core_per_entrypoint_and_its_threads_sleep(
    clean_environment: pytest.MonkeyPatch,
) -> None:
    threads, environ = worker_sees(WorkerSettings())
    assert threads == default_torch_threads(1) == max(1, len(os.sched_getaffinity(0)) - 1)
    assert environ["OMP_WAIT_POLICY"] == "PASSIVE"
    assert environ["OMP_NUM_THREADS"] == str(threads)


@pytest.mark.skipif(not Path("/proc/self/environ").exists(), reason="reads /proc/PID/environ")
def test_the_option_sets_the_threads_and_the_users_wait_policy_is_kept(
    clean_environment: pytest.MonkeyPatch,
) -> None:
    clean_environment.setenv("OMP_WAIT_POLICY", "active")
    cores = len(os.sched_getaffinity(0))
    clean_environment.setenv("OMP_NUM_THREADS", str(cores))  # the option wins over it
    threads, environ = worker_sees(WorkerSettings(torch_threads=1))
    assert threads == 1
    assert environ["OMP_WAIT_POLICY"] == "active"


@pytest.mark.skipif(not Path("/proc/self/environ").exists(), reason="reads /proc/PID/environ")
def test_without_the_option_the_users_thread_count_is_kept(
    clean_environment: pytest.MonkeyPatch,
) -> None:
    cores = len(os.sched_getaffinity(0))
    if cores < 2:
        pytest.skip("needs 2 cores, to tell the user's count from the default")
    clean_environment.setenv("OMP_NUM_THREADS", str(cores))  # the default would be one less
    threads, environ = worker_sees(WorkerSettings())
    assert threads == cores
    assert environ["OMP_WAIT_POLICY"] == "PASSIVE"


@pytest.mark.parametrize(("cores", "entrypoints", "expected"), [(8, 1, 7), (8, 3, 5), (1, 1, 1)])
def test_the_default_is_the_usable_cores_less_the_entrypoints(
    monkeypatch: pytest.MonkeyPatch, cores: int, entrypoints: int, expected: int
) -> None:
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(cores)), raising=False)
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    assert default_torch_threads(entrypoints) == expected
    assert worker_threads(None, entrypoints, {}).threads == str(expected)


@pytest.mark.parametrize("value", [0, -1, "more", 2.0, True, "4", float("nan")])
def test_a_bad_thread_count_is_refused(value: object) -> None:
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    value = cores + 1 if value == "more" else value  # more threads than cores
    with pytest.raises(ValueError, match=rf"torch_threads must be an integer in 1\.\.{cores} "):
        WorkerSettings(torch_threads=value)  # type: ignore[arg-type]


@pytest.mark.parametrize("given", ["", "spin", "passive,"])
def test_an_unknown_wait_policy_is_refused_not_ignored(
    monkeypatch: pytest.MonkeyPatch, given: str
) -> None:
    with pytest.raises(ValueError, match="OMP_WAIT_POLICY must be ACTIVE or PASSIVE"):
        worker_threads(2, 1, {"OMP_WAIT_POLICY": given})
    monkeypatch.setenv("OMP_WAIT_POLICY", given)
    with pytest.raises(ValueError, match="OMP_WAIT_POLICY must be ACTIVE or PASSIVE"):
        WorkerRunner(ThreadReport())


def test_threads_for_an_in_process_policy_are_refused() -> None:
    with pytest.raises(ValueError, match="in_process has none"):
        ServerConfig(in_process=True, worker=WorkerSettings(torch_threads=2))


@pytest.mark.parametrize("api_servers", ["1", "2"])
def test_serve_says_what_the_worker_got(
    clean_environment: pytest.MonkeyPatch, api_servers: str
) -> None:
    clean_environment.setenv("OMP_WAIT_POLICY", "active")
    server = start_serve(free_port(), "--torch-threads", "1", "--api-servers", api_servers)
    server.send_signal(signal.SIGINT)
    errors = server.communicate(timeout=30)[1].decode()
    said = "Inference worker: OMP_NUM_THREADS=1 (option), OMP_WAIT_POLICY=active (environment)"
    assert said in errors
