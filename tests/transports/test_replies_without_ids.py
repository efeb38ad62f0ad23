"""A reply is the one for its observation on every websocket whose replies carry no request id:
vLLM-Omni's robot endpoint, RoboArena's policy server and openpi's, each a real server on
127.0.0.1 (tests/vllm_omni_server.py, tests/roboarena_server.py, an openpi script on
tests/transports/scripted_server.py) made hostile (tests/hostile_frames.py): it storms (five
error frames for one request), duplicates every answer, or pushes its config mid-connection.

Each server's answer depends on the observation (its state's sum), so a reply taken for the
wrong request shows. Before the fix the surplus frames were read as the next requests' replies:
every later request got the actions of an earlier observation (or, after a pushed config, a
`ProtocolError`). Now a frame that arrives unasked, or an error frame, costs the connection,
which is opened again (its config read again) and counted in ``stats.dropped_connections``.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np
import pytest
from scripted_server import METADATA, ScriptedServer

import hostile_frames
from roboarena_server import ArenaServer
from vla_client import ActionClient, AsyncActionClient, Observation
from vla_client.errors import ServerError
from vllm_omni_server import OmniServer, keyed_actions

REQUESTS = 5
SETTLE_S = 0.05
"""A pause after the server has sent all it meant to, for its frames to reach the client (a
control loop's tick leaves more)."""
OMNI_CONFIG = {"action_horizon": 3, "action_keys": ["arm"], "image_resolution": [24, 32]}
ARENA_CONFIG = {"image_resolution": [24, 32], "n_external_cameras": 1, "needs_wrist_camera": True}
SUMMED = {"vllm_omni": 8, "roboarena": 7, "openpi": 8}
"""How many state values each server sums into its answer (RoboArena's: the 7 joints)."""
CAMERAS = {
    "vllm_omni": ("front", "wrist"),
    "roboarena": ("exterior_image_1_left", "wrist_image_left"),
    "openpi": ("front", "wrist"),
}
OPTIONS: dict[str, dict[str, Any]] = {
    "vllm_omni": {}, "roboarena": {"endpoint": "roboarena"}, "openpi": {}
}  # fmt: skip
"""How each family is named to the clients (vLLM-Omni's and openpi's by their URL's path)."""
DROPS = {
    "storm": {"error frame": 1},
    "duplicate": {"unasked frame": REQUESTS - 1},
    "push": {"unasked frame": 1},
}
"""What each hostile server costs: the connection after the storm's first error frame, after
every request but the last (its duplicate waits unasked), after the pushed config."""


def observation(family: str, index: int) -> Observation:
    """Observation `index`: every state value is `index`."""
    frames = {name: np.full((24, 32, 3), index, np.uint8) for name in CAMERAS[family]}
    return Observation(frames, state=np.full(8, float(index)), task="stack the cubes")


def openpi_script(mode: str) -> Callable[[int, dict[str, Any]], tuple[float, list[Any]]]:
    """An openpi server in `mode`: its answer is the state's sum, its errors tracebacks."""

    def script(index: int, request: dict[str, Any]) -> tuple[float, list[Any]]:
        total = float(np.sum(request["observation.state"]))
        answer = {"actions": np.full((4, 2), total, np.float32)}
        error = "Traceback (most recent call last): a retry failed"
        return 0.0, hostile_frames.frames(mode, index, answer, error, METADATA)

    return script


@contextmanager
def hostile_server(family: str, mode: str) -> Iterator[tuple[str, Any]]:
    """The URL of a `family` server in `mode`, and the server."""
    if family == "vllm_omni":
        with OmniServer(OMNI_CONFIG, keyed_actions({"arm": 7}, 3), hostile=mode) as omni:
            yield omni.url, omni
    elif family == "roboarena":
        with ArenaServer(ARENA_CONFIG, hostile=mode) as arena:
            yield arena.url, arena
    else:
        server = ScriptedServer(openpi_script(mode))
        try:
            yield f"ws://127.0.0.1:{server.port}/openpi/policy", server
        finally:
            server.close()


def requests(family: str, server: Any, infer: Callable[[Observation], Any]) -> list[Any]:
    """`REQUESTS` observations sent one at a time, each once the server has sent all it meant
    to for the last: each request's first action value, or the error it raised."""
    outcomes: list[Any] = []
    for index in range(REQUESTS):
        assert server.quiet.wait(5)
        time.sleep(SETTLE_S)
        try:
            outcomes.append(float(infer(observation(family, index)).actions[0, 0]))
        except ServerError as exc:
            outcomes.append(type(exc))
    return outcomes


@pytest.mark.parametrize("kind", ["sync", "async"])
@pytest.mark.parametrize("mode", hostile_frames.HOSTILE)
@pytest.mark.parametrize("family", ["vllm_omni", "roboarena", "openpi"])
def test_each_reply_is_the_one_for_its_observation(family: str, mode: str, kind: str) -> None:
    with hostile_server(family, mode) as (url, server):
        if kind == "sync":
            with ActionClient(url, **OPTIONS[family]) as client:
                outcomes = requests(family, server, client.infer)
                dropped = dict(client.stats.dropped_connections)
        else:
            loop = asyncio.new_event_loop()
            aclient = AsyncActionClient(url, **OPTIONS[family])
            try:
                outcomes = requests(
                    family, server, lambda obs: loop.run_until_complete(aclient.infer(obs))
                )
                dropped = dict(aclient.stats.dropped_connections)
            finally:
                loop.run_until_complete(aclient.close())
                loop.close()
        connections = server.connections
    expected: list[Any] = [float(SUMMED[family] * index) for index in range(REQUESTS)]
    if mode == "storm":
        expected[0] = next(o for o in outcomes if isinstance(o, type))  # checked below
        assert issubclass(expected[0], ServerError)
    assert outcomes == expected
    assert dropped == DROPS[mode]
    assert connections == 1 + sum(DROPS[mode].values())


def test_a_call_cancelled_while_waiting_costs_the_connection() -> None:
    """An asyncio call cancelled while its reply is on the way (``asyncio.wait_for`` around
    `infer`): the reply still comes, and is never read as the next request's."""

    def slow_first(obs: dict[str, Any]) -> Any:
        if float(np.sum(obs["state"])) == 0.0:
            time.sleep(0.3)
        return keyed_actions({"arm": 7}, 3)(obs)

    async def main(url: str) -> tuple[float, dict[str, int]]:
        async with AsyncActionClient(url) as client:
            with pytest.raises(asyncio.TimeoutError):
                await asyncio.wait_for(client.infer(observation("vllm_omni", 0)), 0.1)
            await asyncio.sleep(0.4)  # the first request's reply has come by now
            result = await client.infer(observation("vllm_omni", 1))
            return float(result.actions[0, 0]), dict(client.stats.dropped_connections)

    with OmniServer(OMNI_CONFIG, slow_first) as omni:
        first_value, dropped = asyncio.run(main(omni.url))
    assert first_value == SUMMED["vllm_omni"] * 1
    assert dropped == {"cancelled": 1}
    assert omni.connections == 2
