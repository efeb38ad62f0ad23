"""`ChunkExecutor(mode="rtc")`: the delay measured in ticks, the prefix cut when the request is
built, the server's echo required, and a server without RTC refused."""

from __future__ import annotations

import threading
from typing import Any

import numpy as np
import pytest

from vla_client.client.result import ActionResult, Timings
from vla_client.control import ChunkExecutor
from vla_client.errors import ModeNotSupportedError, ProtocolError
from vla_client.observation import Observation
from vla_client.protocol.models import ActionMetadata, MetadataOutput
from vla_client.protocol.rtc import RTCRequest, rtc_openpi_keys
from vla_client.server.policies.flow import rtc_capability

HORIZON = 10


def observe() -> Observation:
    return Observation({"wrist": np.zeros((4, 4, 3), np.uint8)}, state=[0.0])


def metadata(rtc: bool = True, horizon: int | None = HORIZON) -> ActionMetadata:
    capabilities: dict[str, Any] = {"rtc": rtc_capability()} if rtc else {}
    return ActionMetadata(
        model="fake",
        output=MetadataOutput(action_horizon=horizon, action_dim=2),
        capabilities=capabilities,
    )


class RTCPolicy:
    """An infer callable that keeps each call's observation and ``rtc`` keyword, replies when
    released, and
    echoes the RTC it was given (unless `echo` is False; with `echo_changes` in it, a server that
    says it applied something else). Row i of reply n is ``[100 n + i, n]``."""

    def __init__(self, echo: bool = True, **echo_changes: Any) -> None:
        self.echo = echo
        self.echo_changes = echo_changes
        self.sent: list[dict[str, Any] | None] = []
        self.observations: list[object] = []
        self._gate = threading.Semaphore(0)

    def release(self) -> None:
        self._gate.release()

    def __call__(self, observation: object, *, rtc: dict[str, Any] | None = None) -> ActionResult:
        self.sent.append(rtc)
        self.observations.append(observation)
        number = len(self.sent)
        if not self._gate.acquire(timeout=5):
            raise AssertionError("RTCPolicy was never released")
        actions = np.zeros((HORIZON, 2), np.float32)
        actions[:, 0] = 100 * number + np.arange(HORIZON)
        actions[:, 1] = number
        raw: dict[str, Any] = {}
        if rtc is not None and self.echo:
            request = RTCRequest(
                np.asarray(rtc["prefix_actions"], np.float32),
                rtc["inference_delay_steps"],
                rtc["execution_horizon"],
            )
            raw["rtc"] = {**request.echo(), **self.echo_changes}
        timings = Timings(1.0, 1.0, 1.0, 10, 10)
        return ActionResult(actions, f"req-{number}", timings, raw=raw)


def run_until_reply(executor: ChunkExecutor, policy: RTCPolicy, ticks: int) -> list[Any]:
    """Tick `ticks` times with the request in flight, then release it and wait for it."""
    actions = [executor.tick(observe) for _ in range(ticks)]
    policy.release()
    assert executor.join(5)
    return actions


def test_delay_is_ticks_consumed_and_prefix_is_the_unexecuted_remainder() -> None:
    policy = RTCPolicy()
    executor = ChunkExecutor(policy, mode="rtc", execution_horizon=4, server=metadata())
    run_until_reply(executor, policy, 1)  # the first request: nothing to continue yet
    assert policy.sent == [None]
    # The reply is taken on the next tick; then 3 ticks pass with the next request in flight.
    first = [executor.tick(observe) for _ in range(4)]
    assert [a[0] for a in first] == [101, 102, 103, 104]  # aligned: row 1 on (1 tick late)
    assert len(policy.sent) == 2  # row 4 reached the execution horizon: asked again
    sent = policy.sent[1]
    assert sent is not None
    # Cut when the request was built: rows 4..9 of chunk 1, row 4 being that tick's action.
    np.testing.assert_array_equal(sent["prefix_actions"], [[100 + i, 1] for i in range(4, HORIZON)])
    assert sent["inference_delay_steps"] == 1  # the first reply was taken 1 tick after sending
    assert sent["execution_horizon"] == 4
    run_until_reply(executor, policy, 2)  # in flight for 3 ticks: the one that sent, then 2
    action = executor.tick(observe)
    assert action is not None and action[0] == 203  # chunk 2, skipping the 3 rows that passed
    for _ in range(1):
        executor.tick(observe)
    assert len(policy.sent) == 3
    third = policy.sent[2]
    assert third is not None
    assert third["inference_delay_steps"] == 3  # the largest of the delays measured: 1 and 3
    np.testing.assert_array_equal(
        third["prefix_actions"], [[200 + i, 2] for i in range(4, HORIZON)]
    )
    policy.release()
    executor.close(5)


