"""Both clients against RoboArena's policy server over a real websocket on 127.0.0.1
(tests/roboarena_server.py, written from RoboArena's published server code).

Checked at the server: every request's bytes, bit for bit, against openpi-client's packing of
the observation RoboArena's evaluator sends (its ``endpoint`` included); the cameras it asks
for, resized to its resolution, and no others; the reset with the session id. Checked at the
client: the config read as metadata, the reset's text answer, a traceback as `ServerError`
followed by a fresh connection.
"""

from __future__ import annotations

import asyncio
import json
import re
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from openpi_client import msgpack_numpy

from roboarena_server import ArenaServer
from vla_client import ActionClient, AsyncActionClient, Observation
from vla_client.cli import main
from vla_client.errors import ContractError, ProtocolError, ServerError

TASK = "put the marker in the cup"
CONFIG = {
    "image_resolution": [24, 32],
    "needs_wrist_camera": True,
    "n_external_cameras": 2,
    "needs_stereo_camera": False,
    "needs_session_id": True,
    "action_space": "joint_position",
}
NAMES = ("exterior_image_1_left", "exterior_image_2_left", "wrist_image_left")


def observation(names: tuple[str, ...] = NAMES, size: tuple[int, int] = (24, 32)) -> Observation:
    rng = np.random.default_rng(5)
    frames = {name: rng.integers(0, 256, (*size, 3), dtype=np.uint8) for name in names}
    return Observation(frames, state=np.arange(8, dtype=np.float64) / 10, task=TASK)


class Blocking:
    """An `AsyncActionClient` whose calls are run to their end on `loop`."""

    def __init__(self, client: AsyncActionClient, loop: asyncio.AbstractEventLoop) -> None:
        self._client, self._loop = client, loop

    def __getattr__(self, name: str) -> Any:
        attribute = getattr(self._client, name)
        if not callable(attribute):
            return attribute
        return lambda *args, **kwargs: self._loop.run_until_complete(attribute(*args, **kwargs))


def call(kind: str, url: str, act: Callable[[Any], Any], **options: Any) -> Any:
    """`act(client)` on a blocking or an asyncio client on RoboArena's endpoint."""
    options.setdefault("endpoint", "roboarena")
    if kind == "sync":
        with ActionClient(url, **options) as client:
            return act(client)
    loop = asyncio.new_event_loop()
    client = Blocking(AsyncActionClient(url, **options), loop)
    try:
        return act(client)
    finally:
        client.close()
        loop.close()


BOTH = pytest.mark.parametrize("kind", ["sync", "async"])


@BOTH
def test_every_request_is_bit_exact_at_the_server(kind: str) -> None:
    obs = observation()
    with ArenaServer(CONFIG) as server:
        result, session = call(kind, server.url, lambda c: (c.infer(obs), c._session.session_id))
    state = obs.state
    assert state is not None
    expected = {
        **{f"observation/{name}": obs.images[name] for name in NAMES},
        "observation/joint_position": state[:7],
        "observation/gripper_position": state[7:],
        "prompt": TASK,
        "session_id": session,
        "endpoint": "infer",
    }
    assert server.frames == [msgpack_numpy.packb(expected)]
    assert result.actions.shape == (3, 8)
    assert result.actions[1, 2] == pytest.approx(12 + float(np.sum(state[:7])))
    result.actions[0] += 1  # the client's own array (the reply's float32 is read-only)


@BOTH
def test_only_the_cameras_it_asks_for_go_resized_and_the_rest_is_named_once(kind: str) -> None:
    config = {**CONFIG, "n_external_cameras": 1}
    camera_map = {"left": "exterior_image_1_left", "wrist": "wrist_image_left"}
    obs = observation(("left", "right", "wrist"), size=(48, 48))
    with ArenaServer(config) as server, warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        call(kind, server.url, lambda c: [c.infer(obs) for _ in range(2)], camera_map=camera_map)
    sent = msgpack_numpy.unpackb(server.frames[1])
    assert sorted(k for k in sent if "image" in k) == [
        "observation/exterior_image_1_left",
        "observation/wrist_image_left",
    ]
    assert sent["observation/wrist_image_left"].shape == (24, 32, 3)
    dropped = [str(w.message) for w in caught if "not sending" in str(w.message)]
    assert len(dropped) == 1 and "['right']" in dropped[0]


@BOTH
def test_reset_takes_the_text_answer_and_keeps_the_connection(kind: str) -> None:
    def episodes(client: Any) -> tuple[str, str]:
        client.infer(observation())
        first = client._session.session_id
        client.reset()
        client.infer(observation())
        return first, client._session.session_id

    with ArenaServer(CONFIG) as server:
        first, second = call(kind, server.url, episodes)
    assert msgpack_numpy.unpackb(server.frames[1]) == {"endpoint": "reset", "session_id": first}
    assert msgpack_numpy.unpackb(server.frames[2])["session_id"] == second != first
    assert server.connections == 1


