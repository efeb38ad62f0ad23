"""The control chain against real HTTP servers on 127.0.0.1 that answer what no good server would.

- A malformed reply (a `ProtocolError`: ragged or missing actions, an empty chunk, a body that
  is not an object) is one lost reply, not the end of the loop: the executor counts it, the
  robot keeps to its configured behaviour between chunks, and the next good reply is played.
- A server answering ``[16, 1]`` chunks to a gate built from metadata without `action_dim` but
  with 7-value limits: every action is refused, none reaches the robot (the gate once stretched
  ``[0.8]`` to ``[0.8] * 7`` and applied 59 of them).
- A server that refuses a request (a 400) and then serves: the watchdog holds the robot, the
  next tick asks again, the loop goes on (one 400 once ended it); refusals in a row end it, with
  the reason. A server announcing ``"supported": "false"`` for RTC is refused when the executor
  is built, not taken for one that does it.

Unit tests of the same paths on a fake clock are in test_chunk.py and below.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from vla_client.client import ActionClient
from vla_client.client.result import ActionResult, Timings
from vla_client.control import (
    ChunkExecutor,
    ControlLoop,
    SafetyGate,
    UnsafeActionError,
    Watchdog,
)
from vla_client.errors import ProtocolError, RefusalsError, ServerError
from vla_client.observation import Observation
from vla_client.protocol import GENERATIONS_PATH, METADATA_PATH
from vla_client.server import LocalServer

pytestmark = pytest.mark.timeout(30)

Reply = Callable[[int, Any], Any]
"""Given the request number (from 0) and its request id, the JSON body to answer with (or a
whole response: a refusal, say)."""


def serve(reply: Reply, metadata: dict[str, Any] | None = None) -> LocalServer:
    """A Starlette app on 127.0.0.1 answering generations as `reply` says."""
    requests: list[Any] = []

    async def generations(request: Request) -> JSONResponse:
        body = await request.json()
        requests.append(body.get("request_id"))
        answer = reply(len(requests) - 1, body.get("request_id"))
        return answer if isinstance(answer, JSONResponse) else JSONResponse(answer)

    async def describe(request: Request) -> JSONResponse:
        return JSONResponse({"object": "action.metadata", "model": "broken", **(metadata or {})})

    routes = [
        Route(GENERATIONS_PATH, generations, methods=["POST"]),
        Route(METADATA_PATH, describe, methods=["GET"]),
    ]
    return LocalServer(Starlette(routes=routes))  # type: ignore[arg-type]


def chunk(value: float, horizon: int = 4, dim: int = 2) -> list[list[float]]:
    return np.full((horizon, dim), value, np.float32).tolist()


MALFORMED: dict[str, Callable[[Any], Any]] = {
    "ragged actions": lambda rid: {"request_id": rid, "actions": [[0.5, 0.5], [0.5]]},
    "no actions": lambda rid: {"request_id": rid},
    "empty chunk": lambda rid: {"request_id": rid, "actions": [[]]},
    "strings": lambda rid: {"request_id": rid, "actions": [["a", "b"]] * 4},
    "not an object": lambda rid: [1, 2, 3],
    "ragged envelope": lambda rid: {
        "id": rid,
        "object": "action.generation",
        "data": [
            {"index": 0, "action": {"values": chunk(0.5)}},
            {"index": 1, "action": {"values": chunk(0.5, dim=3)}},
        ],
    },
}


def run_on(
    server: LocalServer, **options: Any
) -> tuple[ChunkExecutor, list[tuple[np.ndarray, bool]]]:
    """A 50 Hz loop with a holding watchdog against `server`, until 2 chunks came (a good
    reply after the bad ones): the executor, and each applied action with whether it came from
    a chunk (False: the watchdog held it)."""
    applied: list[tuple[np.ndarray, bool]] = []
    with ActionClient(server.url, check_contract=False, wire="json") as client:
        executor = ChunkExecutor(client.infer, **options)

        def apply_action(action: np.ndarray) -> None:
            applied.append((action, executor.source is not None))
            if executor.stats.chunks_received >= 2:
                loop.stop()

        loop = ControlLoop(
            observe=lambda: Observation({"wrist": np.zeros((4, 4, 3), np.uint8)}),
            executor=executor,
            apply_action=apply_action,
            rate_hz=50,
            watchdog=Watchdog(5.0, "hold"),
        )
        try:
            loop.run(ticks=500)  # 10 s at most
        finally:
            executor.close(5)
    return executor, applied


@pytest.mark.parametrize("malformed", list(MALFORMED))
def test_malformed_replies_from_a_real_server_do_not_end_the_loop(malformed: str) -> None:
    """Replies 1-3 are malformed, the others good chunks whose values say which reply they are."""

    def reply(number: int, request_id: Any) -> Any:
        if 1 <= number <= 3:
            return MALFORMED[malformed](request_id)
        return {"request_id": request_id, "actions": chunk(float(number))}

    with serve(reply) as server:
        executor, applied = run_on(server)
    assert executor.stats.malformed_replies == 3 and executor.stats.errors == 0
    assert executor.stats.chunks_received == 2
    assert isinstance(executor.last_error, ProtocolError)
    # The robot got the first chunk, held its last action through the bad replies, then the
    # chunk of reply 4: never anything from a malformed one.
    values = [float(a[0]) for a, _ in applied]
    assert values == sorted(values) and set(values) == {0.0, 4.0}
    assert all(a.shape == (2,) for a, _ in applied)


@pytest.mark.parametrize("validate", [False, True], ids=["gate on actions", "gate on chunks"])
@pytest.mark.parametrize("on_bounds", ["clip", "reject"])
def test_one_value_chunks_never_reach_a_seven_joint_robot(
    validate: bool, on_bounds: str, observe_untimed: Callable[[], Observation]
) -> None:
    def reply(number: int, request_id: Any) -> Any:
        return {"request_id": request_id, "actions": chunk(0.8, horizon=16, dim=1)}

    limits = np.ones(7, np.float32)
    with (
        serve(reply, metadata={"output": {"action_horizon": 16}}) as server,
        ActionClient(server.url, check_contract=False, wire="json") as client,
    ):
        gate = SafetyGate.from_metadata(
            client.metadata(),
            low=-limits,
            high=limits,
            on_bounds=on_bounds,  # type: ignore[arg-type]
        )
        assert (gate.horizon, gate.action_dim) == (16, 7)
        executor = ChunkExecutor(client.infer, validate=gate.check_chunk if validate else None)
        applied: list[np.ndarray] = []
        loop = ControlLoop(
            observe=observe_untimed,
            executor=executor,
            apply_action=applied.append,
            rate_hz=50,
            gate=gate,
        )
        try:
            with pytest.raises(UnsafeActionError) as caught:
                loop.run(ticks=250)  # 5 s at most
        finally:
            executor.close(5)
    kind, shape = (
        ("chunk", "[16, 1], expected [16, 7]") if validate else ("action", "[1], expected [7]")
    )
    assert str(caught.value) == f"{kind} shape {shape} (action dim from the length of low)"
    assert applied == [] and gate.rejected == 1 and gate.clipped == 0


def scripted(*outcomes: np.ndarray | Exception) -> Callable[[Observation], ActionResult]:
    """An `infer` giving `outcomes` in turn (the last one again once they run out)."""
    calls: list[int] = []

    def infer(observation: Observation) -> ActionResult:
        calls.append(1)
        outcome = outcomes[min(len(calls), len(outcomes)) - 1]
        if isinstance(outcome, Exception):
            raise outcome
        return ActionResult(outcome, f"req-{len(calls)}", Timings(1.0, 1.0, 1.0, 1, 1), raw={})

    return infer


def fake_time_loop(clock, executor, observe, applied, watchdog) -> ControlLoop:
    """10 Hz on the fake clock; each sleep first waits for the inference in flight, so every
    reply is taken on the tick after it was asked for."""

    def sleep(seconds: float) -> None:
        assert executor.join(5)
        clock.advance(seconds)

    return ControlLoop(observe=observe, executor=executor, apply_action=applied.append,
                       rate_hz=10, watchdog=watchdog, sleep=sleep)  # fmt: skip


ROWS = np.repeat(np.float32([[10.0], [11.0], [12.0]]), 2, axis=1)


@pytest.mark.parametrize(
    ("behaviour", "options", "tripped"),
    [("hold", {}, 12.0), ("finish_chunk", {}, 12.0), ("zero", {}, 0.0),
     ("stop", {"stop_action": [-1.0, -1.0]}, -1.0)],
)  # fmt: skip
def test_after_a_malformed_reply_the_robot_keeps_to_the_watchdogs_behaviour(
    clock, observe, behaviour, options, tripped
) -> None:
    executor = ChunkExecutor(
        scripted(ROWS, ProtocolError("ragged envelope")), clock=clock, monotonic=clock
    )
    applied: list[np.ndarray] = []
    watchdog = Watchdog(0.25, behaviour, **options)
    loop = fake_time_loop(clock, executor, observe, applied, watchdog)
    stats = loop.run(ticks=8)
    # Tick 0 asks; ticks 1-2 play rows 1-2; from tick 3 every reply is malformed: tick 3 holds
    # (0.2 s of silence), and from tick 4 (0.3 s) the watchdog's behaviour applies.
    assert [float(a[0]) for a in applied] == [11.0, 12.0, 12.0] + [tripped] * 4
    assert (stats.ticks, stats.applied, stats.idle) == (8, 7, 1)
    assert executor.stats.malformed_replies == 4 and watchdog.trips == 1
    assert str(executor.last_error) == "ragged envelope"


def test_a_good_reply_after_malformed_ones_is_played(clock, observe) -> None:
    later = ROWS + 10
    infer = scripted(ROWS, ProtocolError("bad"), ProtocolError("bad"), later)
    executor = ChunkExecutor(infer, clock=clock, monotonic=clock)
    applied: list[np.ndarray] = []
    watchdog = Watchdog(0.25, "hold")
    fake_time_loop(clock, executor, observe, applied, watchdog).run(ticks=8)
    assert [float(a[0]) for a in applied] == [11.0, 12.0, 12.0, 12.0, 12.0, 21.0, 22.0]
    assert executor.stats.malformed_replies == 2 and executor.stats.chunks_received == 2
    assert watchdog.trips == 1 and not watchdog.tripped


def test_a_chunk_of_another_action_dim_is_a_malformed_reply(clock, observe) -> None:
    wider = np.zeros((3, 3), np.float32)
    executor = ChunkExecutor(scripted(ROWS, wider), clock=clock, monotonic=clock)
    applied: list[np.ndarray] = []
    fake_time_loop(clock, executor, observe, applied, Watchdog(5.0)).run(ticks=6)
    assert all(a.tolist() == [12.0, 12.0] for a in applied[1:]) and len(applied) == 5
    assert str(executor.last_error) == "action dim changed from 2 to 3"
    assert executor.stats.malformed_replies >= 1 and executor.stats.chunks_received == 1


def refusing(refused: range) -> Reply:
    """Chunks of 4 rows whose value is the request's number, except a 400 for those in
    `refused`."""

    def reply(number: int, request_id: Any) -> Any:
        if number in refused:
            return JSONResponse({"detail": f"request {number}: not now"}, status_code=400)
        return {"request_id": request_id, "actions": chunk(float(number))}

    return reply


@pytest.mark.parametrize("refused", [range(1, 2), range(1, 3)], ids=["one", "two in a row"])
def test_a_refused_request_is_asked_again_while_the_watchdog_holds(refused: range) -> None:
    """Before, the first 400 raised from `run()`: the robot was no longer commanded."""
    with serve(refusing(refused)) as server:
        executor, applied = run_on(server)
    assert executor.stats.refused == len(refused) and executor.stats.chunks_received == 2
    # Chunk 0, then the watchdog repeating its last row while the refused requests are asked
    # again (a tick to ask, and one for each refusal), then the chunk of the request served.
    values = [float(a[0]) for a, _ in applied]
    assert values == sorted(values) and set(values) == {0.0, float(refused.stop)}
    held = [float(a[0]) for a, fresh in applied if not fresh]
    assert len(held) >= len(refused) + 1 and set(held) == {0.0}


def test_refusals_in_a_row_end_the_loop_with_the_reason() -> None:
    with serve(refusing(range(1, 100))) as server, pytest.raises(RefusalsError) as caught:
        run_on(server, max_refusals=4)
    assert str(caught.value) == (
        "the server refused 4 requests in a row; the last: server answered 400: request 4: not now"
    )
    assert isinstance(caught.value, ServerError) and caught.value.status_code == 400


def test_rtc_announced_as_a_string_is_refused_when_the_executor_is_built() -> None:
    """``"supported": "false"`` once announced RTC: the refusal came with the first reply."""
    metadata = {"output": {"action_horizon": 4}, "capabilities": {"rtc": {"supported": "false"}}}
    with (
        serve(refusing(range(0)), metadata=metadata) as server,
        ActionClient(server.url, check_contract=False, wire="json") as client,
    ):
        server_metadata = client.metadata()
        with pytest.raises(ProtocolError) as caught:
            ChunkExecutor(client.infer, mode="rtc", server=server_metadata)
    assert str(caught.value) == (
        "the server's capabilities.rtc.supported must be true or false, got 'false'"
    )
