"""ChunkExecutor: alignment, prefetch, blending, and which replies are never executed."""

from __future__ import annotations

import logging
import math
import threading
import time
from dataclasses import replace

import numpy as np
import pytest

from vla_client.control import ChunkExecutor, UnsafeActionError, chunk, cross_fade
from vla_client.control.chunk import PAST_HINT
from vla_client.errors import (
    ConnectError,
    DeadlineExceededError,
    InvalidObservationError,
    MismatchedReplyError,
    ProtocolError,
    ServerError,
    StaleObservationError,
)
from vla_client.observation import Observation


def ticks(executor, observe, n):
    return [executor.tick(observe) for _ in range(n)]


def index_and_request(action):
    """The (row index, request number) a FakePolicy action encodes."""
    return (int(action[0]), int(action[1]))


@pytest.mark.parametrize("delay", [1, 2, 3, 5])
def test_chunk_arriving_late_starts_at_the_elapsed_index(delay, clock, observe, policy_type):
    policy = policy_type(gated=True)
    executor = ChunkExecutor(policy, clock=clock, monotonic=clock)
    assert ticks(executor, observe, delay) == [None] * delay
    assert executor.stats.requests_sent == 1
    policy.release()
    assert executor.join(5)
    played = [index_and_request(a) for a in ticks(executor, observe, 10 - delay)]
    assert played == [(i, 1) for i in range(delay, 10)]
    assert executor.stats.latencies[0].ticks_elapsed == delay
    assert executor.tick(observe) is None
    assert executor.stats.requests_sent == 2
    policy.release()


def test_prefetch_starts_when_remaining_reaches_threshold(clock, observe, policy_type):
    policy = policy_type(gated=True)
    executor = ChunkExecutor(policy, prefetch_at=4, clock=clock, monotonic=clock)
    executor.tick(observe)
    policy.release()
    executor.join(5)
    sent_after_tick = []
    played = []
    for _ in range(9):  # ticks 1..9 play rows 1..9
        played.append(index_and_request(executor.tick(observe)))
        sent_after_tick.append(executor.stats.requests_sent)
    assert played == [(i, 1) for i in range(1, 10)]
    # Row t is played at tick t with 10 - t left; the 4-left tick is 6. One in flight at most.
    assert sent_after_tick == [1, 1, 1, 1, 1, 2, 2, 2, 2]
    policy.release()


def test_upcoming_is_the_rows_after_the_one_tick_gave(clock, observe, policy_type):
    policy = policy_type(gated=True)
    executor = ChunkExecutor(policy, clock=clock, monotonic=clock)
    assert executor.upcoming.shape == (0, 0)
    executor.tick(observe)
    policy.release()
    executor.join(5)
    action = executor.tick(observe)  # row 1 of request 1
    assert index_and_request(action) == (1, 1)
    assert [index_and_request(row) for row in executor.upcoming] == [(i, 1) for i in range(2, 10)]
    executor.upcoming[0, 0] = -1.0  # a copy: the chunk is not changed
    assert index_and_request(executor.tick(observe)) == (2, 1)
    policy.release()


def test_tick_does_not_wait_for_the_inference(clock, observe, policy_type):
    policy = policy_type(gated=True)
    executor = ChunkExecutor(policy, clock=clock, monotonic=clock)
    started = time.perf_counter()
    assert ticks(executor, observe, 50) == [None] * 50
    elapsed = time.perf_counter() - started
    policy.release()
    assert elapsed < 10.0  # a tick that waited would wait for the release, after this
    assert executor.stats.requests_sent == 1
    assert executor.stats.starved_ticks == 50


