"""Both clients against vLLM-Omni's robot endpoint over a real websocket on 127.0.0.1
(tests/vllm_omni_server.py, written from vLLM-Omni's published protocol: its own server needs
vLLM and a GPU stack).

Checked at the server: every request's bytes, bit for bit, against openpi-client's packing of
the observation vLLM-Omni's pipelines read; the session id where the config asks for one; the
reset. Checked at the client: the config read as metadata (image size, horizon), the per-key
actions joined in the announced order whatever order the reply lists them in, and error frames
as `ServerErrorFrame` with their code, after which the connection is replaced (its replies
carry no id: a second frame for the refused request would be read as the next one's reply).
"""

from __future__ import annotations

import asyncio
import json
import re
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from openpi_client import msgpack_numpy

from vla_client import ActionClient, AsyncActionClient, Observation
from vla_client.cli import main
from vla_client.errors import CodecError, DeadlineExceededError, ProtocolError, ServerErrorFrame
from vla_client.protocol import websocket_url
from vllm_omni_server import OmniServer, Refusal, keyed_actions

KEYS = {"joint_position": 7, "gripper_position": 1, "eef_9d": 9}
HORIZON = 4
TASK = "pick up the red cube"
CONFIG = {
    "action_horizon": HORIZON,
    "action_keys": list(KEYS),
    "image_resolution": [24, 32],
    "needs_session_id": True,
    "embodiment_tag": "OXE_DROID",
}


def observation(size: tuple[int, int] = (24, 32), task: str = TASK) -> Observation:
    rng = np.random.default_rng(3)
    frames = {name: rng.integers(0, 256, (*size, 3), dtype=np.uint8) for name in ("front", "wrist")}
    return Observation(frames, state=np.arange(8, dtype=np.float64) / 8, task=task)


class Blocking:
    """An `AsyncActionClient` whose calls are run to their end on `loop`, so one test body
    checks both clients."""

    def __init__(self, client: AsyncActionClient, loop: asyncio.AbstractEventLoop) -> None:
        self._client, self._loop = client, loop

    def __getattr__(self, name: str) -> Any:
        attribute = getattr(self._client, name)
        if not callable(attribute):
            return attribute
        return lambda *args, **kwargs: self._loop.run_until_complete(attribute(*args, **kwargs))


def call(kind: str, url: str, act: Callable[[Any], Any], **options: Any) -> Any:
    """`act(client)` on a blocking or an asyncio client made with `options` (each of whose
    calls is run to its end)."""
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


def server(config: dict[str, Any] | None = None, policy: Any = None) -> OmniServer:
    return OmniServer(CONFIG if config is None else config, policy or keyed_actions(KEYS, HORIZON))


BOTH = pytest.mark.parametrize("kind", ["sync", "async"])


@BOTH
def test_every_request_is_bit_exact_at_the_server(kind: str) -> None:
    obs = observation()
    with server() as omni:
        session = call(kind, omni.url, lambda c: (c.infer(obs), c._session.session_id)[1])
    expected = {
        "images": [obs.images["front"], obs.images["wrist"]],
        "state": obs.state.astype(np.float32),  # type: ignore[union-attr]
        "prompt": TASK,
        "session_id": session,
    }
    assert omni.frames == [msgpack_numpy.packb(expected)]
    sent = msgpack_numpy.unpackb(omni.frames[0])
    assert sent["images"][1].tobytes() == obs.images["wrist"].tobytes()
    assert sent["state"].dtype == np.float32
    assert omni.served == [(session, True)]


@BOTH
def test_actions_join_in_the_announced_key_order_not_the_replys(kind: str) -> None:
    obs = observation()
    with server() as omni:
        result = call(kind, omni.url, lambda c: c.infer(obs))
    assert list(result.action_keys) == list(KEYS)
    assert result.actions.shape == (HORIZON, sum(KEYS.values()))
    assert result.actions.dtype == np.float32
    offset = float(np.sum(obs.state.astype(np.float32)))  # type: ignore[union-attr]
    for k, key in enumerate(KEYS):
        part = result.actions[:, result.action_keys[key]]
        assert part.shape == (HORIZON, KEYS[key])
        assert part[2, 0] == pytest.approx(100 * k + 20 + offset)