@BOTH
def test_a_traceback_is_a_server_error_and_the_next_request_reconnects(kind: str) -> None:
    calls: list[int] = []

    def policy(obs: dict[str, Any]) -> Any:
        calls.append(1)
        if len(calls) == 1:
            raise RuntimeError("the policy fell over")
        return np.zeros((2, 8), np.float32)

    def twice(client: Any) -> Any:
        with pytest.raises(ServerError) as failed:
            client.infer(observation())
        return failed.value, client.infer(observation())

    with ArenaServer(CONFIG, policy) as server:
        error, result = call(kind, server.url, twice)
    assert "RuntimeError: the policy fell over" in error.detail
    assert "Traceback" in error.detail
    assert result.actions.shape == (2, 8)
    assert server.connections == 2


def test_the_config_is_the_metadata() -> None:
    with ArenaServer({**CONFIG, "needs_wrist_camera": False}) as server:
        metadata = call("sync", server.url, lambda c: c.metadata())
    assert metadata.input.image_keys == list(NAMES[:2])
    assert metadata.input.image_size == [24, 32]
    assert metadata.input.state_dim == 8
    assert metadata.model_extra["roboarena"]["action_space"] == "joint_position"


@pytest.mark.parametrize(
    ("check_contract", "match"), [(True, "expects 8 values"), (False, "7 joint positions")]
)
def test_a_state_that_is_not_joints_and_gripper_is_refused_before_sending(
    check_contract: bool, match: str
) -> None:
    obs = Observation(observation().images, state=np.zeros(7), task=TASK)
    with ArenaServer(CONFIG) as server, pytest.raises(ContractError, match=match):
        call("sync", server.url, lambda c: c.infer(obs), check_contract=check_contract)
    assert server.frames == []


def test_a_server_asking_for_stereo_cameras_is_refused() -> None:
    with (
        ArenaServer({**CONFIG, "needs_stereo_camera": True}) as server,
        pytest.raises(ProtocolError, match="stereo"),
    ):
        call("sync", server.url, lambda c: c.infer(observation()))
    assert server.frames == []


def test_the_url_is_used_as_given() -> None:
    with ActionClient("ws://h:8000", endpoint="roboarena") as client:
        assert client.transport.url == "ws://h:8000/"
    with ActionClient("http://h:8000/policy", endpoint="roboarena") as client:
        assert client.transport.url == "ws://h:8000/policy"


def test_the_cli_names_its_cameras_and_sizes_its_state_as_the_server_asks(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """``vla-client metadata|send|bench --endpoint roboarena``: the synthetic cameras are the
    ones the server asks for, the state its 8 values; bench measures the one path it takes."""
    with ArenaServer(CONFIG) as server:
        assert main(["metadata", server.url, "--endpoint", "roboarena", "--json"]) == 0
        document = json.loads(capsys.readouterr().out)
        assert main(["send", server.url, "--endpoint", "roboarena", "--json"]) == 0
        sent = json.loads(capsys.readouterr().out)
        assert main(["bench", server.url, "--endpoint", "roboarena", "--repeat", "2"]) == 0
        ranking = capsys.readouterr().out
    assert document["client_checks"]["cameras"] == list(NAMES)
    assert sent["action_shape"] == [3, 8]
    assert "raw/msgpack/ws" in ranking
    request = msgpack_numpy.unpackb(server.frames[0])
    assert request["observation/joint_position"].shape == (7,)
    assert request["observation/wrist_image_left"].shape == (24, 32, 3)


def test_the_roboarena_snippet_of_the_docs_runs() -> None:
    """docs/real-servers.md's RoboArena example, against the test server (its URL replaced)."""
    page = (Path(__file__).parents[2] / "docs" / "real-servers.md").read_text()
    pattern = r"<!-- run against a RoboArena server: [^>]+ -->\n```python\n(.*?)```"
    (code,) = re.findall(pattern, page, flags=re.S)
    config = {"image_resolution": [224, 224], "n_external_cameras": 1, "needs_session_id": True}
    with ArenaServer(config) as server:
        code = re.sub(r'URL = "[^"]+"', f'URL = "{server.url}"', code)
        namespace: dict[str, Any] = {}
        exec(compile(code, "real-servers.md", "exec"), namespace)
    assert namespace["chunk"].shape == (3, 8)
    reset, request = (msgpack_numpy.unpackb(frame) for frame in server.frames)
    assert reset["endpoint"] == "reset"
    assert request["endpoint"] == "infer"