def test_new_chunk_is_cross_faded_with_the_old(clock, observe, policy_type):
    policy = policy_type(gated=True)
    executor = ChunkExecutor(policy, prefetch_at=5, blend_steps=3, clock=clock, monotonic=clock)
    executor.tick(observe)  # tick 0 sends request 1
    policy.release()
    executor.join(5)
    played = ticks(executor, observe, 5)  # ticks 1..5 play rows 1..5; tick 5 sends request 2
    assert executor.stats.requests_sent == 2
    policy.release()
    executor.join(5)
    played += ticks(executor, observe, 7)  # tick 6 takes chunk 2 at its row 1
    policy.release()  # request 3, sent at tick 10, is never taken in
    # Old rows 6..8 (request 1) fade into new rows 1..3 (request 2) with new weights 1/4..3/4.
    expected_index = [1, 2, 3, 4, 5, 4.75, 4.5, 4.25, 4, 5, 6, 7]
    expected_request = [1, 1, 1, 1, 1, 1.25, 1.5, 1.75, 2, 2, 2, 2]
    assert np.allclose([a[0] for a in played], expected_index)
    assert np.allclose([a[1] for a in played], expected_request)


def test_cross_fade_weights():
    old, new = np.zeros((5, 1), np.float32), np.ones((4, 1), np.float32)
    assert np.allclose(cross_fade(old, new, 3)[:, 0], [0.25, 0.5, 0.75, 1.0])
    assert np.allclose(cross_fade(old[:2], new, 10)[:, 0], [1 / 3, 2 / 3, 1.0, 1.0])
    assert np.array_equal(cross_fade(old, new, 0), new)
    assert np.array_equal(cross_fade(old[:0], new, 3), new)


def test_cross_fade_refuses_a_changed_action_dim():
    with pytest.raises(ProtocolError):
        cross_fade(np.zeros((3, 2), np.float32), np.zeros((3, 3), np.float32), 2)


@pytest.mark.parametrize(
    ("error", "counter"),
    [
        (MismatchedReplyError("reply for req-0"), "dropped_mismatched"),
        (StaleObservationError(0.5, 0.1), "stale_observations"),
        (DeadlineExceededError("too slow"), "dropped_late"),
    ],
)
def test_replies_refused_by_infer_are_counted_and_retried(
    error, counter, clock, observe, policy_type
):
    policy = policy_type(error=error)
    executor = ChunkExecutor(policy, clock=clock, monotonic=clock)
    played = []
    for _ in range(4):
        played.append(executor.tick(observe))
        executor.join(5)
    assert played == [None] * 4
    assert getattr(executor.stats, counter) == 3
    assert executor.stats.chunks_received == 0
    assert executor.stats.errors == 0
    assert executor.last_error is error
    assert len(policy.requests) == 4


def test_a_run_of_failures_is_logged_once(clock, observe, policy_type, caplog):
    policy = policy_type(error=ConnectError("connection refused"))
    executor = ChunkExecutor(policy, clock=clock, monotonic=clock)
    with caplog.at_level(logging.DEBUG, logger="vla_client.control.chunk"):
        for _ in range(5):
            executor.tick(observe)
            executor.join(5)
        policy.error = None
        executor.tick(observe)
        executor.join(5)
        executor.tick(observe)
    assert executor.stats.errors == 5 and executor.stats.chunks_received == 1
    levels = [r.levelno for r in caplog.records if "inference" in r.getMessage()]
    assert levels == [logging.WARNING] + [logging.DEBUG] * 4 + [logging.INFO]


def test_reply_carrying_a_taken_request_id_is_never_executed(clock, observe, policy_type):
    policy = policy_type(horizon=4, reply_id=lambda n: "req-1")
    executor = ChunkExecutor(policy, prefetch_at=2, clock=clock, monotonic=clock)
    played = []
    for _ in range(8):
        played.append(executor.tick(observe))
        executor.join(5)
    requests = {int(a[1]) for a in played if a is not None}
    assert requests == {1}
    assert executor.stats.chunks_received == 1
    assert executor.stats.dropped_mismatched >= 1
    assert executor.chunk_request_id == "req-1"


def test_each_chunk_keeps_its_request_id(clock, observe, policy_type):
    policy = policy_type(horizon=3)
    executor = ChunkExecutor(policy, prefetch_at=1, clock=clock, monotonic=clock)
    ids = []
    for _ in range(6):
        executor.tick(observe)
        ids.append(executor.chunk_request_id)
        executor.join(5)
    # Each chunk plays rows 1 and 2 (its reply takes one tick), asking for the next on row 2.
    assert ids == [None, "req-1", "req-1", "req-2", "req-2", "req-3"]


