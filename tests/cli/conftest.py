"""Servers that misbehave on purpose or count what reaches them, and helpers to run the CLI
in-process and check its error lines."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from vla_client.cli import main
from vla_client.server import LocalServer, ReferencePolicy, ServerConfig, create_app
from vla_client.server.policy import PolicyInput


@dataclass
class CliRun:
    code: int
    out: str
    err: str


@pytest.fixture
def cli(capsys: pytest.CaptureFixture[str]):
    """Run ``vla-client ARGS`` in this process; returns exit code, stdout and stderr."""

    def run(*args: str) -> CliRun:
        code = main(list(args))
        captured = capsys.readouterr()
        return CliRun(code, captured.out, captured.err)

    return run


@pytest.fixture(scope="session")
def slow_server_url() -> Iterator[str]:
    """A server that takes 2 s to answer any generation request, for timeout exits."""
    from fastapi import FastAPI

    app = FastAPI()

    @app.post("/v1/actions/generations")
    async def generations() -> dict[str, object]:
        await asyncio.sleep(2.0)
        return {}

    with LocalServer(app) as server:
        yield server.url


@pytest.fixture(scope="session")
def bad_metadata_url() -> Iterator[str]:
    """A server that answers the action API with documents that break the contract."""
    from fastapi import FastAPI

    app = FastAPI()

    @app.get("/v1/actions/metadata")
    def metadata() -> dict[str, object]:
        return {"object": "action.metadata", "output": {"action_horizon": "many"}}

    @app.post("/v1/actions/generations")
    def generations() -> dict[str, object]:
        return {"object": "action.generation", "data": "not actions"}

    with LocalServer(app) as server:
        yield server.url


@pytest.fixture(scope="session")
def wrist_only_url() -> Iterator[str]:
    """A reference server whose policy takes exactly one camera named ``wrist``."""
    with LocalServer(create_app(ReferencePolicy(camera_names=("wrist",)))) as server:
        yield server.url


@pytest.fixture
def error_line():
    """Checks a failing command printed exactly one ``vla-client: error:`` line; returns it."""

    def check(text: str) -> str:
        lines = [line for line in text.splitlines() if line.strip()]
        assert len(lines) == 1, text
        assert lines[0].startswith("vla-client: error: "), text
        return lines[0]

    return check


@pytest.fixture
def usage_error():
    """Checks a command refused its command line: exit 2 and one ``vla-client: error:`` line."""

    def check(run: CliRun) -> str:
        assert run.code == 2, run
        lines = [line for line in run.err.splitlines() if line.strip()]
        assert len(lines) == 1, run.err
        assert lines[0].startswith("vla-client: error: ") and "--help" in lines[0], run.err
        assert run.out == ""
        return lines[0]

    return check


class CountingPolicy(ReferencePolicy):
    """The reference policy, noting when each observation reached it (`time.monotonic()`)."""

    def __init__(self) -> None:
        super().__init__(action_horizon=10, action_dim=7)
        self.arrivals: list[float] = []

    def infer(self, observation: PolicyInput):  # type: ignore[no-untyped-def]
        self.arrivals.append(time.monotonic())
        return super().infer(observation)


@dataclass
class CountingServer:
    url: str
    policy: CountingPolicy

    @property
    def requests(self) -> int:
        return len(self.policy.arrivals)


@pytest.fixture(scope="session")
def _counting_server() -> Iterator[CountingServer]:
    policy = CountingPolicy()
    with LocalServer(create_app(policy, ServerConfig(in_process=True))) as server:
        yield CountingServer(server.url, policy)


@pytest.fixture
def counting_server(_counting_server: CountingServer) -> CountingServer:
    """A reference server (policy in-process) that counts the observations it served; starts
    each test at zero."""
    _counting_server.policy.arrivals.clear()
    return _counting_server
