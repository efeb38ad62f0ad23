"""The websocket client transports against the reference server and scripted servers."""

from __future__ import annotations

import asyncio
import socket
import time
from typing import Any

import numpy as np
import pytest
from fastapi import FastAPI
from scripted_server import ScriptedServer, step_actions

from oracles import oracle_actions
from vla_client.client import ActionClient, AsyncActionClient
from vla_client.errors import (
    ConnectError,
    DeadlineExceededError,
    MismatchedReplyError,
    ProtocolError,
    ServerError,
    StaleObservationError,
)
from vla_client.observation import Observation
from vla_client.protocol import FLAT, GENERATIONS_PATH
from vla_client.server import LocalServer, ReferencePolicy, ServerConfig, create_app
from vla_client.server.policy import PolicyInput
from vla_client.transports import Backoff, WebSocketTransport


def expected(observation: Observation, horizon: int = 8, dim: int = 5) -> np.ndarray:
    policy_input = PolicyInput(
        images=dict(observation.images), state=observation.state, task=observation.task
    )
    return oracle_actions(policy_input, horizon=horizon, action_dim=dim)


def ws_url(server: LocalServer) -> str:
    return f"ws://127.0.0.1:{server.port}"


def test_realtime_round_trips_on_one_connection(
    reference_server: LocalServer, small_observation: Observation
) -> None:
    with ActionClient(ws_url(reference_server)) as client:
        assert client.options.wire == "msgpack"
        meta = client.metadata()
        assert meta.capabilities["realtime_websocket"] is True
        results = [client.infer(small_observation, request_id=f"r{i}") for i in range(3)]
        assert isinstance(client.transport, WebSocketTransport)
        assert client.transport.stats.connects == 1
    for i, result in enumerate(results):
        assert result.request_id == f"r{i}"
        np.testing.assert_allclose(result.actions, expected(small_observation), rtol=1e-6)
    assert "infer_ms" in results[0].timings.server
    assert "prev_total_ms" not in results[0].timings.server
    assert "prev_total_ms" in results[1].timings.server


def test_openpi_endpoint_sends_the_flat_observation(
    reference_server: LocalServer, small_observation: Observation
) -> None:
    with ActionClient(ws_url(reference_server), endpoint="openpi") as client:
        assert client.options.layout is FLAT and client.options.encoding == "raw"
        result = client.infer(small_observation, request_id="flat-1")
    assert result.request_id == "flat-1"
    assert "actions" in result.raw and "data" not in result.raw
    np.testing.assert_allclose(result.actions, expected(small_observation), rtol=1e-6)


def test_http_url_with_websocket_option(
    reference_server: LocalServer, small_observation: Observation
) -> None:
    with ActionClient(reference_server.url, transport="websocket", encoding="png") as client:
        result = client.infer(small_observation)
    np.testing.assert_allclose(result.actions, expected(small_observation), rtol=1e-6)


def test_websocket_refuses_json_wire(reference_server: LocalServer) -> None:
    with pytest.raises(ValueError, match="msgpack"):
        ActionClient(ws_url(reference_server), wire="json")


def test_async_client_round_trips(
    reference_server: LocalServer, small_observation: Observation
) -> None:
    async def main() -> list[Any]:
        async with AsyncActionClient(ws_url(reference_server), endpoint="openpi") as client:
            meta = await client.metadata()
            results = [await client.infer(small_observation, request_id=f"a{i}") for i in range(2)]
            return [meta, *results]

    meta, *results = asyncio.run(main())
    assert meta.capabilities["openpi_websocket"] is True
    assert [r.request_id for r in results] == ["a0", "a1"]
    np.testing.assert_allclose(results[1].actions, expected(small_observation), rtol=1e-6)


def test_server_error_map_then_the_client_reconnects(
    reference_server: LocalServer, small_observation: Observation
) -> None:
    with ActionClient(ws_url(reference_server)) as client:
        with pytest.raises(ServerError) as info:
            client.infer(small_observation, action_horizon=0)  # invalid parameter
        assert "Traceback" not in info.value.detail
        result = client.infer(small_observation)
        assert client.transport.stats.connects == 2  # type: ignore[attr-defined]
    assert result.actions.shape == (8, 5)


