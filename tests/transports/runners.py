"""Runners that misbehave on purpose, and a server around one, for the retry and error tests.

Each runner counts the requests that reached it (`calls`), so a test can tell how many times
the client really sent a request, not only what the client says it did.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from vla_client.client import ActionClient, AsyncActionClient
from vla_client.errors import InferenceError, VLAClientError
from vla_client.observation import Observation
from vla_client.server import LocalServer, ReferencePolicy, ServerConfig, create_app
from vla_client.server.engine.inference import RequestMemory, ThreadRunner
from vla_client.server.policy import PolicyInput


class FlakyRunner(ThreadRunner):
    """Fails the first `failures` requests with `error`, then runs the policy."""

    def __init__(self, error: InferenceError, failures: int) -> None:
        super().__init__(ReferencePolicy(action_horizon=4, action_dim=3))
        self.error, self.failures, self.calls = error, failures, 0

    async def infer(self, observation: PolicyInput, memory: RequestMemory | None = None) -> Any:
        self.calls += 1
        if self.calls <= self.failures:
            raise self.error
        return await super().infer(observation, memory)


class SlowRunner(ThreadRunner):
    """Answers after `delay_s`, like a stalled worker."""

    def __init__(self, delay_s: float) -> None:
        super().__init__(ReferencePolicy(action_horizon=4, action_dim=3))
        self.delay_s = delay_s
        self.calls = 0

    async def infer(self, observation: PolicyInput, memory: RequestMemory | None = None) -> Any:
        self.calls += 1
        await asyncio.sleep(self.delay_s)
        return await super().infer(observation, memory)


def serve(runner: ThreadRunner) -> LocalServer:
    config = ServerConfig(in_process=True)
    return LocalServer(create_app(runner.policy, config, runner=runner))


TRANSPORTS: dict[str, Callable[[LocalServer], dict[str, str]]] = {
    "http": lambda server: {"base_url": server.url},
    "realtime": lambda server: {"base_url": f"ws://127.0.0.1:{server.port}"},
    "openpi": lambda server: {"base_url": f"ws://127.0.0.1:{server.port}", "endpoint": "openpi"},
}
"""How a client reaches `server` over each transport: HTTP and both websocket endpoints."""


def client_for(server: LocalServer, transport: str, **options: Any) -> ActionClient:
    return ActionClient(**TRANSPORTS[transport](server), **options)


def async_client_for(server: LocalServer, transport: str, **options: Any) -> AsyncActionClient:
    return AsyncActionClient(**TRANSPORTS[transport](server), **options)


def infer_once(
    client_kind: str, server: LocalServer, transport: str, observation: Observation, **options: Any
) -> tuple[Any, int]:
    """One `infer` by a fresh ``sync`` or ``async`` client built with `options`: (the result or
    the error raised, the client's retry count)."""
    if client_kind == "sync":
        with client_for(server, transport, **options) as client:
            try:
                return client.infer(observation), client.stats.retries
            except VLAClientError as exc:
                return exc, client.stats.retries

    async def run() -> tuple[Any, int]:
        async with async_client_for(server, transport, **options) as client:
            try:
                return await client.infer(observation), client.stats.retries
            except VLAClientError as exc:
                return exc, client.stats.retries

    return asyncio.run(run())