@BOTH
def test_the_config_is_the_metadata_and_frames_are_fitted_to_its_resolution(kind: str) -> None:
    with server() as omni:
        metadata, _ = call(kind, omni.url, lambda c: (c.metadata(), c.infer(observation((48, 48)))))
    assert metadata.input.image_size == [24, 32]
    assert metadata.output.action_horizon == HORIZON
    assert metadata.model_extra["vllm_omni"]["embodiment_tag"] == "OXE_DROID"
    sent = msgpack_numpy.unpackb(omni.frames[0])
    assert [frame.shape for frame in sent["images"]] == [(24, 32, 3), (24, 32, 3)]


@BOTH
def test_no_session_id_is_sent_unless_the_config_asks(kind: str) -> None:
    with server({**CONFIG, "needs_session_id": False}) as omni:
        call(kind, omni.url, lambda c: c.infer(observation()))
    assert "session_id" not in msgpack_numpy.unpackb(omni.frames[0])
    assert omni.served == [("default", True)]


@BOTH
def test_reset_ends_the_session_and_the_next_request_starts_a_new_one(kind: str) -> None:
    def episodes(client: Any) -> tuple[str, str]:
        client.infer(observation())
        first = client._session.session_id
        client.reset()
        client.infer(observation())
        return first, client._session.session_id

    with server() as omni:
        first, second = call(kind, omni.url, episodes)
    assert first != second
    assert msgpack_numpy.unpackb(omni.frames[1]) == {"endpoint": "reset", "session_id": first}
    assert omni.served == [(first, True), (second, True)]
    assert omni.connections == 1


@BOTH
def test_an_error_frame_carries_its_code_and_the_connection_is_replaced(kind: str) -> None:
    calls = []

    def policy(obs: dict[str, Any]) -> Any:
        calls.append(obs["prompt"])
        if len(calls) == 1:
            raise Refusal("no robot policy is loaded", "unsupported")
        if len(calls) == 2:
            raise RuntimeError("boom")
        return keyed_actions(KEYS, HORIZON)(obs)

    def three(client: Any) -> Any:
        errors = []
        for _ in range(2):
            try:
                client.infer(observation())
            except ServerErrorFrame as exc:
                errors.append(exc)
        return errors, client.infer(observation()), client.stats.dropped_connections

    with server(policy=policy) as omni:
        errors, result, dropped = call(kind, omni.url, three)
    assert [(e.code, e.detail) for e in errors] == [
        ("unsupported", "no robot policy is loaded"),
        (None, "Internal inference error"),
    ]
    assert "unsupported" in str(errors[0])
    assert result.actions.shape == (HORIZON, 17)
    assert omni.connections == 3
    assert dropped == {"error frame": 2}


@BOTH
def test_a_single_array_reply_is_the_chunk(kind: str) -> None:
    chunk = np.arange(12, dtype=np.float32).reshape(4, 3)
    config = {"action_horizon": 4}
    with server(config, policy=lambda obs: chunk) as omni:
        result = call(kind, omni.url, lambda c: c.infer(observation()))
    np.testing.assert_array_equal(result.actions, chunk)
    assert result.action_keys is None
    result.actions[0] += 1  # the client's own array, as every family's is: a gate may clip it


def test_per_key_actions_without_announced_keys_are_refused() -> None:
    with (
        server({}) as omni,
        ActionClient(omni.url) as client,
        pytest.raises(ProtocolError, match="announced no action_keys"),
    ):
        client.infer(observation())


def test_per_key_actions_other_than_the_announced_are_refused() -> None:
    with (
        server({**CONFIG, "action_keys": ["joint_position"]}) as omni,
        ActionClient(omni.url) as client,
        pytest.raises(ProtocolError, match="its config announced"),
    ):
        client.infer(observation())


