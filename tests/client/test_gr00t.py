"""Both clients against a GR00T policy server over real ZeroMQ (tests/gr00t_server.py, written
from GR00T's published protocol: its own server needs torch and its model code).

Checked at the server: every request's bytes, bit for bit, against the message GR00T's own
client would send for the same observation. Checked at the client: the state split, the prompt,
the actions joined in the config's key order whatever order the reply lists them in, the
deadline on a silent server, the reply cap, and error replies as typed errors.
"""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from gr00t_server import Gr00tServer, from_bytes, modality, to_bytes
from vla_client import ActionClient, AsyncActionClient, Observation
from vla_client.control import ChunkExecutor, ControlLoop
from vla_client.errors import (
    ConnectError,
    ContractError,
    DeadlineExceededError,
    ProtocolError,
    ReplyTooLargeError,
    ServerError,
)
from vla_client.protocol.families.gr00t import flat_state

pytest.importorskip("zmq")

SPLIT = {"arm": 6, "gripper": 1}
TASK = "pick up the red cube"


def observation(offset: float = 0.0, task: str = TASK) -> Observation:
    rng = np.random.default_rng(7)
    frames = {
        "front": rng.integers(0, 256, (24, 32, 3), dtype=np.uint8),
        "wrist": rng.integers(0, 256, (24, 32, 3), dtype=np.uint8),
    }
    state = np.arange(7, dtype=np.float64) / 8 + offset  # float64, as robots read joints
    return Observation(frames, state=state, task=task)


def call(kind: str, url: str, act: Callable[[Any], Any], **options: Any) -> Any:
    """`act(client)` on a blocking or an asyncio client made with `options` (awaited there)."""
    options.setdefault("state_split", SPLIT)
    if kind == "sync":
        with ActionClient(url, **options) as client:
            return act(client)

    async def run() -> Any:
        async with AsyncActionClient(url, **options) as client:
            return await act(client)

    return asyncio.run(run())


def infer(kind: str, url: str, obs: Observation, **options: Any) -> Any:
    return call(kind, url, lambda client: client.infer(obs), **options)


BOTH = pytest.mark.parametrize("kind", ["sync", "async"])


def expected_request(obs: Observation, token: str | None = None) -> dict[str, Any]:
    """The get_action message GR00T's client sends for `obs`, built here by hand."""
    state = obs.state.astype(np.float32)  # type: ignore[union-attr]
    request: dict[str, Any] = {
        "endpoint": "get_action",
        "data": {
            "observation": {
                "video": {name: frame[None, None] for name, frame in obs.images.items()},
                "state": {"arm": state[None, None, :6], "gripper": state[None, None, 6:]},
                "language": {"annotation.human.task_description": [[obs.task]]},
            },
            "options": None,
        },
    }
    if token:
        request["api_token"] = token
    return request


@BOTH
def test_every_request_is_bit_exact_at_the_server(kind: str) -> None:
    obs = observation()
    with Gr00tServer(api_token="sesame") as server:
        infer(kind, server.url, obs, api_key="sesame")
    assert server.endpoints == ["get_modality_config", "get_action"]
    assert server.frames[0] == to_bytes({"endpoint": "get_modality_config", "api_token": "sesame"})
    assert server.frames[1] == to_bytes(expected_request(obs, "sesame"))
    sent = from_bytes(server.frames[1])["data"]["observation"]
    assert sent["video"]["front"].tobytes() == obs.images["front"].tobytes()
    assert sent["state"]["arm"].dtype == np.float32
    assert sent["language"] == {"annotation.human.task_description": [[TASK]]}


