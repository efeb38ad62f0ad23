"""``vla-client eval`` counts what went wrong where it went wrong: a server that answers
malformed chunks after the preflight, an environment that raises, a server whose actions the
robot cannot take. Each once read as a bad policy (0 chunks, 0 failed requests, no error,
exit 0), a traceback that ended the run, or numpy's reshape message in every episode.
"""

from __future__ import annotations

import importlib.util
import json
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from vla_client.protocol import GENERATIONS_PATH, METADATA_PATH
from vla_client.server import LocalServer, ReferencePolicy, ServerConfig, create_app

FIXED = ("--round-trip-ms", "20")
PREFLIGHT = 6  # requests before the first episode in simulated time: one to warm up, five timed
GOOD = np.linspace(-0.05, 0.05, 20, dtype=np.float32).reshape(10, 2)  # a horizon of 10, 2-D

# What the server answers to request `index` (from 0): a chunk, as a list.
Answer = Callable[[int], Any]
MALFORMED: dict[str, Answer] = {
    "empty": lambda index: [[]],
    "batch of one": lambda index: GOOD[None].tolist(),
    "dim that changes": lambda index: (
        GOOD if index < PREFLIGHT + 2 else np.ones((10, 3))
    ).tolist(),
}


def scripted_app(answer: Answer, good: int = PREFLIGHT) -> Starlette:
    """The action API over HTTP: metadata announcing a horizon of 10, `good` chunks (for the
    preflight), then what `answer` says (each echoes its request's id)."""
    served = 0

    async def metadata(request: Request) -> JSONResponse:
        return JSONResponse({"object": "action.metadata", "output": {"action_horizon": 10}})

    async def generations(request: Request) -> JSONResponse:
        nonlocal served
        index, served = served, served + 1
        actions = GOOD.tolist() if index < good else answer(index)
        body = await request.json()
        return JSONResponse({"request_id": body["request_id"], "actions": actions})

    return Starlette(
        routes=[
            Route(METADATA_PATH, metadata, methods=["GET"]),
            Route(GENERATIONS_PATH, generations, methods=["POST"]),
        ]
    )


def scripted_url(name: str) -> Any:
    """A scripted server on a free loopback port, answering malformed chunks of kind `name`."""
    return LocalServer(scripted_app(MALFORMED[name]))  # type: ignore[arg-type]


@pytest.mark.parametrize("name", sorted(MALFORMED))
def test_malformed_chunks_after_the_preflight_fail_the_episodes_with_the_reason(cli, name):
    with scripted_url(name) as server:
        run = cli("eval", server.url, "--episodes", "2", *FIXED, "--json")
    assert run.code == 1, run.err  # a broken server is a failed run, not a bad policy
    first, second = json.loads(run.out)["cells"][0]["episodes"]
    assert first["failed_requests"] >= 5 and "ProtocolError: " in first["last_failure"]
    assert first["error"].startswith("no chunk for ")
    assert first["error"].endswith(f"requests failing: {first['last_failure']}")
    for episode in (first, second):
        assert not episode["success"]
        assert episode["steps"] < 30  # given up after --give-up-s, not played to the end
    if name == "dim that changes":  # the gate has the dim from the first episode's chunks
        assert second["error"].startswith("UnsafeActionError: chunk shape [10, 3], expected")
    else:
        assert second["error"] == first["error"]


def test_the_table_names_the_reason(cli):
    with scripted_url("empty") as server:
        run = cli("eval", server.url, "--episodes", "1", *FIXED)
    assert run.code == 1
    assert "seed 0: no chunk for" in run.out and "ProtocolError: actions must be" in run.out


def test_a_batch_from_the_first_request_stops_the_run_with_one_line(cli, error_line):
    with LocalServer(scripted_app(lambda index: GOOD[None].tolist(), good=0)) as server:  # type: ignore[arg-type]
        run = cli("eval", server.url, *FIXED)
    assert run.code == 1 and run.out == ""
    line = error_line(run.err)
    assert f"the server at {server.url} answers actions of shape [1, 10, 2], not one chunk" in line


GYM = importlib.util.find_spec("gymnasium") is not None
needs_gym = pytest.mark.skipif(not GYM, reason="gymnasium is not installed (the 'sim' extra)")
RAISING = "vla_client_tests/Raising-v0"