def test_the_path_selects_the_dialect() -> None:
    url = "ws://h:8000/v1/realtime/robot/openpi"
    assert websocket_url(url) == (url, "vllm_omni")
    assert websocket_url("http://h:8000", "vllm_omni") == (url, "vllm_omni")
    with pytest.raises(ValueError, match="vllm_omni endpoint"):
        websocket_url(url, "openpi")


@pytest.mark.parametrize("option", [{"encoding": "png"}, {"layout": "droid"}])
def test_options_the_endpoint_cannot_carry_are_refused(option: dict[str, Any]) -> None:
    with pytest.raises(ValueError):
        ActionClient("ws://127.0.0.1:9/v1/realtime/robot/openpi", **option)


def test_parameters_are_refused_before_sending() -> None:
    with (
        server() as omni,
        ActionClient(omni.url) as client,
        pytest.raises(ValueError, match="takes the observation only"),
    ):
        client.infer(observation(), seed=3)
    assert omni.frames == []


def test_the_vllm_omni_snippet_of_the_docs_runs() -> None:
    """docs/real-servers.md's vLLM-Omni example, against the test server (its URL replaced)."""
    page = (Path(__file__).parents[2] / "docs" / "real-servers.md").read_text()
    pattern = r"<!-- run against a vLLM-Omni server: [^>]+ -->\n```python\n(.*?)```"
    (code,) = re.findall(pattern, page, flags=re.S)
    config = {**CONFIG, "image_resolution": [180, 320]}
    with server(config) as omni:
        code = re.sub(r'URL = "[^"]+"', f'URL = "{omni.url}"', code)
        namespace: dict[str, Any] = {}
        exec(compile(code, "real-servers.md", "exec"), namespace)
    assert namespace["joints"].shape == (HORIZON, 7)
    assert msgpack_numpy.unpackb(omni.frames[0])["endpoint"] == "reset"
    assert len(omni.served) == 1


