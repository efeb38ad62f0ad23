"""The session vLLM-Omni's robot endpoint and RoboArena's policy server share
(`vla_client.client.dialect`), as a user sees it, against the test servers on 127.0.0.1
(tests/vllm_omni_server.py, tests/roboarena_server.py).

Checked: which cameras a request carries when the server's config names some and the
observation has more or fewer; the deadline on each call that waits for the config or for the
reset's answer; the config read again on a new connection; what a result carries; what the
endpoints refuse before sending; and a client over a transport given to it.
"""

from __future__ import annotations

import asyncio
import os
import time
import warnings
from typing import Any

import numpy as np
import pytest
from openpi_client import msgpack_numpy

from roboarena_server import ArenaServer
from vla_client import ActionClient, AsyncActionClient, Observation
from vla_client.errors import (
    CodecError,
    ContractError,
    DeadlineExceededError,
    ProtocolError,
    ServerError,
    StaleObservationError,
)
from vla_client.transports import WebSocketTransport
from vllm_omni_server import OmniServer, keyed_actions

ARENA = {"image_resolution": [24, 32], "n_external_cameras": 1, "needs_wrist_camera": True}
ASKED = ("exterior_image_1_left", "wrist_image_left")
"""The cameras `ARENA` asks for."""
OMNI = {"action_horizon": 3, "action_keys": ["arm"], "image_resolution": [24, 32]}
TASK = "stack the cubes"
DEADLINE_S = 0.3
SLOW_S = 1.5
"""How late the slow server answers: well past `DEADLINE_S`, well within the timeout."""


def observation(names: tuple[str, ...], **extra: Any) -> Observation:
    """Frames for `names` (each its own value), 8 state values, the task."""
    frames = {name: np.full((24, 32, 3), i, np.uint8) for i, name in enumerate(names)}
    return Observation(frames, state=np.arange(8, dtype=np.float64) / 8, task=TASK, **extra)


def arena(url: str, **options: Any) -> ActionClient:
    return ActionClient(url, endpoint="roboarena", **options)


def omni_server(**options: Any) -> OmniServer:
    return OmniServer(OMNI, keyed_actions({"arm": 7}, 3), **options)


def test_a_camera_it_does_not_ask_for_is_left_out_of_an_otherwise_equal_request() -> None:
    with ArenaServer(ARENA) as server, arena(server.url) as client:
        with pytest.warns(UserWarning, match=r"not sending \['extra'\]"):
            client.infer(observation((*ASKED, "extra")))
        client.infer(observation(ASKED))
    with_extra, without = server.frames
    assert with_extra == without
    assert msgpack_numpy.unpackb(with_extra)["prompt"] == TASK


def test_no_camera_it_asks_for_is_refused_naming_both_before_sending() -> None:
    with (
        ArenaServer(ARENA) as server,
        arena(server.url) as client,
        pytest.warns(UserWarning, match="not sending"),
        pytest.raises(ContractError) as refused,
    ):
        client.infer(observation(("side", "front")))
    error = refused.value
    assert (error.field, error.expected, error.given) == ("cameras", list(ASKED), ["front", "side"])
    assert server.frames == []


def test_a_camera_it_asks_for_missing_is_refused_before_sending() -> None:
    with (
        ArenaServer(ARENA) as server,
        arena(server.url) as client,
        pytest.raises(ContractError, match="wrist_image_left"),
    ):
        client.infer(observation(("exterior_image_1_left",)))
    assert server.frames == []


@pytest.mark.parametrize("stale", ["extra", "wrist_image_left"])
def test_only_the_cameras_sent_are_checked_for_age(stale: str) -> None:
    """A stale frame of a camera the server does not ask for holds nothing back; a stale one it
    asks for is refused, another camera left out or not."""
    names = (*ASKED, "extra")
    now = time.monotonic()
    times = {name: now - 60 if name == stale else now + 60 for name in names}
    obs = observation(names, capture_times=times)
    with (
        ArenaServer(ARENA) as server,
        arena(server.url, max_observation_age_s=30) as client,
        warnings.catch_warnings(),
    ):
        warnings.simplefilter("ignore")
        if stale == "extra":
            assert client.infer(obs).actions.shape == (3, 8)
        else:
            with pytest.raises(StaleObservationError):
                client.infer(obs)
    assert len(server.frames) == (stale == "extra")