@BOTH
def test_actions_join_in_the_configs_key_order_not_the_replys(kind: str) -> None:
    dims = {"gripper": 1, "arm": 6, "base": 3}  # the reply lists them base, arm, gripper
    obs = observation()
    with Gr00tServer(action_dims=dims, horizon=5) as server:
        result = infer(kind, server.url, obs)
    assert result.actions.dtype == np.float32
    assert result.actions.shape == (5, 10)
    assert result.action_keys == {"gripper": slice(0, 1), "arm": slice(1, 7), "base": slice(7, 10)}
    offset = float(obs.state.astype(np.float32).sum())  # type: ignore[union-attr]
    for index, (key, dim) in enumerate(dims.items()):
        part = result.actions[:, result.action_keys[key]]
        want = 100 * index + np.arange(5)[:, None] * 10 + np.arange(dim)[None, :] + offset
        np.testing.assert_array_equal(part, want.astype(np.float32))
    assert list(result.raw["actions"]) == ["base", "arm", "gripper"]


@BOTH
def test_metadata_comes_from_the_modality_config(kind: str) -> None:
    with Gr00tServer(horizon=8) as server:
        metadata = call(kind, server.url, lambda client: client.metadata())
    assert metadata.policy_family == "gr00t"
    assert metadata.input.image_keys == ["front", "wrist"]
    assert metadata.output.action_horizon == 8


@BOTH
def test_cameras_are_mapped_and_resized_as_on_other_endpoints(kind: str) -> None:
    base = observation()
    obs = Observation({"left": base.images["front"], "hand": base.images["wrist"]},
                      state=base.state, task=TASK)  # fmt: skip
    with Gr00tServer() as server:
        infer(kind, server.url, obs, camera_map={"left": "front", "hand": "wrist"},
              image_size=(16, 16))  # fmt: skip
    video = from_bytes(server.frames[1])["data"]["observation"]["video"]
    assert {k: v.shape for k, v in video.items()} == {
        "front": (1, 1, 16, 16, 3), "wrist": (1, 1, 16, 16, 3)
    }  # fmt: skip


@BOTH
def test_a_camera_the_server_does_not_name_is_refused_before_sending(kind: str) -> None:
    base = observation()
    obs = Observation({"front": base.images["front"], "side": base.images["wrist"]},
                      state=base.state)  # fmt: skip
    with Gr00tServer() as server, pytest.raises(ContractError, match="camera_map"):
        infer(kind, server.url, obs)
    assert server.endpoints == ["get_modality_config"]


@pytest.mark.parametrize(
    ("split", "match"),
    [
        (None, "state_split"),  # a flat vector without its split is refused
        ({"arm": 5, "gripper": 1}, "6 values"),
        ({"arm": 6, "hand": 1}, "hand"),
    ],
)
def test_the_flat_state_needs_a_split_that_fits(split: dict[str, int] | None, match: str) -> None:
    with Gr00tServer() as server, pytest.raises(ContractError, match=match):
        infer("sync", server.url, observation(), state_split=split)
    assert "get_action" not in server.endpoints


def test_the_server_refuses_float64_state_so_the_client_sends_float32() -> None:
    obs = observation()
    request = expected_request(obs)
    request["data"]["observation"]["state"]["arm"] = obs.state[None, None, :6]  # type: ignore[index]
    from vla_client.transports.zmq import ZmqTransport

    with Gr00tServer() as server:
        transport = ZmqTransport(server.url, timeout_s=5)
        answer = from_bytes(transport.call(to_bytes(request)))
        transport.close()
        result = infer("sync", server.url, obs)  # float64 in the Observation: sent as float32
    assert "float32" in answer["error"] and "float64" in answer["error"]
    assert result.actions.shape == (4, 7)


@BOTH
def test_the_task_and_options_reach_the_server(kind: str) -> None:
    with Gr00tServer() as server:
        call(kind, server.url, lambda client: client.infer(observation(task="stack"), seed=3))
    data = from_bytes(server.frames[1])["data"]
    assert data["observation"]["language"] == {"annotation.human.task_description": [["stack"]]}
    assert data["options"] == {"seed": 3}


@BOTH
def test_reset_calls_the_servers_reset(kind: str) -> None:
    with Gr00tServer(api_token="k") as server:
        call(kind, server.url, lambda client: client.reset(), api_key="k")
    assert server.endpoints == ["reset"]
    assert server.frames[0] == to_bytes({"endpoint": "reset", "data": {"options": None},
                                         "api_token": "k"})  # fmt: skip