def test_the_delay_sent_is_the_largest_of_the_last_five_measured() -> None:
    """One slow reply (4 ticks) raises d for the next five requests, no longer: then only the
    1-tick delays since are remembered. Each request carries the observation `observe` gave."""
    policy = RTCPolicy()
    executor = ChunkExecutor(policy, mode="rtc", execution_horizon=2, server=metadata())
    given: list[Observation] = []

    def observe_new() -> Observation:
        given.append(observe())
        return given[-1]

    actions = [executor.tick(observe_new) for _ in range(4)]  # request 1 in flight 4 ticks
    policy.release()
    assert executor.join(5)
    for _ in range(11):  # each later reply is taken on the tick after it was asked for
        actions.append(executor.tick(observe_new))
        if executor.in_flight:
            policy.release()
            assert executor.join(5)
    delays = [rtc["inference_delay_steps"] for rtc in policy.sent[1:] if rtc is not None]
    assert delays == [4, 4, 4, 4, 4, 1]
    # Chunk 1 from row 4 (4 ticks late), each later chunk from row 1, asked again at row 2.
    assert [a[0] for a in actions[4:9]] == [104, 201, 202, 301, 302]
    assert policy.observations == given and len(given) == 7
    executor.close(5)


def test_the_delay_sent_is_at_most_the_prefix_it_describes() -> None:
    """A 4-tick delay measured, then asked again at row 8 of 10: the prefix has 2 rows, and d
    says that both will have run (before, d was 4: rows the prefix does not have)."""
    policy = RTCPolicy()
    executor = ChunkExecutor(policy, mode="rtc", execution_horizon=8, server=metadata())
    run_until_reply(executor, policy, 4)
    for _ in range(5):  # the reply is taken from row 4; row 8 asks again
        executor.tick(observe)
    sent = policy.sent[1]
    assert sent is not None
    assert sent["prefix_actions"] == [[108, 1], [109, 1]]
    assert sent["inference_delay_steps"] == 2
    policy.release()
    executor.close(5)


def test_the_prefix_is_at_most_the_rows_the_server_announces() -> None:
    """A server announcing 6-row chunks that sends 10: 7 rows are left at row 3, 6 are sent
    (the server refuses a longer prefix)."""
    policy = RTCPolicy()
    executor = ChunkExecutor(policy, mode="rtc", server=metadata(horizon=6))
    run_until_reply(executor, policy, 1)
    for _ in range(3):  # rows 1, 2, 3: asked again at 6 // 2
        executor.tick(observe)
    sent = policy.sent[1]
    assert sent is not None
    assert sent["prefix_actions"] == [[100 + i, 1] for i in range(3, 9)]
    assert (sent["inference_delay_steps"], sent["execution_horizon"]) == (1, 3)
    policy.release()
    executor.close(5)


def test_ticks_skipped_in_a_stall_are_not_taught_as_delay() -> None:
    """The loop skips 3 ticks while a request is in flight: its chunk is played from row 4 (time
    passed), but the delay learned is the 1 tick that ran (before: 4, for the next five)."""
    policy = RTCPolicy()
    executor = ChunkExecutor(policy, mode="rtc", execution_horizon=6, server=metadata())
    executor.tick(observe)
    executor.skip(3)
    policy.release()
    assert executor.join(5)
    actions = [executor.tick(observe) for _ in range(3)]
    assert [a[0] for a in actions] == [104, 105, 106]
    sent = policy.sent[1]
    assert sent is not None and sent["inference_delay_steps"] == 1
    assert len(sent["prefix_actions"]) == 4
    policy.release()
    executor.close(5)


def test_a_reply_dropped_as_late_teaches_no_delay() -> None:
    """Request 2 is in flight for 10 ticks, the whole chunk: dropped as late. The delay sent
    with request 4 is the 1 tick of the replies taken (before: 10, a prefix's worth)."""
    policy = RTCPolicy()
    executor = ChunkExecutor(policy, mode="rtc", execution_horizon=4, server=metadata())
    run_until_reply(executor, policy, 1)  # request 1, taken on the next tick
    run_until_reply(executor, policy, 13)  # row 4 asks again: request 2 out from tick 4 to 14
    run_until_reply(executor, policy, 1)  # request 2 dropped; request 3 asks, prefix-less
    for _ in range(4):  # request 3 taken from row 1; row 4 asks again
        executor.tick(observe)
    assert executor.stats.dropped_late == 1
    delays = [None if rtc is None else rtc["inference_delay_steps"] for rtc in policy.sent]
    assert delays == [None, 1, None, 1]
    policy.release()
    executor.close(5)


