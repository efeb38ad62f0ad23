"""Network delay: slept in the transport in real time, charged on the clock in simulated time."""

from __future__ import annotations

import threading

import numpy as np
import pytest

from vla_client.client import ActionClient
from vla_client.client.result import ActionResult, Timings
from vla_client.observation import Observation
from vla_client.sim.network import (
    DelayedStream,
    DelayedTransport,
    NetworkDelay,
    SimulatedTime,
    delayed,
)
from vla_client.tasks.reach import ReachTask
from vla_client.transports.http import HTTPTransport
from vla_client.transports.websocket import WebSocketTransport


def reach_observation() -> Observation:
    task = ReachTask()
    return Observation(task.frames(), state=task.state(), task=task.task)


def round_trip_ms(client: ActionClient, observation: Observation) -> float:
    client.infer(observation)  # connection and contract out of the way
    return min(client.infer(observation).timings.round_trip_ms for _ in range(2))


def test_the_injected_delay_is_in_every_round_trip_both_ways(reach_url: str) -> None:
    one_way = NetworkDelay(0.06)
    transport = delayed(HTTPTransport(reach_url), one_way.sampler(0))
    assert isinstance(transport, DelayedTransport) and not isinstance(transport, DelayedStream)
    with ActionClient(reach_url, transport=transport) as slow:
        measured = round_trip_ms(slow, reach_observation())
    assert measured >= 120.0  # 60 ms out and 60 ms back, as the client measures it


def test_each_exchange_waits_once_before_sending_and_once_after_the_reply(reach_url: str) -> None:
    events: list[str] = []

    class Recording(HTTPTransport):
        def exchange(self, *args, **kwargs):  # type: ignore[no-untyped-def]
            events.append("exchange")
            return super().exchange(*args, **kwargs)

    transport = DelayedTransport(
        Recording(reach_url), lambda: 0.02, sleep=lambda s: events.append(f"sleep {s}")
    )
    with ActionClient(reach_url, transport=transport) as client:
        client.infer(reach_observation())
    # the metadata read first (delayed both ways too), then the request
    assert events == ["sleep 0.02", "sleep 0.02", "sleep 0.02", "exchange", "sleep 0.02"]


def test_a_websocket_stays_a_stream_behind_the_delay(reach_url: str) -> None:
    ws_url = reach_url.replace("http://", "ws://")
    transport = delayed(WebSocketTransport(ws_url), NetworkDelay(0.03).sampler(0))
    assert isinstance(transport, DelayedStream)
    with ActionClient(ws_url, transport=transport) as client:
        assert client.options.wire == "msgpack"
        assert round_trip_ms(client, reach_observation()) >= 60.0


def test_jitter_is_reproducible_bounded_and_never_negative() -> None:
    delay = NetworkDelay(0.01, 0.02)
    first, second = delay.sampler(5), delay.sampler(5)
    draws = [first() for _ in range(200)]
    assert draws == [second() for _ in range(200)]
    assert min(draws) == 0.0 and max(draws) <= 0.03
    assert len(set(draws)) > 100
    assert NetworkDelay(0.05).sampler(0)() == 0.05


@pytest.mark.parametrize(
    ("delay", "jitter", "message"),
    [
        (-0.01, 0.0, "delay_s must be in 0..10 s"),
        (11.0, 0.0, "delay_s must be in 0..10 s"),
        (0.0, float("nan"), "jitter_s must be a finite number"),
        (float("inf"), 0.0, "delay_s must be a finite number"),
    ],
)
def test_negative_or_absurd_delays_are_refused(delay: float, jitter: float, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        NetworkDelay(delay, jitter)


def instant(observation: Observation) -> ActionResult:
    return ActionResult(np.zeros((4, 2), np.float32), "r", Timings(0, 0, 0, 0, 0), {})


def test_simulated_time_hands_a_reply_over_on_the_first_tick_it_is_due() -> None:
    # 30 ms round trip + 2 x 50 ms: due 130 ms after sending, so on the second 100 ms tick
    simulated = SimulatedTime(0.03, NetworkDelay(0.05).sampler(0))
    link = simulated.link(instant)
    got: list[ActionResult] = []
    frame = {"cam": np.zeros((4, 4, 3), np.uint8)}
    sent = threading.Thread(
        target=lambda: got.append(link(Observation(frame, capture_times={"cam": 0.0})))
    )
    sent.start()
    assert simulated.advance(0.1, in_flight=True) is False
    assert simulated.clock() == pytest.approx(0.1)
    assert not got
    assert simulated.advance(0.1, in_flight=True) is True
    sent.join(5)
    assert got and simulated.clock() == pytest.approx(0.2)


def test_simulated_time_never_sleeps_the_delay_and_ends_cleanly() -> None:
    simulated = SimulatedTime(0.0, NetworkDelay(5.0).sampler(0))
    link = simulated.link(instant)
    done = threading.Event()

    def send() -> None:
        link(Observation({"cam": np.zeros((4, 4, 3), np.uint8)}, capture_times={"cam": 0.0}))
        done.set()

    threading.Thread(target=send).start()
    assert simulated.advance(0.1, in_flight=True) is False  # due at 10 s of simulated time
    simulated.end()  # the episode is over: nothing waits on
    assert done.wait(2)  # well before the 10 s the reply would have taken
    with pytest.raises(ValueError, match="round_trip_s"):
        SimulatedTime(float("nan"), NetworkDelay().sampler(0))