def test_source_names_the_request_and_row_of_each_action(clock, observe, policy_type):
    policy = policy_type(horizon=6, gated=True)
    executor = ChunkExecutor(policy, prefetch_at=3, clock=clock, monotonic=clock)
    sources = []
    for tick in range(9):
        if tick in (2, 6):  # request 1 (sent at tick 0) lands 2 ticks late, request 2 (tick 3) 3
            policy.release()
            executor.join(5)
        action = executor.tick(observe)
        sources.append(executor.source)
        if action is not None:
            assert executor.source is not None
            assert index_and_request(action) == (executor.source.row, int(action[1]))
    assert [(s.request_id, s.row) if s else None for s in sources] == [
        None, None, ("req-1", 2), ("req-1", 3), ("req-1", 4), ("req-1", 5),
        ("req-2", 3), ("req-2", 4), ("req-2", 5),
    ]  # fmt: skip
    policy.release()


# Reply deadlines: tests/control/test_timing_at_the_edge.py, at the edge and either side.


def test_reply_with_every_action_in_the_past_is_dropped(clock, observe, policy_type):
    policy = policy_type(horizon=3, gated=True)
    executor = ChunkExecutor(policy, clock=clock, monotonic=clock)
    ticks(executor, observe, 3)
    policy.release()
    executor.join(5)
    assert executor.tick(observe) is None
    assert executor.stats.dropped_late == 1
    assert executor.stats.chunks_received == 0
    policy.release()


def test_stale_observation_is_not_sent(clock, observe, observe_aged, policy_type):
    policy = policy_type()
    executor = ChunkExecutor(policy, max_observation_age_s=0.5, clock=clock, monotonic=clock)
    ticks(executor, observe_aged(0.6), 3)
    assert policy.requests == []
    assert executor.stats.stale_observations == 3
    executor.tick(observe_aged(0.4))
    assert len(policy.requests) == 1


def test_untimed_observation_is_aged_from_observe(clock, observe_untimed, policy_type):
    policy = policy_type()
    executor = ChunkExecutor(policy, max_observation_age_s=0.5, clock=clock, monotonic=clock)
    executor.tick(observe_untimed)
    executor.join(5)
    assert len(policy.requests) == 1
    assert executor.stats.stale_observations == 0


@pytest.mark.parametrize(
    "error", [ConnectError("refused"), ServerError(503, "busy"), ServerError(429, "slow down")]
)
def test_retryable_error_is_counted_and_retried(error, clock, observe, policy_type):
    policy = policy_type(error=error)
    executor = ChunkExecutor(policy, clock=clock, monotonic=clock)
    executor.tick(observe)
    executor.join(5)
    assert executor.tick(observe) is None
    assert executor.stats.errors == 1
    assert executor.last_error is error
    assert executor.stats.requests_sent == 2
    executor.join(5)


def test_other_errors_surface_from_tick(clock, observe, policy_type):
    policy = policy_type(error=RuntimeError("bug"))
    executor = ChunkExecutor(policy, clock=clock, monotonic=clock)
    executor.tick(observe)
    executor.join(5)
    with pytest.raises(RuntimeError, match="bug"):
        executor.tick(observe)


def test_a_batched_reply_is_counted_as_malformed_and_not_played(clock, observe, policy_type):
    policy = policy_type()
    executor = ChunkExecutor(lambda obs: _batched(policy(obs)), clock=clock, monotonic=clock)
    executor.tick(observe)
    executor.join(5)
    assert executor.tick(observe) is None
    assert isinstance(executor.last_error, ProtocolError)
    assert (executor.stats.malformed_replies, executor.stats.chunks_received) == (1, 0)


def _batched(result):
    return replace(result, actions=result.actions[None])


def test_validate_sees_each_chunk_and_can_refuse_it(clock, observe, policy_type):
    seen = []

    def refuse(actions):
        seen.append(actions.shape)
        raise UnsafeActionError("no")

    executor = ChunkExecutor(policy_type(horizon=6), validate=refuse, clock=clock, monotonic=clock)
    executor.tick(observe)
    executor.join(5)
    with pytest.raises(UnsafeActionError):
        executor.tick(observe)
    assert seen == [(6, 2)]
    assert executor.stats.chunks_received == 0