def test_openpi_text_error_frame_is_a_server_error(
    reference_server: LocalServer, small_observation: Observation
) -> None:
    with (
        ActionClient(ws_url(reference_server), endpoint="openpi") as client,
        pytest.raises(ServerError, match="action_horizon"),
    ):
        client.infer(small_observation, action_horizon=-3)


def test_api_keys_per_endpoint(small_observation: Observation) -> None:
    config = ServerConfig(in_process=True, api_key="s3cret")
    with LocalServer(create_app(ReferencePolicy(action_horizon=8, action_dim=5), config)) as server:
        for endpoint in ("realtime", "openpi"):
            with ActionClient(ws_url(server), endpoint=endpoint, api_key="s3cret") as client:
                assert client.infer(small_observation).actions.shape == (8, 5)
        with ActionClient(ws_url(server), api_key="wrong") as client, pytest.raises(ServerError):
            client.infer(small_observation)


def test_reply_with_another_id_is_skipped(scripted: Any, small_observation: Observation) -> None:
    def script(index: int, request: dict[str, Any]) -> tuple[float, list[Any]]:
        stale = {"request_id": "someone-else", "actions": step_actions(99)}
        return 0.0, [stale, {"request_id": request["request_id"], "actions": step_actions(index)}]

    server: ScriptedServer = scripted(script)
    with ActionClient(server.url) as client:
        result = client.infer(small_observation, request_id="mine")
        assert client.stats.mismatched_replies == 1
    assert result.request_id == "mine"
    np.testing.assert_array_equal(result.actions, step_actions(0))


def test_the_async_client_skips_every_reply_to_another_request_and_counts_each(
    scripted: Any, small_observation: Observation
) -> None:
    def script(index: int, request: dict[str, Any]) -> tuple[float, list[Any]]:
        stale = [{"request_id": f"someone-else-{n}", "actions": step_actions(99)} for n in (1, 2)]
        return 0.0, [*stale, {"request_id": request["request_id"], "actions": step_actions(index)}]

    server: ScriptedServer = scripted(script)

    async def infer() -> tuple[Any, int]:
        async with AsyncActionClient(server.url) as client:
            result = await client.infer(small_observation, request_id="mine")
            return result, client.stats.mismatched_replies

    result, mismatched = asyncio.run(infer())
    assert (result.request_id, mismatched) == ("mine", 2)
    np.testing.assert_array_equal(result.actions, step_actions(0))


def test_over_http_a_reply_to_another_request_is_raised_not_skipped(
    small_observation: Observation,
) -> None:
    """HTTP has no stream to read on past it: the reply is counted and raised, sent once."""
    app, posts = FastAPI(), []

    @app.post(GENERATIONS_PATH)
    async def another_id() -> dict[str, Any]:
        posts.append(1)
        return {"request_id": "someone-else", "actions": [[0.0]]}

    with (
        LocalServer(app) as server,
        ActionClient(server.url, check_contract=False) as client,
        pytest.raises(MismatchedReplyError, match="someone-else"),
    ):
        try:
            client.infer(small_observation, request_id="mine")
        finally:
            assert (client.stats.mismatched_replies, len(posts)) == (1, 1)


def test_a_reply_without_an_id_is_a_protocol_error_not_stamped_with_the_sent_one(
    scripted: Any, small_observation: Observation
) -> None:
    # A replayed reply stripped of its id must not pass the client's replay check.
    server: ScriptedServer = scripted(lambda i, r: (0.0, [{"actions": step_actions(i)}]))
    with ActionClient(server.url) as client:
        for _ in range(3):
            with pytest.raises(ProtocolError, match="reply carries no request id"):
                client.infer(small_observation)
    assert len(server.requests) == 3