@BOTH
def test_a_silent_server_ends_at_the_deadline_and_its_late_reply_is_never_read(kind: str) -> None:
    with Gr00tServer(delay_s=0.0) as server:

        def twice(client: Any) -> Any:
            if kind == "sync":
                client.metadata()
                server.delay_s = 1.0
                with pytest.raises(DeadlineExceededError):
                    client.infer(observation(offset=0.0))
                server.delay_s = 0.0
                for _ in range(2):  # the metadata's reply and the late one
                    assert server.answered.acquire(timeout=5)
                return client.infer(observation(offset=1.0)), client.stats.late_replies

            async def go() -> Any:
                await client.metadata()
                server.delay_s = 1.0
                with pytest.raises(DeadlineExceededError):
                    await client.infer(observation(offset=0.0))
                server.delay_s = 0.0
                for _ in range(2):  # the metadata's reply and the late one
                    assert await asyncio.to_thread(server.answered.acquire, timeout=5)
                return await client.infer(observation(offset=1.0)), client.stats.late_replies

            return go()

        result, late = call(kind, server.url, twice, deadline_s=0.3, timeout_s=5)
    # the second answer is the second request's (its state is 1.0 higher a value: 7.0 in all)
    offset = float(observation(offset=1.0).state.astype(np.float32).sum())  # type: ignore[union-attr]
    assert result.actions[0, 0] == pytest.approx(offset)
    assert late == 1


ENDPOINTS = {"metadata": "get_modality_config", "reset": "reset"}


@BOTH
@pytest.mark.parametrize("what", ["metadata", "reset"])
def test_a_config_or_reset_answer_past_the_deadline_is_a_deadline_error(
    kind: str, what: str
) -> None:
    with Gr00tServer(delay_s=1.0) as server:

        awaited = f"answer to {ENDPOINTS[what]} from GR00T"

        def late(client: Any) -> Any:
            if kind == "sync":
                with pytest.raises(DeadlineExceededError, match=awaited):
                    getattr(client, what)()
                return client.stats.late_replies

            async def go() -> Any:
                with pytest.raises(DeadlineExceededError, match=awaited):
                    await getattr(client, what)()
                return client.stats.late_replies

            return go()

        late_replies = call(kind, server.url, late, deadline_s=0.3, timeout_s=5)
    assert late_replies == 1


@BOTH
def test_a_reply_over_the_cap_is_cut_off_and_the_next_call_works(kind: str) -> None:
    huge = [{"arm": np.zeros((1, 4, 100_000), np.float32), "gripper": np.zeros((1, 4, 1))}, {}]
    with Gr00tServer() as server:

        def act(client: Any) -> Any:
            if kind == "sync":
                client.metadata()
                server.reply = lambda request: huge
                with pytest.raises(ReplyTooLargeError) as cut:
                    client.infer(observation())
                assert str(cut.value) == (
                    f"the reply from {server.url} is over the limit of 1048576 bytes "
                    "(max_reply_bytes); cut off, not read to the end"
                )
                server.reply = None
                return client.infer(observation())

            async def go() -> Any:
                await client.metadata()
                server.reply = lambda request: huge
                with pytest.raises(ReplyTooLargeError):
                    await client.infer(observation())
                server.reply = None
                return await client.infer(observation())

            return go()

        result = call(kind, server.url, act, max_reply_bytes=1 << 20, timeout_s=5)
    assert result.actions.shape == (4, 7)


@BOTH
def test_a_server_that_goes_away_mid_request_is_a_connect_error_not_a_cut_reply(kind: str) -> None:
    with Gr00tServer() as server:
        server.reply = lambda request: server.stop()
        with pytest.raises(ConnectError, match="dropped the connection"):
            infer(kind, server.url, observation(), timeout_s=5)