@pytest.mark.parametrize(
    ("rtc", "message"),
    [({"supported": "false"},
      "the server's capabilities.rtc.supported must be true or false, got 'false'"),
     ({"supported": 1}, "the server's capabilities.rtc.supported must be true or false, got 1"),
     ({"supported": True, "echo": "no"},
      "the server's capabilities.rtc.echo must be true or false, got 'no'"),
     ("yes", "the server's capabilities.rtc must be an object (or false), got 'yes'"),
     (True, "the server's capabilities.rtc must be an object (or false), got True")],
)  # fmt: skip
def test_capabilities_are_read_strictly_when_the_executor_is_built(
    rtc: object, message: str
) -> None:
    """Before, ``"supported": "false"`` announced RTC: the refusal came at the first reply, and
    ended the loop mid-run."""
    server = metadata()
    server.capabilities["rtc"] = rtc
    with pytest.raises(ProtocolError) as caught:
        ChunkExecutor(RTCPolicy(), mode="rtc", server=server)
    assert str(caught.value) == message


@pytest.mark.parametrize("rtc", [False, None, {"supported": False}])
def test_rtc_said_not_supported_is_refused_as_not_announced(rtc: object) -> None:
    server = metadata()
    server.capabilities["rtc"] = rtc
    with pytest.raises(ModeNotSupportedError, match="announces no real-time chunking"):
        ChunkExecutor(RTCPolicy(), mode="rtc", server=server)


def test_a_reply_without_the_echo_stops_the_executor() -> None:
    policy = RTCPolicy(echo=False)
    executor = ChunkExecutor(policy, mode="rtc", execution_horizon=2, server=metadata())
    run_until_reply(executor, policy, 1)
    for _ in range(2):
        executor.tick(observe)
    assert policy.sent[-1] is not None  # the second request carried RTC
    policy.release()
    assert executor.join(5)
    with pytest.raises(ModeNotSupportedError, match="does not say it applied real-time chunking"):
        executor.tick(observe)


def test_a_server_without_rtc_is_refused_with_the_modes_it_supports() -> None:
    with pytest.raises(ModeNotSupportedError) as caught:
        ChunkExecutor(RTCPolicy(), mode="rtc", server=metadata(rtc=False))
    message = str(caught.value)
    assert "\n" not in message
    assert "announces no real-time chunking" in message
    assert "supports modes naive, aligned, blended" in message


@pytest.mark.parametrize(
    ("changes", "applied"),
    [({"inference_delay_steps": 0}, "'prefix_steps': 6, 'inference_delay_steps': 0"),
     ({"prefix_steps": 2}, "'prefix_steps': 2, 'inference_delay_steps': 1")],
)  # fmt: skip
def test_a_reply_that_applied_another_prefix_or_delay_stops_the_executor(
    changes: dict[str, int], applied: str
) -> None:
    policy = RTCPolicy(**changes)
    executor = ChunkExecutor(policy, mode="rtc", execution_horizon=4, server=metadata())
    run_until_reply(executor, policy, 1)
    for _ in range(4):
        executor.tick(observe)
    policy.release()
    assert executor.join(5)
    with pytest.raises(ModeNotSupportedError) as caught:
        executor.tick(observe)
    assert applied in str(caught.value)
    assert str(caught.value).endswith("not the 6-row prefix with delay 1 sent")


def test_a_chunk_played_out_before_the_next_request_sends_no_prefix() -> None:
    policy = RTCPolicy()
    executor = ChunkExecutor(policy, mode="rtc", execution_horizon=HORIZON, server=metadata())
    run_until_reply(executor, policy, 1)
    for _ in range(HORIZON):  # rows 1..9, then nothing left: asked again with nothing to continue
        executor.tick(observe)
    assert policy.sent == [None, None]
    policy.release()
    executor.close(5)


def test_the_default_execution_horizon_is_at_least_one_row() -> None:
    policy = RTCPolicy()
    executor = ChunkExecutor(policy, mode="rtc", server=metadata(horizon=3))
    run_until_reply(executor, policy, 1)
    executor.tick(observe)  # takes the reply, plays row 1 of 10: s = 3 // 2 = 1 is reached
    assert len(policy.sent) == 2
    policy.release()
    executor.close(5)