def test_openpi_replies_need_no_id_and_an_id_of_the_servers_is_not_compared(
    scripted: Any, small_observation: Observation
) -> None:
    # The client sends openpi's observation keys only, so no id: any id in a reply is the
    # server's own, and replies are matched by their order on the connection (a late one
    # costs the connection, see the next test).
    def script(index: int, request: dict[str, Any]) -> tuple[float, list[Any]]:
        assert "request_id" not in request
        if index == 0:  # openpi's own servers echo no id
            return 0.0, [{"actions": step_actions(index)}]
        return 0.0, [{"request_id": f"server-made-{index}", "actions": step_actions(index)}]

    server: ScriptedServer = scripted(script)
    with ActionClient(f"ws://127.0.0.1:{server.port}/openpi/policy") as client:
        np.testing.assert_array_equal(client.infer(small_observation).actions, step_actions(0))
        np.testing.assert_array_equal(client.infer(small_observation).actions, step_actions(1))
        assert client.stats.mismatched_replies == 0


def test_late_reply_is_never_used_even_without_ids(
    scripted: Any, small_observation: Observation
) -> None:
    # openpi servers echo no request id: only the connection tells replies apart.
    def script(index: int, request: dict[str, Any]) -> tuple[float, list[Any]]:
        return (0.6 if index == 0 else 0.0), [{"actions": step_actions(index)}]

    server: ScriptedServer = scripted(script)
    openpi_url = f"ws://127.0.0.1:{server.port}/openpi/policy"
    with ActionClient(openpi_url, deadline_s=0.2) as client:
        with pytest.raises(DeadlineExceededError):
            client.infer(small_observation)
        assert client.stats.late_replies == 1
        time.sleep(0.6)  # the late reply is on the wire by now
        result = client.infer(small_observation)
    np.testing.assert_array_equal(result.actions, step_actions(1))
    assert server.connections == 2


def test_async_late_reply_is_never_used(scripted: Any, small_observation: Observation) -> None:
    def script(index: int, request: dict[str, Any]) -> tuple[float, list[Any]]:
        reply = {"request_id": request["request_id"], "actions": step_actions(index)}
        return (0.6 if index == 0 else 0.0), [reply]

    server: ScriptedServer = scripted(script)

    async def main() -> Any:
        async with AsyncActionClient(server.url, deadline_s=0.2) as client:
            with pytest.raises(DeadlineExceededError):
                await client.infer(small_observation)
            await asyncio.sleep(0.6)
            return await client.infer(small_observation), client.stats

    result, stats = asyncio.run(main())
    np.testing.assert_array_equal(result.actions, step_actions(1))
    assert stats.late_replies == 1


def test_stale_observation_is_not_sent(scripted: Any, small_observation: Observation) -> None:
    server: ScriptedServer = scripted(
        lambda i, r: (0.0, [{"request_id": r["request_id"], "actions": step_actions(i)}])
    )
    old = Observation(
        small_observation.images,
        capture_times={name: time.monotonic() - 1.0 for name in small_observation.images},
    )
    with ActionClient(server.url, max_observation_age_s=0.5) as client:
        with pytest.raises(StaleObservationError):
            client.infer(old)
        assert client.stats.stale_observations == 1 and client.stats.sent == 0
        fresh = Observation(
            small_observation.images,
            capture_times={name: time.monotonic() for name in small_observation.images},
        )
        client.infer(fresh)
    assert len(server.requests) == 1


def test_failed_connects_back_off_instead_of_retrying_every_call(
    small_observation: Observation,
) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    transport = WebSocketTransport(
        f"ws://127.0.0.1:{port}", backoff=Backoff(initial_s=30.0, max_s=30.0)
    )
    with ActionClient("ws://unused", transport=transport) as client:
        with pytest.raises(ConnectError, match="cannot reach the server at"):
            client.infer(small_observation)
        with pytest.raises(ConnectError, match="next try in"):
            client.infer(small_observation)
    assert transport.stats.connect_failures == 1
