"""Servers that misbehave on purpose, and a helper to run the CLI in-process."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from vla_client.cli import main


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

    from vla_client.server import LocalServer

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

    from vla_client.server import LocalServer

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
    from vla_client.server import LocalServer, ReferencePolicy, create_app

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