def test_the_cli_reads_the_config_and_sends_to_the_url_as_given(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """``vla-client metadata|send|bench`` with the robot endpoint's URL: no path appended, the
    frames padded to the announced resolution, the one path the endpoint takes measured."""
    with server() as omni:
        assert main(["metadata", omni.url, "--json"]) == 0
        document = json.loads(capsys.readouterr().out)
        assert main(["send", omni.url, "--json"]) == 0
        sent = json.loads(capsys.readouterr().out)
        assert main(["bench", omni.url, "--repeat", "2"]) == 0
        assert "raw/msgpack/ws" in capsys.readouterr().out
    assert document["policy_family"] == "vllm_omni"
    assert document["client_checks"]["image_size"] == [24, 32]
    assert sent["action_shape"] == [HORIZON, 17]
    request = msgpack_numpy.unpackb(omni.frames[0])
    assert {frame.shape for frame in request["images"]} == {(24, 32, 3)}
    assert request["prompt"] and request["session_id"]


@BOTH
def test_a_silent_server_ends_at_the_deadline_and_its_late_reply_is_never_read(kind: str) -> None:
    """The connection whose reply timed out is closed: the next request's answer is its own."""
    delays = [1.0, 0.0]

    def slow_then_quick(obs: dict[str, Any]) -> Any:
        time.sleep(delays.pop(0))
        return keyed_actions(KEYS, HORIZON)(obs)

    def twice(client: Any) -> Any:
        client.metadata()
        with pytest.raises(DeadlineExceededError):
            client.infer(observation())
        second = client.infer(observation(task="second"))
        return second, client.stats.late_replies, client.stats.dropped_connections

    with server(policy=slow_then_quick) as omni:
        result, late, dropped = call(kind, omni.url, twice, deadline_s=0.3, timeout_s=5)
    assert result.actions.shape == (HORIZON, 17)
    assert late == 1
    assert dropped == {"timeout": 1}
    assert omni.connections == 2
    assert msgpack_numpy.unpackb(omni.frames[-1])["prompt"] == "second"


def state_sum(result: Any) -> float:
    """The state's sum the server added to every action (`keyed_actions`): key 0, step 0,
    column 0 is the sum itself."""
    return float(result.actions[0, 0])


def with_state(value: float) -> Observation:
    base = observation()
    return Observation(base.images, state=np.full(8, value), task=base.task)


@BOTH
def test_a_connection_the_server_closed_while_idle_is_opened_again_unseen(kind: str) -> None:
    """vLLM-Omni's main branch closes a connection idle for 30 s (here 0.2 s): the next
    request opens a new one and is answered; the drop is counted, never a failed request."""

    def idle_between(client: Any) -> Any:
        first = client.infer(with_state(1.0))
        time.sleep(0.6)  # the server has closed the connection by now
        return first, client.infer(with_state(2.0)), client.stats.dropped_connections

    with OmniServer(CONFIG, keyed_actions(KEYS, HORIZON), idle_timeout_s=0.2) as omni:
        first, second, dropped = call(kind, omni.url, idle_between)
    assert (state_sum(first), state_sum(second)) == (8.0, 16.0)
    assert dropped == {"closed by the server": 1}
    assert omni.connections == 2


@BOTH
def test_an_idle_close_that_crosses_the_request_sends_it_again(kind: str) -> None:
    """The server's idle close and the request cross on the wire: the request was never read
    (the close is a normal one, code 1000), so it goes again on a new connection."""
    with OmniServer(CONFIG, keyed_actions(KEYS, HORIZON), close_on_first_request=True) as omni:
        result, dropped = call(
            kind, omni.url, lambda c: (c.infer(with_state(3.0)), c.stats.dropped_connections)
        )
    assert state_sum(result) == 24.0
    assert dropped == {"closed by the server": 1}
    assert omni.connections == 2
    assert omni.frames[0] == omni.frames[1]


@BOTH
def test_a_server_with_no_policy_refuses_the_connection_with_its_error_frame(kind: str) -> None:
    """In place of its config, a text frame ``{"type": "error", "error", "code"}``: raised as
    the `ServerErrorFrame` it is, with its code."""
    with OmniServer(CONFIG, None) as omni, pytest.raises(ServerErrorFrame) as caught:
        call(kind, omni.url, lambda client: client.infer(observation()))
    assert caught.value.code == "unsupported"
    assert caught.value.detail == "no robot policy is loaded on this server"


@BOTH
def test_a_reply_that_cannot_be_read_costs_the_connection(kind: str) -> None:
    """A reply the client cannot read (not an action array): refused, and the connection
    replaced, as a second frame for that request would be read as the next one's reply."""
    answers = ["not actions"]

    def garbage_first(obs: dict[str, Any]) -> Any:
        return answers.pop() if answers else keyed_actions(KEYS, HORIZON)(obs)

    def twice(client: Any) -> Any:
        with pytest.raises(ProtocolError, match="not a number array"):
            client.infer(with_state(1.0))
        return client.infer(with_state(2.0)), client.stats.dropped_connections

    with OmniServer(CONFIG, garbage_first) as omni:
        result, dropped = call(kind, omni.url, twice)
    assert state_sum(result) == 16.0
    assert dropped == {"unreadable reply": 1}
    assert omni.connections == 2


@pytest.mark.parametrize("check_contract", [True, False])
def test_depth_is_refused_in_one_line_and_nothing_is_sent(check_contract: bool) -> None:
    """A family with messages of its own carries no depth: never dropped on the way."""
    base = observation()
    obs = Observation(base.images, base.state, base.task, depth={"d": np.zeros((4, 4), np.uint16)})
    with (
        server() as omni,
        ActionClient(omni.url, check_contract=check_contract) as client,
        pytest.raises(CodecError) as refused,
    ):
        client.infer(obs)
    assert str(refused.value) == (
        "this server family's messages carry no depth frames (d); depth travels on the action "
        "API (HTTP, the /v1/actions/realtime websocket or ipc://)"
    )
    assert omni.frames == []