@BOTH
def test_an_error_reply_is_a_server_error_with_the_servers_message(kind: str) -> None:
    def fail(request: dict[str, Any]) -> Any:
        raise RuntimeError("CUDA out of memory")

    with Gr00tServer(reply=fail) as server, pytest.raises(ServerError, match="CUDA out of memory"):
        infer(kind, server.url, observation())
    with Gr00tServer(api_token="right") as server, pytest.raises(ServerError) as refused:
        infer(kind, server.url, observation(), api_key="wrong")
    assert refused.value.status_code == 401


@pytest.mark.parametrize(
    ("url", "options", "match"),
    [
        ("tcp://127.0.0.1:5555", {"encoding": "png"}, "leave"),
        ("tcp://127.0.0.1:5555", {"endpoint": "openpi"}, "GR00T"),
        ("ws://127.0.0.1:5555", {"endpoint": "gr00t"}, "GR00T"),
        ("http://127.0.0.1:8000", {"state_split": {"arm": 1}}, "state_split"),
        ("tcp://127.0.0.1:5555", {"state_split": {"arm": 0}}, "state_split"),
        ("tcp://127.0.0.1:5555/path", {}, "no path"),
    ],
)
def test_options_that_do_not_fit_gr00t_are_refused(
    url: str, options: dict[str, Any], match: str
) -> None:
    with pytest.raises(ValueError, match=match):
        ActionClient(url, **options)


def test_a_control_loop_resets_the_server_as_each_run_starts() -> None:
    with Gr00tServer() as server, ActionClient(server.url, state_split=SPLIT) as client:
        executor = ChunkExecutor(client.infer)
        loop = ControlLoop(
            observe=observation, executor=executor, apply_action=lambda action: None,
            rate_hz=50, reset=client.reset,
        )  # fmt: skip
        for _ in range(2):
            loop.run(ticks=1)
            assert executor.join(timeout=5)
        executor.close()
    assert server.endpoints[0] == "reset"
    assert server.endpoints.count("reset") == 2
    assert server.endpoints.index("get_action") > 0


@pytest.mark.parametrize("endpoint", ["realtime", "openpi"])
def test_reset_is_a_no_op_where_the_server_keeps_no_episode(server_url: str, endpoint: str) -> None:
    """The action API and openpi's websocket have no reset: nothing is sent, no connection
    opened."""
    port = server_url.rsplit(":", 1)[1]
    with ActionClient(f"ws://127.0.0.1:{port}", endpoint=endpoint) as client:
        client.reset()
        assert client.transport.stats.connects == 0
        assert client.stats.sent == 0


def test_the_gr00t_snippet_of_the_docs_runs() -> None:
    """docs/real-servers.md's GR00T example, against the test server (its URL replaced)."""
    page = (Path(__file__).parents[2] / "docs" / "real-servers.md").read_text()
    pattern = r"<!-- run against a GR00T server: [^>]+ -->\n```python\n(.*?)```"
    (code,) = re.findall(pattern, page, flags=re.S)
    with Gr00tServer(api_token="secret") as server:
        code = re.sub(r'URL = "[^"]+"', f'URL = "{server.url}"', code)
        namespace: dict[str, Any] = {}
        exec(compile(code, "real-servers.md", "exec"), namespace)
    assert namespace["arm"].shape == (4, 6)
    assert server.endpoints == ["get_modality_config", "reset", "get_action"]


def test_the_gr00t_rtc_snippet_of_the_docs_runs() -> None:
    """docs/real-servers.md's GR00T real-time chunking example, against the test server."""
    page = (Path(__file__).parents[2] / "docs" / "real-servers.md").read_text()
    pattern = r"<!-- run against a GR00T RTC server: [^>]+ -->\n```python\n(.*?)```"
    (code,) = re.findall(pattern, page, flags=re.S)
    with Gr00tServer(rtc=True) as server:
        code = re.sub(r'URL = "[^"]+"', f'URL = "{server.url}"', code)
        namespace: dict[str, Any] = {}
        exec(compile(code, "real-servers.md", "exec"), namespace)
    assert isinstance(namespace["executor"], ChunkExecutor)
    assert namespace["server"].capabilities["rtc"]["echo"] is False
    assert server.endpoints == ["get_modality_config"]


