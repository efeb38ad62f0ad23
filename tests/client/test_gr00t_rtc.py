"""Real-time chunking against GR00T's server (tests/gr00t_server.py over real ZeroMQ): the
executor's prefix, d and s arrive as GR00T N1.7 takes them, per action key, bit for bit; a server
whose policy applies them keeps the frozen rows; GR00T announces nothing, so `mode="rtc"` is
refused until the user declares it, and then runs end to end.
"""

from __future__ import annotations

import asyncio
import math
import threading
from typing import Any

import numpy as np
import pytest

from gr00t_server import Gr00tServer, from_bytes, to_bytes
from vla_client import ActionClient, AsyncActionClient, Observation
from vla_client.client.result import ActionResult
from vla_client.control import ChunkExecutor
from vla_client.errors import ModeNotSupportedError
from vla_client.protocol.families.gr00t_rtc import declare_rtc
from vla_client.protocol.models import ActionMetadata
from vla_client.protocol.rtc import RTCRequest

pytest.importorskip("zmq")

SPLIT = {"arm": 6, "gripper": 1}
HORIZON = 8
LANGUAGE = "annotation.human.task_description"
PREFIX = (np.arange(35, dtype=np.float32).reshape(5, 7) / 8 - 3).astype(np.float32)
REQUEST = RTCRequest(PREFIX, inference_delay_steps=2, execution_horizon=4)


def observation(offset: float = 0.0) -> Observation:
    frames = {name: np.full((24, 32, 3), 9, np.uint8) for name in ("front", "wrist")}
    return Observation(frames, state=np.arange(7) / 8 + offset, task="stack")


def infers(kind: str, url: str, calls: list[dict[str, Any]]) -> list[ActionResult]:
    """One client of `kind` making one `infer` per entry of `calls` (its keywords)."""
    if kind == "sync":
        with ActionClient(url, state_split=SPLIT) as client:
            return [client.infer(observation(), **keywords) for keywords in calls]

    async def run() -> list[ActionResult]:
        async with AsyncActionClient(url, state_split=SPLIT) as client:
            return [await client.infer(observation(), **keywords) for keywords in calls]

    return asyncio.run(run())


def expected_request(rtc: RTCRequest, options: dict[str, Any]) -> bytes:
    """The get_action message for `observation()` carrying `rtc` as GR00T's RTC client sends
    it (its pull request #520): the prefix per action key, zero-padded to the horizon."""
    obs = observation()
    state = obs.state.astype(np.float32)  # type: ignore[union-attr]
    previous = {}
    for key, columns in (("arm", slice(0, 6)), ("gripper", slice(6, 7))):
        part = np.zeros((1, HORIZON, columns.stop - columns.start), np.float32)
        part[0, : rtc.prefix_steps] = rtc.prefix_actions[:, columns]
        previous[key] = part
    document = {
        "video": {name: frame[None, None] for name, frame in obs.images.items()},
        "state": {"arm": state[None, None, :6], "gripper": state[None, None, 6:]},
        "language": {LANGUAGE: [["stack"]]},
        "action": previous,
    }
    return to_bytes({"endpoint": "get_action",
                     "data": {"observation": document, "options": options}})  # fmt: skip


BOTH = pytest.mark.parametrize("kind", ["sync", "async"])


@BOTH
def test_the_prefix_delay_and_horizon_arrive_as_gr00ts_options_and_previous_chunk(
    kind: str,
) -> None:
    with Gr00tServer(horizon=HORIZON, rtc=True) as server:
        plain, guided = infers(kind, server.url, [{}, {"rtc": REQUEST.parameters()}])
    # d = 2 rows frozen; rows up to H - s = 4 guided: the last 4 rows of a 4-row previous chunk.
    options = {"action_horizon": 4, "rtc_overlap_steps": 4, "rtc_frozen_steps": 2,
               "rtc_ramp_rate": 5.0}  # fmt: skip
    assert server.frames[-1] == expected_request(REQUEST, options)
    np.testing.assert_array_equal(guided.actions[:2], PREFIX[:2])  # frozen: the prefix itself
    np.testing.assert_array_equal(guided.actions[4:], plain.actions[4:])  # past K: planned afresh
    low = np.minimum(PREFIX[2:4], plain.actions[2:4])
    high = np.maximum(PREFIX[2:4], plain.actions[2:4])
    ramped = guided.actions[2:4]
    assert ((low < ramped) & (ramped < high)).all()  # the ramp: between the two, neither end