def test_latency_sample_uses_only_the_robot_clock(clock, observe_aged, policy_type):
    policy = policy_type(clock=clock, infer_s=0.03, server_ms=20.0)
    executor = ChunkExecutor(policy, clock=clock, monotonic=clock)
    executor.tick(observe_aged(0.05))
    executor.join(5)
    executor.tick(observe_aged(0.05))
    (sample,) = executor.stats.latencies
    assert sample.request_id == policy.requests[0]
    assert sample.observation_age_ms == pytest.approx(50.0)
    assert sample.infer_ms == pytest.approx(30.0)
    assert sample.server_ms == 20.0
    assert sample.network_ms == pytest.approx(10.0)  # round trip 30 minus server 20
    assert sample.observation_to_action_ms == pytest.approx(80.0)
    assert executor.stats.observation_to_action_ms().p50 == pytest.approx(80.0)
    assert executor.last_chunk_at == clock()


def test_closed_executor_plays_its_chunk_but_sends_nothing(clock, observe, policy_type):
    policy = policy_type(horizon=4)
    executor = ChunkExecutor(policy, prefetch_at=3, clock=clock, monotonic=clock)
    executor.tick(observe)
    assert executor.close(5)
    played = ticks(executor, observe, 4)
    assert [index_and_request(a) for a in played[:3]] == [(1, 1), (2, 1), (3, 1)]
    assert played[3] is None
    assert len(policy.requests) == 1


@pytest.mark.parametrize("option", ["prefetch_at", "blend_steps"])
def test_a_negative_prefetch_or_blend_is_refused_on_its_own(option, policy_type):
    with pytest.raises(ValueError, match=rf"^{option} must be an integer >= 0; got -1$"):
        ChunkExecutor(policy_type(), **{option: -1})


def test_a_fresh_executor_reports_nothing_yet(policy_type):
    executor = ChunkExecutor(policy_type())
    assert executor.last_error is None
    assert executor.last_chunk_at is None
    assert executor.chunk_request_id is None
    assert executor.source is None
    assert executor.remaining == 0 and not executor.in_flight


def test_by_default_the_next_chunk_is_asked_for_when_the_last_action_has_run(
    clock, observe, policy_type
):
    """prefetch_at=0 and blend_steps=0: chunk 2 is asked for on the tick after chunk 1's last
    row, and played as it came (row 1 onward: it lands one tick late), never blended."""
    policy = policy_type(horizon=3)
    executor = ChunkExecutor(policy, clock=clock, monotonic=clock)
    played, sent = [], []
    for _ in range(6):
        action = executor.tick(observe)
        played.append(None if action is None else index_and_request(action))
        sent.append(executor.stats.requests_sent)
        executor.join(5)
    assert played == [None, (1, 1), (2, 1), None, (1, 2), (2, 2)]
    assert sent == [1, 1, 1, 2, 2, 2]


def test_by_default_a_chunk_fetched_ahead_is_not_blended(clock, observe, policy_type):
    """Each reply lands a tick after it was asked for, while the old chunk still has rows:
    the new chunk replaces them as it came (row 1 of each request), never mixed."""
    policy = policy_type(horizon=4)
    executor = ChunkExecutor(policy, prefetch_at=3, clock=clock, monotonic=clock)
    played = []
    for _ in range(4):
        played.append(executor.tick(observe))
        executor.join(5)
    assert played[0] is None
    assert [action.tolist() for action in played[1:]] == [[1, 1], [1, 2], [1, 3]]


def test_a_starved_tick_after_actions_has_no_source(clock, observe, policy_type):
    policy = policy_type(horizon=2, gated=True)
    executor = ChunkExecutor(policy, clock=clock, monotonic=clock)
    executor.tick(observe)
    policy.release()
    executor.join(5)
    assert executor.tick(observe) is not None and executor.source is not None
    assert executor.tick(observe) is None  # the chunk has run out; request 2 is in flight
    assert executor.source is None
    policy.release()