@BOTH
def test_a_state_given_as_named_parts_reaches_the_server_as_those_parts(kind: str) -> None:
    arm, gripper = np.linspace(0, 1, 6), np.array([0.25], np.float32)
    state, split = flat_state({"gripper": gripper, "arm": arm})  # any order: the split keeps it
    base = observation()
    obs = Observation(base.images, state=state, task=TASK)
    with Gr00tServer() as server:
        infer(kind, server.url, obs, state_split=split)
    sent = from_bytes(server.frames[1])["data"]["observation"]["state"]
    np.testing.assert_array_equal(sent["arm"], arm.astype(np.float32)[None, None])
    np.testing.assert_array_equal(sent["gripper"], gripper[None, None])


@pytest.mark.parametrize("parts", [{}, {"arm": []}, {"arm": [[1.0]]}, {"arm": ["a"]}])
def test_flat_state_refuses_what_is_not_named_vectors(parts: dict[str, Any]) -> None:
    with pytest.raises(ValueError, match=r"flat_state|vector"):
        flat_state(parts)


def test_a_control_loop_refuses_a_reset_it_cannot_call() -> None:
    executor = ChunkExecutor(lambda observation: None)  # type: ignore[arg-type, return-value]
    with pytest.raises(ValueError, match="reset must be a callable"):
        ControlLoop(observe=observation, executor=executor, apply_action=lambda action: None,
                    rate_hz=10, reset="yes")  # type: ignore[arg-type]  # fmt: skip


def restarted_with_horizon(server: Gr00tServer, horizon: int) -> Gr00tServer:
    """`server` stopped, and another started on its port with a policy of `horizon` steps."""
    server.__exit__(None, None, None)
    port = int(server.url.rsplit(":", 1)[1])
    return Gr00tServer(port=port, horizon=horizon).__enter__()


@BOTH
def test_a_server_restarted_with_another_policy_is_read_again(kind: str) -> None:
    """GR00T's server restarted on the same port with another policy (horizon 4, then 8):
    ZeroMQ reconnects silently, the monitor's drop is seen before the next call, and the
    modality config is read again before it: the next call's actions are the new policy's."""
    first = Gr00tServer(horizon=4).__enter__()
    servers = [first]

    def restart() -> None:
        servers.append(restarted_with_horizon(first, 8))
        time.sleep(0.3)  # ZeroMQ sees the drop and connects to the new server

    def sync_body(client: Any) -> Any:
        before = client.infer(observation())
        restart()
        return before, client.infer(observation())

    async def async_body(client: Any) -> Any:
        before = await client.infer(observation())
        restart()
        return before, await client.infer(observation())

    try:
        before, after = call(kind, first.url, sync_body if kind == "sync" else async_body)
    finally:
        servers[-1].__exit__(None, None, None)
    assert before.actions.shape == (4, 7)
    assert after.actions.shape == (8, 7)
    assert servers[-1].endpoints == ["get_modality_config", "get_action"]


@BOTH
def test_a_reply_that_contradicts_the_config_has_it_read_again_once(kind: str) -> None:
    """A policy changed with no reconnect to show it (the server's config changes in place):
    the reply's horizon contradicts the config, which is read again, and the request sent
    again under it; a reply that contradicts the config just read is refused."""

    def sync_body(client: Any) -> Any:
        before = client.infer(observation(), request_id="r-1")
        server.horizon = 8
        server.config["action"] = modality(list(server.action_dims), 8)
        return before, client.infer(observation(), request_id="r-2")

    async def async_body(client: Any) -> Any:
        before = await client.infer(observation(), request_id="r-1")
        server.horizon = 8
        server.config["action"] = modality(list(server.action_dims), 8)
        return before, await client.infer(observation(), request_id="r-2")

    with Gr00tServer(horizon=4) as server:
        before, after = call(kind, server.url, sync_body if kind == "sync" else async_body)
    assert (before.actions.shape, after.actions.shape) == ((4, 7), (8, 7))
    assert (before.request_id, after.request_id) == ("r-1", "r-2"), "the request sent again too"
    assert server.endpoints == [
        "get_modality_config", "get_action", "get_action", "get_modality_config", "get_action"
    ]  # fmt: skip