def test_a_stock_gr00t_server_takes_the_request_and_drops_it_without_a_word() -> None:
    """Why the executor needs the user's declaration: the same bytes, a plain chunk back."""
    with Gr00tServer(horizon=HORIZON) as server:
        plain, ignored = infers("sync", server.url, [{}, {"rtc": REQUEST.parameters()}])
    assert from_bytes(server.frames[-1])["data"]["options"]["rtc_frozen_steps"] == 2
    np.testing.assert_array_equal(ignored.actions, plain.actions)
    assert ignored.raw["info"] == {}  # and says nothing of it


@pytest.mark.parametrize("rate", [2, 0.5])
def test_a_ramp_rate_and_other_options_given_with_the_call_are_sent(rate: float) -> None:
    keywords = {"seed": 3, "rtc": REQUEST.parameters(), "rtc_ramp_rate": rate}
    with Gr00tServer(horizon=HORIZON, rtc=True) as server:
        infers("sync", server.url, [{}, keywords])
    options = from_bytes(server.frames[-1])["data"]["options"]
    assert options == {"seed": 3, "action_horizon": 4, "rtc_overlap_steps": 4,
                       "rtc_frozen_steps": 2, "rtc_ramp_rate": float(rate)}  # fmt: skip
    assert isinstance(options["rtc_ramp_rate"], float)


def test_a_prefix_as_long_as_the_chunk_is_taken() -> None:
    whole = RTCRequest(np.ones((HORIZON, 7), np.float32), 1, 2)
    with Gr00tServer(horizon=HORIZON, rtc=True) as server:
        _, guided = infers("sync", server.url, [{}, {"rtc": whole.parameters()}])
    assert from_bytes(server.frames[-1])["data"]["options"]["rtc_overlap_steps"] == HORIZON - 2
    np.testing.assert_array_equal(guided.actions[0], np.ones(7))


def test_a_prefix_that_reaches_past_h_minus_s_is_sent_whole_and_guided_up_to_the_delay() -> None:
    # s = H: no rows before the next chunk's own; only the d = 3 frozen rows are kept.
    rtc = RTCRequest(PREFIX, inference_delay_steps=3, execution_horizon=HORIZON)
    with Gr00tServer(horizon=HORIZON, rtc=True) as server:
        _, guided = infers("sync", server.url, [{}, {"rtc": rtc.parameters()}])
    options = {"action_horizon": 3, "rtc_overlap_steps": 3, "rtc_frozen_steps": 3,
               "rtc_ramp_rate": 5.0}  # fmt: skip
    assert server.frames[-1] == expected_request(rtc, options)
    np.testing.assert_array_equal(guided.actions[:3], PREFIX[:3])


NO_SIZES = (
    "GR00T announces its action keys but not their sizes: real-time chunking cuts the prefix by "
    "the sizes of the server's last reply, so send one request without it first"
)


def test_the_first_request_cannot_carry_rtc_gr00t_does_not_size_its_actions() -> None:
    with (
        Gr00tServer(horizon=HORIZON, rtc=True) as server,
        pytest.raises(ValueError, match=NO_SIZES),
    ):
        infers("sync", server.url, [{"rtc": REQUEST.parameters()}])
    assert server.endpoints == ["get_modality_config"]  # nothing sent


def bad(**changes: Any) -> dict[str, Any]:
    return {**REQUEST.parameters(), **changes}


@pytest.mark.parametrize(
    ("keywords", "match"),
    [
        ({"rtc": bad(prefix_actions=np.zeros((5, 8)).tolist())}, r"\[P, 7\] with P in 1\.\.8"),
        ({"rtc": bad(prefix_actions=np.zeros((9, 7)).tolist())}, r"\[P, 7\] with P in 1\.\.8"),
        ({"rtc": bad(execution_horizon=9)}, r"execution_horizon must be in 1\.\.8"),
        ({"rtc": bad(inference_delay_steps=-1)}, "inference_delay_steps must be an integer >= 0"),
        ({"rtc": bad(prefix_actions=PREFIX[:2].tolist(), inference_delay_steps=3)},
         r"inference_delay_steps must be at most the prefix's 2 rows .*got 3"),
        ({"rtc": bad(prefix_actions=[[math.nan] * 7])}, "finite"),
        ({"rtc": {"prefix_actions": PREFIX.tolist()}}, "lacks"),
        ({"rtc": "on"}, "must be an object"),
        ({"rtc": REQUEST.parameters(), "rtc_ramp_rate": 0}, "finite number > 0"),
        ({"rtc": REQUEST.parameters(), "rtc_ramp_rate": math.inf}, "finite number > 0"),
        ({"rtc": REQUEST.parameters(), "rtc_ramp_rate": True}, "finite number > 0"),
        ({"rtc": REQUEST.parameters(), "rtc_frozen_steps": 1}, "not both"),
    ],
)
def test_a_request_that_does_not_fit_is_refused_before_sending(
    keywords: dict[str, Any], match: str
) -> None:
    with (
        Gr00tServer(horizon=HORIZON, rtc=True) as server,
        ActionClient(server.url, state_split=SPLIT) as client,
    ):
        client.infer(observation())
        with pytest.raises(ValueError, match=match):
            client.infer(observation(), **keywords)
    assert server.endpoints == ["get_modality_config", "get_action"]