def test_infer_gets_the_observation_observe_returned_on_a_daemon_thread(clock, policy_type):
    policy = policy_type()
    seen_on = []

    def infer(observation):
        seen_on.append(threading.current_thread())
        return policy(observation)

    observation = Observation({"wrist": np.zeros((4, 4, 3), np.uint8)}, state=[0.0])
    executor = ChunkExecutor(infer, clock=clock, monotonic=clock)
    executor.tick(lambda: observation)
    executor.join(5)
    assert policy.observations == [observation]
    (thread,) = seen_on
    assert thread is not threading.current_thread()
    # Named for thread dumps; a daemon, so an inference that hangs does not keep the process up.
    assert thread.name == "vla-infer" and thread.daemon


def test_join_and_close_give_up_after_their_timeout(clock, observe, policy_type):
    policy = policy_type(gated=True)
    executor = ChunkExecutor(policy, clock=clock, monotonic=clock)
    executor.tick(observe)
    releaser = threading.Timer(2.0, policy.release)  # a hung wait would see it finish
    releaser.start()
    try:
        assert executor.join(0.01) is False
        assert executor.close(0.01) is False
        assert executor.in_flight
    finally:
        releaser.cancel()
        policy.release()
    assert executor.close(5) is True


def test_every_duplicate_and_late_reply_is_counted_and_logged(clock, observe, policy_type, caplog):
    policy = policy_type(horizon=2, reply_id=lambda n: "req-1" if n < 4 else f"late-{n}")
    executor = ChunkExecutor(policy, prefetch_at=1, clock=clock, monotonic=clock)
    with caplog.at_level(logging.WARNING, logger="vla_client.control.chunk"):
        for _ in range(3):  # chunk req-1 is taken, then two replies carrying its id come back
            executor.tick(observe)
            executor.join(5)
        policy.gated = True  # every later reply lands 2 ticks late: a 2-row chunk is all past
        for _ in range(2):
            executor.tick(observe)
            executor.tick(observe)
            policy.release()
            executor.join(5)
        executor.tick(observe)
    assert executor.stats.chunks_received == 1
    assert executor.stats.dropped_mismatched == 2
    assert executor.stats.dropped_late == 2
    messages = [r.getMessage() for r in caplog.records]
    assert messages.count("dropped reply 'req-1': that chunk was already taken") == 2
    for request_id in ("late-4", "late-5"):
        assert (
            f"dropped late reply {request_id} (2 ticks old; all its actions are past: "
            f"{PAST_HINT})" in messages
        )


def test_chunks_received_counts_every_chunk(clock, observe, policy_type):
    executor = ChunkExecutor(policy_type(horizon=2), clock=clock, monotonic=clock)
    for _ in range(6):
        executor.tick(observe)
        executor.join(5)
    assert executor.stats.chunks_received == 3


def test_the_ids_remembered_are_bounded(clock, observe, policy_type, monkeypatch):
    """After SEEN_IDS newer chunks, an id is forgotten: the memory does not grow for ever."""
    seen = 4  # SEEN_IDS, made small to keep the test short
    monkeypatch.setattr(chunk, "SEEN_IDS", seen)
    ids = [f"id-{n}" for n in range(seen + 1)] + ["id-0", f"id-{seen}"]
    policy = policy_type(horizon=2, reply_id=lambda n: ids[n - 1] if n <= len(ids) else "next")
    executor = ChunkExecutor(policy, prefetch_at=1, clock=clock, monotonic=clock)
    for _ in range(len(ids) + 1):  # each tick takes the reply to the one before
        executor.tick(observe)
        executor.join(5)
    executor.close()
    assert executor.stats.chunks_received == seen + 2  # id-0 again, once forgotten
    assert executor.stats.dropped_mismatched == 1  # the newest id is still remembered