def test_depth_is_refused_when_a_camera_is_left_out_too() -> None:
    """Leaving out a camera the server does not ask for keeps the depth frames, so they are
    refused as on every path (these messages carry none), never dropped on the way."""
    depth = {"d": np.zeros((4, 4), np.uint16)}
    with (
        ArenaServer(ARENA) as server,
        arena(server.url) as client,
        warnings.catch_warnings(),
        pytest.raises(CodecError, match=r"carry no depth frames \(d\)"),
    ):
        warnings.simplefilter("ignore")
        client.infer(observation((*ASKED, "extra"), depth=depth))
    assert server.frames == []


@pytest.mark.skipif(
    "MUTANT_UNDER_TEST" in os.environ,
    reason="under mutation testing, mutmut's trampolines add frames between the session and "
    "the client's infer, so the warning's stacklevel names one of them",
)
@pytest.mark.parametrize("kind", ["sync", "async"])
def test_the_warning_about_a_camera_left_out_points_at_the_call(kind: str) -> None:
    obs = observation((*ASKED, "extra"))
    with ArenaServer(ARENA) as server, warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        if kind == "sync":
            with arena(server.url) as client:
                client.infer(obs)
        else:

            async def infer() -> None:
                async with AsyncActionClient(server.url, endpoint="roboarena") as client:
                    await client.infer(obs)

            asyncio.run(infer())
    (warned,) = [w for w in caught if "not sending" in str(w.message)]
    assert warned.filename == __file__


def test_the_config_is_read_again_on_a_new_connection() -> None:
    """RoboArena closes the connection after an error; the next one's config asks for another
    camera at another size, and the next request carries it so."""
    answers = [np.zeros((2, 8), np.float32), None]

    def policy(obs: dict[str, Any]) -> Any:
        answer = answers.pop(0) if answers else np.ones((2, 8), np.float32)
        if answer is None:
            raise RuntimeError("the policy fell over")
        return answer

    names = ("exterior_image_1_left", "exterior_image_2_left", "wrist_image_left")
    obs = observation(names)
    with ArenaServer(ARENA, policy) as server, arena(server.url) as client:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            client.infer(obs)
        with pytest.raises(ServerError, match="the policy fell over"):
            client.infer(obs)
        server.config = {**ARENA, "n_external_cameras": 2, "image_resolution": [12, 16]}
        assert client.infer(obs).actions[0, 0] == 1.0
        metadata = client.metadata()
    first, _, last = (msgpack_numpy.unpackb(frame) for frame in server.frames)
    assert sorted(k for k in first if k.endswith("_left")) == [f"observation/{n}" for n in ASKED]
    assert sorted(k for k in last if k.endswith("_left")) == [f"observation/{n}" for n in names]
    assert last["observation/exterior_image_2_left"].shape == (12, 16, 3)
    assert metadata.input.image_size == [12, 16]
    assert server.connections == 2


@pytest.mark.parametrize("call", ["metadata", "fit", "infer", "reset"])
def test_a_config_later_than_the_deadline_ends_each_call_at_it(call: str) -> None:
    """The config is each connection's first frame: every call waiting for it is held to the
    deadline (not the longer timeout) and ends as the deadline's, counted."""
    obs = observation(("front",))
    with (
        omni_server(config_delay_s=SLOW_S) as server,
        ActionClient(server.url, deadline_s=DEADLINE_S, timeout_s=5) as client,
    ):
        act = {"fit": client.fit, "infer": client.infer}.get(call)
        with pytest.raises(DeadlineExceededError) as late:
            act(obs) if act else getattr(client, call)()
        late_replies = client.stats.late_replies
    assert str(late.value) == (
        "no config from vLLM-Omni's robot endpoint within its deadline of 0.3 s"
    )
    assert late_replies == 1
    assert server.frames == []