def test_rtc_mode_is_refused_until_declared_naming_the_modes_it_supports() -> None:
    with (
        Gr00tServer(horizon=HORIZON, rtc=True) as server,
        ActionClient(server.url, state_split=SPLIT) as client,
        pytest.raises(ModeNotSupportedError) as caught,
    ):
        ChunkExecutor(client.infer, mode="rtc", server=client.metadata())
    message = str(caught.value)
    assert "\n" not in message
    assert "supports modes naive, aligned, blended" in message
    assert "declare_rtc(client.metadata())" in message


def test_the_declaration_says_the_server_does_rtc_on_the_clients_word_with_no_echo() -> None:
    metadata = ActionMetadata(policy_family="gr00t", capabilities={"other": 1})
    assert declare_rtc(metadata).capabilities == {
        "other": 1,
        "rtc": {
            "supported": True,
            "echo": False,
            "declared": "by the client: GR00T's server announces nothing",
            "options": ["action_horizon", "rtc_overlap_steps", "rtc_frozen_steps",
                        "rtc_ramp_rate"],
            "previous_chunk": "observation.action",
        },
    }  # fmt: skip
    assert metadata.capabilities == {"other": 1}  # a copy: the client's own is left as it was


def test_only_gr00ts_metadata_can_be_declared() -> None:
    with pytest.raises(ValueError, match="other servers announce real-time chunking"):
        declare_rtc(ActionMetadata(policy_family="pi0"))


class Gated:
    """`client.infer` held back until released, keeping each call's ``rtc`` and result."""

    def __init__(self, client: ActionClient) -> None:
        self.client = client
        self.sent: list[dict[str, Any] | None] = []
        self.results: list[ActionResult] = []
        self.gate = threading.Semaphore(0)

    def __call__(self, obs: Observation, **keywords: Any) -> ActionResult:
        self.sent.append(keywords.get("rtc"))
        assert self.gate.acquire(timeout=5), "never released"
        self.results.append(self.client.infer(obs, **keywords))
        return self.results[-1]


def test_a_chunk_executor_in_rtc_mode_continues_the_chunk_over_gr00t() -> None:
    requests = iter(range(1, 10))

    def observe() -> Observation:  # each request's state shifts the server's pattern by 7
        return observation(offset=next(requests))

    with (
        Gr00tServer(horizon=HORIZON, rtc=True) as server,
        ActionClient(server.url, state_split=SPLIT) as client,
    ):
        infer = Gated(client)
        executor = ChunkExecutor(
            infer, mode="rtc", execution_horizon=4, server=declare_rtc(client.metadata())
        )
        executor.tick(observe)
        infer.gate.release()
        assert executor.join(5)
        played = [executor.tick(observe) for _ in range(4)]  # rows 1..4; row 4 asks again
        played += [executor.tick(observe) for _ in range(2)]  # rows 5, 6 while in flight
        infer.gate.release()
        assert executor.join(5)
        switch = executor.tick(observe)
        executor.close(5)
    first, second = infer.results
    assert infer.sent[0] is None and infer.sent[1] is not None
    prefix = np.asarray(infer.sent[1]["prefix_actions"], np.float32)
    np.testing.assert_array_equal(prefix, first.actions[4:])  # the unexecuted remainder
    assert infer.sent[1]["inference_delay_steps"] == 1  # the first reply: taken 1 tick later
    sent = from_bytes(server.frames[-1])["data"]
    np.testing.assert_array_equal(sent["observation"]["action"]["arm"][0, :4], prefix[:, :6])
    np.testing.assert_array_equal(sent["observation"]["action"]["gripper"][0, :4], prefix[:, 6:])
    assert sent["options"] == {"action_horizon": 4, "rtc_overlap_steps": 4,
                               "rtc_frozen_steps": 1, "rtc_ramp_rate": 5.0}  # fmt: skip
    np.testing.assert_array_equal(second.actions[0], prefix[0])  # frozen: what was executed
    np.testing.assert_array_equal(played[-1], first.actions[6])
    # The reply came 3 ticks after its observation: the robot goes on at row 3, which the
    # server pulled towards the old chunk's row 7 instead of the pattern 7 units up.
    assert switch is not None
    np.testing.assert_array_equal(switch, second.actions[3])
    fresh = second.actions[4] - 10  # the new pattern's row 3: rows past K are unguided
    assert (np.abs(switch - first.actions[7]) < np.abs(fresh - first.actions[7])).all()