def test_actions_are_float32_whatever_the_reply_holds(clock, observe, policy_type):
    policy = policy_type(horizon=3)

    def infer(observation):
        result = policy(observation)
        return replace(result, actions=result.actions.astype(np.float64) + 0.1)

    executor = ChunkExecutor(infer, clock=clock, monotonic=clock)
    executor.tick(observe)
    executor.join(5)
    action = executor.tick(observe)
    assert action.dtype == np.float32
    assert action.tolist() == [np.float32(1.1), np.float32(1.1)]


def test_a_reply_that_is_not_a_chunk_names_its_shape(clock, observe, policy_type):
    policy = policy_type()
    executor = ChunkExecutor(
        lambda obs: replace(policy(obs), actions=np.zeros(3)), clock=clock, monotonic=clock
    )
    executor.tick(observe)
    executor.join(5)
    assert executor.tick(observe) is None
    assert str(executor.last_error) == "expected an action chunk [H, D], got shape (3,)"
    assert executor.stats.malformed_replies == 1


def test_failures_and_recovery_are_logged_with_the_error_and_the_count(
    clock, observe, policy_type, caplog
):
    """A failure after a recovery starts a new run: it is a warning again."""
    policy = policy_type(horizon=2, error=ConnectError("connection refused"))
    executor = ChunkExecutor(
        policy, prefetch_at=1, clock=clock, monotonic=clock
    )  # a request every tick
    with caplog.at_level(logging.DEBUG, logger="vla_client.control.chunk"):
        for error in [policy.error, policy.error, None, policy.error]:
            policy.error = error
            executor.tick(observe)
            executor.join(5)
        executor.tick(observe)
    records = [(r.levelno, r.getMessage()) for r in caplog.records]
    failed = "inference failed, trying again: connection refused"
    assert records == [
        (logging.WARNING, failed),
        (logging.DEBUG, failed),
        (logging.INFO, "inference back after 2 failed requests"),
        (logging.WARNING, failed),
    ]


def test_a_stale_observation_is_logged_with_its_age(clock, observe_aged, policy_type, caplog):
    executor = ChunkExecutor(policy_type(), max_observation_age_s=0.5, clock=clock, monotonic=clock)
    with caplog.at_level(logging.DEBUG, logger="vla_client.control.chunk"):
        executor.tick(observe_aged(0.75))
    assert [r.getMessage() for r in caplog.records] == ["observation 750.0 ms old, not sent"]


def test_cross_fade_blends_only_as_many_steps_as_the_new_chunk_has():
    old, new = np.zeros((5, 1), np.float32), np.ones((2, 1), np.float32)
    assert cross_fade(old, new, 4)[:, 0].tolist() == pytest.approx([1 / 3, 2 / 3])


def test_a_changed_action_dim_is_named():
    with pytest.raises(ProtocolError, match="action dim changed from 2 to 3"):
        cross_fade(np.zeros((3, 2), np.float32), np.zeros((3, 3), np.float32), 2)


@pytest.mark.parametrize(("status", "refused"), [(499, 1), (500, 0), (501, 0), (429, 0)])
def test_server_errors_below_500_are_refusals(status, refused, clock, observe, policy_type):
    """Both are retried on the next tick; only refusals are counted apart, and bounded."""
    executor = ChunkExecutor(
        policy_type(error=ServerError(status, "x")), clock=clock, monotonic=clock
    )
    executor.tick(observe)
    executor.join(5)
    executor.tick(observe)
    assert (executor.stats.refused, executor.stats.errors) == (refused, 1 - refused)
    assert executor.stats.requests_sent == 2
    executor.join(5)


def test_an_executor_never_sends_a_nan_capture_time(policy_type) -> None:
    """The observation is refused where it is built, inside `observe`: the error reaches the
    loop, and no request goes out."""
    frame = np.zeros((4, 4, 3), np.uint8)
    policy = policy_type()

    def observe() -> Observation:
        return Observation({"a": frame, "b": frame}, capture_times={"a": math.nan, "b": 0.0})

    executor = ChunkExecutor(policy, max_observation_age_s=0.1)
    with pytest.raises(
        InvalidObservationError, match=r"^capture_times\['a'\] must be a finite number"
    ):
        executor.tick(observe)
    assert executor.join(5) and policy.requests == []
    assert executor.stats.requests_sent == 0