@BOTH
def test_the_request_sent_again_after_the_config_is_read_keeps_the_deadline(kind: str) -> None:
    def third_answer_late(request: dict[str, Any]) -> Any:
        server.delay_s = 1.0 if server.endpoints.count("get_action") == 3 else 0.0
        return [server.actions(request["data"]["observation"]), {}]

    def sync_body(client: Any) -> Any:
        client.infer(observation())
        server.horizon = 8
        server.config["action"] = modality(list(server.action_dims), 8)
        with pytest.raises(DeadlineExceededError):
            client.infer(observation())

    async def async_body(client: Any) -> Any:
        await client.infer(observation())
        server.horizon = 8
        server.config["action"] = modality(list(server.action_dims), 8)
        with pytest.raises(DeadlineExceededError):
            await client.infer(observation())

    with Gr00tServer(horizon=4, reply=third_answer_late) as server:
        call(kind, server.url, sync_body if kind == "sync" else async_body, deadline_s=0.5,
             timeout_s=5)  # fmt: skip
    assert server.endpoints[-2:] == ["get_modality_config", "get_action"]


@BOTH
def test_a_runtime_block_is_refused_before_sending(kind: str) -> None:
    """GR00T takes no runtime block: refused with a `ValueError`, and nothing sent for it."""

    def sync_body(client: Any) -> Any:
        with pytest.raises(ValueError, match="runtime"):
            client.infer(observation(), runtime={"return_timing": True})

    async def async_body(client: Any) -> Any:
        with pytest.raises(ValueError, match="runtime"):
            await client.infer(observation(), runtime={"return_timing": True})

    with Gr00tServer() as server:
        call(kind, server.url, sync_body if kind == "sync" else async_body)
    assert "get_action" not in server.endpoints


def test_the_state_split_sizes_the_metadata_and_an_unchecked_contract_fits_nothing() -> None:
    given = observation()
    with Gr00tServer() as server, ActionClient(server.url, state_split=SPLIT) as client:
        assert client.metadata().input.state_dim == sum(SPLIT.values())
        checked = client.fit(given)
    assert sorted(checked.images) == ["front", "wrist"]
    np.testing.assert_array_equal(checked.images["front"], given.images["front"])
    assert server.endpoints == ["get_modality_config"], "read once, for both"
    with (
        Gr00tServer() as server,
        ActionClient(server.url, state_split=SPLIT, check_contract=False) as client,
    ):
        fitted = client.fit(given)
    assert fitted.images.keys() == given.images.keys()
    assert all(fitted.images[key] is given.images[key] for key in given.images)
    assert server.endpoints == [], "no config read for a fit that checks nothing"


@BOTH
def test_a_reply_that_contradicts_a_config_read_again_is_refused(kind: str) -> None:
    """A server whose replies never fit its own config: the config is read again once, then
    the reply refused (`ProtocolError`), not asked again."""

    def eight_steps(request: dict[str, Any]) -> Any:
        return [{key: np.zeros((1, 8, dim), np.float32) for key, dim in SPLIT.items()}, {}]

    refusal = r"must be a \(1, 4, D\) .*, got \(1, 8, 6\)"
    with (
        Gr00tServer(horizon=4, reply=eight_steps) as server,
        pytest.raises(ProtocolError, match=refusal),
    ):
        infer(kind, server.url, observation())
    assert server.endpoints == ["get_modality_config", "get_action", "get_modality_config"]