def test_an_announcement_without_echo_takes_replies_that_say_nothing() -> None:
    """What `declare_rtc` gives for GR00T's server, which says nothing either way."""
    policy = RTCPolicy(echo=False)
    server = metadata()
    server.capabilities["rtc"] = {"supported": True, "echo": False}
    executor = ChunkExecutor(policy, mode="rtc", execution_horizon=2, server=server)
    run_until_reply(executor, policy, 1)
    for _ in range(2):
        executor.tick(observe)
    assert policy.sent[-1] is not None
    policy.release()
    assert executor.join(5)
    action = executor.tick(observe)  # taken, not refused
    assert action is not None and action[1] == 2
    assert executor.stats.chunks_received == 2


def test_a_gr00t_server_is_refused_with_the_way_to_declare_it() -> None:
    server = ActionMetadata(policy_family="gr00t", output=MetadataOutput(action_horizon=8))
    with pytest.raises(ModeNotSupportedError) as caught:
        ChunkExecutor(RTCPolicy(), mode="rtc", server=server)
    assert str(caught.value).endswith(
        "supports modes naive, aligned, blended (GR00T's server announces nothing: if its policy "
        "applies GR00T's rtc_* options, pass "
        "server=vla_client.protocol.declare_rtc(client.metadata()))"
    )
    with pytest.raises(ModeNotSupportedError) as caught:
        ChunkExecutor(RTCPolicy(), mode="rtc", server=metadata(rtc=False))
    assert str(caught.value).endswith("supports modes naive, aligned, blended")  # no GR00T hint
    unnamed = ActionMetadata(capabilities={})
    with pytest.raises(ModeNotSupportedError, match=r"the server \(unnamed\) announces no"):
        ChunkExecutor(RTCPolicy(), mode="rtc", server=unnamed)


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"mode": "fast"}, "mode must be one of 'naive', 'aligned', 'blended', 'rtc'; got 'fast'"),
        ({"mode": "rtc"},
         "mode 'rtc' needs server=client.metadata(), to check the server does real-time chunking"),
        ({"mode": "rtc", "server": metadata(), "prefetch_at": 3},
         "mode 'rtc' asks again every execution_horizon rows; leave prefetch_at 0"),
        ({"mode": "rtc", "server": metadata(), "execution_horizon": 0},
         "execution_horizon must be an integer >= 1; got 0"),
        ({"mode": "rtc", "server": metadata(), "execution_horizon": 11},
         "execution_horizon must be in 1..10 (the server's action horizon); got 11"),
        ({"mode": "rtc", "server": metadata(), "execution_horizon": 2.5},
         "execution_horizon must be an integer >= 1; got 2.5"),
        ({"mode": "rtc", "server": metadata(horizon=None)},
         "mode 'rtc' needs execution_horizon: the server announces no horizon"),
        ({"mode": "blended"}, "mode 'blended' needs blend_steps >= 1"),
        ({"mode": "aligned", "blend_steps": 2}, "blend_steps is for mode 'blended', not 'aligned'"),
        ({"mode": "aligned", "align": False},
         "align=False is mode 'naive', not 'aligned'; pass one of them"),
        ({"align": "yes"}, "align must be True or False; got 'yes'"),
        ({"align": 1}, "align must be True or False; got 1"),
        ({"execution_horizon": 4}, "execution_horizon and server are for mode='rtc'"),
        ({"server": metadata()}, "execution_horizon and server are for mode='rtc'"),
    ],
)  # fmt: skip
def test_options_are_checked(options: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError) as caught:
        ChunkExecutor(RTCPolicy(), **options)
    assert str(caught.value) == message


def test_default_execution_horizon_is_half_the_announced_chunk() -> None:
    policy = RTCPolicy()
    executor = ChunkExecutor(policy, mode="rtc", server=metadata())
    run_until_reply(executor, policy, 1)
    for _ in range(4):
        executor.tick(observe)
    assert len(policy.sent) == 1  # rows 1..4 played
    executor.tick(observe)
    assert len(policy.sent) == 2  # row 5 = 10 // 2: asked again
    assert policy.sent[1] is not None and policy.sent[1]["execution_horizon"] == 5
    policy.release()
    executor.close(5)


def test_openpi_keys_carry_what_parameters_carry() -> None:
    keys = rtc_openpi_keys(
        {"prefix_actions": [[1.0, 2.0]], "inference_delay_steps": 1, "execution_horizon": 3}
    )
    assert keys["rtc/inference_delay"] == 1 and keys["rtc/execution_horizon"] == 3
    np.testing.assert_array_equal(keys["rtc/prev_chunk"], [[1.0, 2.0]])
    assert keys["rtc/prev_chunk"].dtype == np.float32