def test_a_reset_answered_after_the_deadline_ends_at_it_and_its_answer_is_never_read() -> None:
    obs = observation(("front",))
    with (
        omni_server(reset_delay_s=SLOW_S) as server,
        ActionClient(server.url, deadline_s=DEADLINE_S, timeout_s=5) as client,
    ):
        client.metadata()
        with pytest.raises(DeadlineExceededError) as late:
            client.reset()
        result = client.infer(obs)
        stats = client.stats
    assert str(late.value) == (
        "no answer to the reset from vLLM-Omni's robot endpoint within its deadline of 0.3 s"
    )
    assert result.actions.shape == (3, 7)
    assert (stats.late_replies, stats.dropped_connections) == (1, {"timeout": 1})
    assert server.connections == 2


def test_a_result_carries_the_request_id_given_and_the_answer_as_raw() -> None:
    obs = observation(("front",))
    with omni_server() as server, ActionClient(server.url) as client:
        keyed = client.infer(obs, request_id="tick-7")
    np.testing.assert_array_equal(keyed.raw["arm"][0], keyed.actions)
    assert (keyed.request_id, list(keyed.raw)) == ("tick-7", ["arm"])
    with ArenaServer(ARENA) as server, arena(server.url) as client:
        chunk = client.infer(observation(ASKED), request_id="tick-8")
    np.testing.assert_array_equal(chunk.raw["actions"], chunk.actions)
    assert (chunk.request_id, list(chunk.raw)) == ("tick-8", ["actions"])


@pytest.mark.parametrize("runtime", [{"runtime": {"seed": 1}}, {"return_digest": True}])
def test_runtime_options_and_digests_are_refused_before_sending(runtime: dict[str, Any]) -> None:
    with (
        omni_server() as server,
        ActionClient(server.url) as client,
        pytest.raises(ValueError, match="takes no runtime options or digests"),
    ):
        client.infer(observation(("front",)), **runtime)
    assert server.frames == []


def test_an_answer_that_is_not_msgpack_costs_the_connection() -> None:
    answers: list[Any] = [b"\xc1 not msgpack"]

    def policy(obs: dict[str, Any]) -> Any:
        return answers.pop() if answers else keyed_actions({"arm": 7}, 3)(obs)

    obs = observation(("front",))
    with OmniServer(OMNI, policy) as server, ActionClient(server.url) as client:
        with pytest.raises(ProtocolError) as unread:
            client.infer(obs)
        result = client.infer(obs)
        dropped = client.stats.dropped_connections
    assert str(unread.value).startswith("an answer from vLLM-Omni's robot endpoint is not msgpack")
    assert result.actions.shape == (3, 7)
    assert dropped == {"unreadable reply": 1}
    assert server.connections == 2


def test_a_client_over_a_transport_given_reads_the_dialect_as_one_made_from_the_url() -> None:
    """RoboArena's reset answer is a text frame, and an unasked frame (every answer sent twice)
    costs the connection, whether the client made its transport or was given one."""
    obs = observation(ASKED)
    with ArenaServer(ARENA, hostile="duplicate") as server:
        transport = WebSocketTransport(server.url, endpoint="roboarena")
        with ActionClient(server.url, transport=transport) as client:
            first = client.infer(obs)
            assert server.quiet.wait(5)
            time.sleep(0.05)  # the duplicate answer reaches the client
            client.reset()
            second = client.infer(obs)
            dropped = client.stats.dropped_connections
    np.testing.assert_array_equal(first.actions, second.actions)
    assert msgpack_numpy.unpackb(server.frames[1]) == {"endpoint": "reset"}
    assert dropped == {"unasked frame": 1}
    assert server.connections == 2