def raising_env(fail_seed: int, where: str = "step") -> Any:
    """A Gymnasium environment with one camera and 2-D actions whose `where` (step or reset)
    raises in episode `fail_seed`, as a driver fault would."""
    import gymnasium
    from gymnasium import spaces

    class Raising(gymnasium.Env):  # type: ignore[type-arg]
        observation_space = spaces.Box(0, 255, (48, 64, 3), np.uint8)
        action_space = spaces.Box(-1.0, 1.0, (2,), np.float32)

        def reset(self, *, seed: int | None = None, options: Any = None) -> Any:
            super().reset(seed=seed)
            self.seed_ = seed
            if where == "reset" and seed == fail_seed:
                raise RuntimeError("camera driver lost")
            return np.zeros((48, 64, 3), np.uint8), {}

        def step(self, action: Any) -> Any:
            if where == "step" and self.seed_ == fail_seed:
                raise RuntimeError("motor driver fault")
            return np.zeros((48, 64, 3), np.uint8), 1.0, False, False, {"is_success": False}

    return Raising()


@pytest.fixture(scope="module")
def two_dim_url() -> Iterator[str]:
    with LocalServer(create_app(ReferencePolicy(action_dim=2, action_horizon=8))) as server:
        yield server.url


@needs_gym
@pytest.mark.parametrize("where", ["step", "reset"])
def test_an_environment_that_raises_fails_its_episode_and_the_run_goes_on(cli, two_dim_url, where):
    import gymnasium

    gymnasium.register(RAISING, entry_point=lambda: raising_env(1, where))
    try:
        run = cli("eval", two_dim_url, "--env", RAISING, "--episodes", "3", "--max-steps", "6",
                  *FIXED, "--json")  # fmt: skip
    finally:
        gymnasium.registry.pop(RAISING)
    assert run.code == 1, run.err
    episodes = json.loads(run.out)["cells"][0]["episodes"]
    assert [e["seed"] for e in episodes] == [0, 1, 2]
    said = "camera driver lost" if where == "reset" else "motor driver fault"
    assert episodes[1]["error"] == f"the environment failed: RuntimeError: {said}"
    assert episodes[0]["error"] is None and episodes[2]["error"] is None
    assert episodes[0]["steps"] == episodes[2]["steps"] == 6


@needs_gym
def test_an_environment_that_fails_before_the_first_episode_is_one_line(
    cli, error_line, two_dim_url
):
    import gymnasium

    gymnasium.register(RAISING, entry_point=lambda: raising_env(0, "reset"))
    try:
        run = cli("eval", two_dim_url, "--env", RAISING, *FIXED)
    finally:
        gymnasium.registry.pop(RAISING)
    assert run.code == 1 and run.out == ""
    line = error_line(run.err)
    assert line.endswith(
        f"the environment {RAISING} failed before the first episode: RuntimeError: camera "
        "driver lost"
    )


@pytest.fixture(scope="module")
def seven_dim_url() -> Iterator[str]:
    """What a plain ``vla-client serve`` gives: the reference policy's 7-value actions."""
    with LocalServer(create_app(ReferencePolicy(), ServerConfig(in_process=True))) as server:
        yield server.url


def test_an_action_dim_the_robot_cannot_take_is_refused_before_the_first_episode(
    cli, usage_error, seven_dim_url
):
    line = usage_error(cli("eval", seven_dim_url, "--episodes", "1", *FIXED))
    assert "the built-in reach task takes actions of 2 values" in line
    assert "gives 7" in line and "vla-client serve --policy reach" in line
    assert "--action-dim" not in line  # the reference policy with 2 values fails every episode


@pytest.mark.skipif(importlib.util.find_spec("gym_pusht") is None, reason="needs gym-pusht")
def test_pusht_against_a_plain_server_is_refused_naming_the_fix(cli, usage_error, seven_dim_url):
    line = usage_error(cli("eval", seven_dim_url, "--env", "gym_pusht/PushT-v0", "--env-option",
                           "obs_type=pixels_agent_pos", "--env-camera", "pixels=top"))  # fmt: skip
    assert "the environment gym_pusht/PushT-v0 takes actions of 2 values" in line
    assert "vla-client serve --action-dim 2" in line


def test_prefetch_at_or_past_the_horizon_is_refused(cli, usage_error, two_dim_url):
    line = usage_error(cli("eval", two_dim_url, "--prefetch-at", "99", *FIXED))
    assert "--prefetch-at 99 is not below the server's action horizon of 8: give 0..7" in line
    assert "--prefetch-at 8 is not below" in usage_error(
        cli("eval", two_dim_url, "--prefetch-at", "8", *FIXED)
    )
