"""The whole control chain against a real `vla-client serve` process, over websocket and HTTP.

ControlLoop + ChunkExecutor + SafetyGate + Watchdog + ActionClient drive a `SimRobot` at 20 Hz
from the reference policy, whose chunk is a deterministic function of the observation. The test
records the tick on which each observation was taken and, for every executed action, the request
and chunk row it came from (`ChunkExecutor.source`), then recomputes what that row must be. An
action from the wrong chunk, at the wrong aligned index, from a reply computed for another
observation, or replayed out of order fails the check.

The server runs with ``--in-process`` (policy in a thread, no worker process): a SIGKILLed
worker would leave its shared memory behind, and the worker path has its own restart tests in
tests/server. uvicorn, the wire formats and both endpoints are the real ones.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest

from oracles import oracle_actions
from vla_client.cameras.scene import SyntheticScene
from vla_client.client import ActionClient
from vla_client.client.result import ActionResult
from vla_client.control import (
    ActionSource,
    ChunkExecutor,
    ControlLoop,
    SafetyGate,
    SimRobot,
    Watchdog,
)
from vla_client.observation import Observation
from vla_client.server.policy import PolicyInput
from vla_client.tasks.reach import ReachTask
from vla_client.transports import Backoff, WebSocketTransport

SRC = str(Path(__file__).resolve().parents[2] / "src")
RATE_HZ = 20.0
HORIZON, ACTION_DIM = 8, 4
TASK = "push the block"
TIMEOUT_S = 3.0
"""Client timeout: longer than the freeze below, so the request sent into it stays in flight."""
WATCHDOG_S = 0.4

pytestmark = pytest.mark.timeout(25)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


REFERENCE = ("--action-horizon", str(HORIZON), "--action-dim", str(ACTION_DIM))
"""The reference policy these tests recompute the chunks of."""


class ServeProcess:
    """``vla-client serve --in-process`` on a fixed port, startable again after a kill; `args`
    choose the policy (the reference policy's shape by default)."""

    def __init__(self, port: int, args: tuple[str, ...] = REFERENCE) -> None:
        self.port = port
        self.args = args
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> ServeProcess:
        env = {**os.environ, "PYTHONPATH": SRC + os.pathsep + os.environ.get("PYTHONPATH", "")}
        self.process = subprocess.Popen(
            [sys.executable, "-m", "vla_client.cli", "serve", "--port", str(self.port),
             "--in-process", *self.args],
            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        wait_for(self._healthy, 15, "server never became healthy")
        return self

    def signal(self, signum: signal.Signals) -> None:
        assert self.process is not None
        self.process.send_signal(signum)

    def kill(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
            self.process.wait(10)

    def _healthy(self) -> bool:
        assert self.process is not None and self.process.poll() is None, "server exited"
        try:
            return httpx.get(f"http://127.0.0.1:{self.port}/health", timeout=0.5).is_success
        except httpx.HTTPError:
            return False


def wait_for(condition: Callable[[], bool], seconds: float, what: str) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, what
        time.sleep(0.01)


def make_client(kind: str, port: int) -> ActionClient:
    """PNG frames, lossless, so the test recomputes exactly the chunk the server computed."""
    if kind == "http":
        return ActionClient(f"http://127.0.0.1:{port}", encoding="png", timeout_s=TIMEOUT_S)
    url = f"ws://127.0.0.1:{port}/v1/actions/realtime"
    transport = WebSocketTransport(
        url, timeout_s=TIMEOUT_S, connect_timeout_s=1.0, backoff=Backoff(initial_s=0.05, max_s=0.3)
    )
    return ActionClient(url, transport=transport, encoding="png")


@dataclass
class Sent:
    """One request: its number, the tick its observation was taken on, and how it ended."""

    number: int
    tick: int
    observation: Observation
    sent_at: float
    ok: bool | None = None
    """None while in flight."""


@dataclass(frozen=True)
class Executed:
    """One action the robot got: on which tick, from where, and whether the watchdog held it."""

    tick: int
    source: ActionSource | None
    held: bool
    action: np.ndarray


class Chain:
    """The control chain under test, recording what it sent and what the robot executed."""

    def __init__(self, client: ActionClient) -> None:
        self.client = client
        scenes = [SyntheticScene(32, 32, seed=seed) for seed in (1, 2)]
        self.robot = SimRobot(
            ACTION_DIM,
            1 / RATE_HZ,
            frames=lambda t: {f"cam{i}": scene.render(t) for i, scene in enumerate(scenes)},
            task=TASK,
        )
        # The reference policy's actions lie in [-1, 1]; anything outside would end the loop.
        self.gate = SafetyGate.from_metadata(client.metadata(), low=-1.0, high=1.0)
        self.executor = ChunkExecutor(
            self.infer,
            prefetch_at=HORIZON // 2,
            max_observation_age_s=2 / RATE_HZ,
            reply_deadline_s=HORIZON / RATE_HZ,
            validate=self.gate.check_chunk,
        )
        self.watchdog = Watchdog(WATCHDOG_S, "hold")
        self.loop = ControlLoop(
            observe=self.observe,
            executor=self.executor,
            apply_action=self.apply,
            rate_hz=RATE_HZ,
            gate=self.gate,
            watchdog=self.watchdog,
        )
        self.sent: dict[str, Sent] = {}
        self.executed: list[Executed] = []
        self.error: BaseException | None = None
        self._observed: tuple[int, Observation] | None = None
        self._thread = threading.Thread(target=self._run, daemon=True)

    @property
    def tick(self) -> int:
        """The tick being run (the loop counts it before calling observe and apply)."""
        return self.loop.stats.ticks - 1

    def observe(self) -> Observation:
        observation = self.robot.observe()
        self._observed = (self.tick, observation)
        return observation

    def infer(self, observation: Observation) -> ActionResult:
        # One request in flight at a time: the observation is the one just observed.
        assert self._observed is not None and self._observed[1] is observation
        request_id = f"r{len(self.sent) + 1}"
        sent = Sent(len(self.sent) + 1, self._observed[0], observation, time.monotonic())
        self.sent[request_id] = sent
        try:
            result = self.client.infer(observation, request_id=request_id)
        except Exception:
            sent.ok = False
            raise
        sent.ok = True
        return result

    def apply(self, action: np.ndarray) -> None:
        source = self.executor.source
        held = source is None or self.watchdog.tripped
        self.executed.append(Executed(self.tick, source, held, action.copy()))
        self.robot.apply(action)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self.loop.stop()
        if self._thread.ident is not None:
            self._thread.join(5)
        self.executor.close(TIMEOUT_S + 1)
        self.client.close()

    def _run(self) -> None:
        try:
            self.loop.run()
        except BaseException as exc:  # handed to the test thread
            self.error = exc


def expected_chunk(observation: Observation) -> np.ndarray:
    policy_input = PolicyInput(
        images=dict(observation.images), state=observation.state, task=observation.task
    )
    return oracle_actions(policy_input, horizon=HORIZON, action_dim=ACTION_DIM)


def check_executed(chain: Chain) -> list[int]:
    """Every executed action is the aligned row of a received chunk, or the watchdog repeating
    the previous one; chunks play in request order, each row at most once. Returns the request
    numbers executed, in order."""
    previous: np.ndarray | None = None
    last = (0, -1)
    played: list[int] = []
    for executed in chain.executed:
        if executed.held:
            assert previous is not None and np.array_equal(executed.action, previous)
        else:
            assert executed.source is not None and executed.source.request_id is not None
            sent = chain.sent[executed.source.request_id]
            assert sent.ok, f"action from failed request {executed.source.request_id}"
            # Row r is for the r-th tick after the observation: the aligned index.
            assert executed.source.row == executed.tick - sent.tick
            row = expected_chunk(sent.observation)[executed.source.row]
            np.testing.assert_allclose(executed.action, row, rtol=1e-5, atol=1e-6)
            assert (sent.number, executed.source.row) > last, "chunk replayed or out of order"
            last = (sent.number, executed.source.row)
            if not played or played[-1] != sent.number:
                played.append(sent.number)
        previous = executed.action
    return played


@pytest.fixture(scope="module")
def shared_port() -> Iterator[int]:
    server = ServeProcess(free_port()).start()
    try:
        yield server.port
    finally:
        server.kill()


@pytest.mark.parametrize("kind", ["websocket", "http"])
def test_every_executed_action_is_the_aligned_row_of_its_chunk(kind: str, shared_port: int) -> None:
    chain = Chain(make_client(kind, shared_port))
    try:
        stats = chain.loop.run(ticks=int(2 * RATE_HZ))
    finally:
        chain.stop()
    played = check_executed(chain)
    assert len(played) >= 4, f"only chunks {played} executed"
    assert stats.applied == len(chain.executed) >= stats.ticks // 2
    assert chain.gate.rejected == 0
    assert chain.executor.stats.chunks_received >= len(played)
    assert chain.executor.stats.errors == 0


@pytest.mark.parametrize("kind", ["websocket", "http"])
def test_loop_rides_out_a_server_kill_and_never_executes_a_stale_chunk(kind: str) -> None:
    server = ServeProcess(free_port()).start()
    chain = Chain(make_client(kind, server.port))
    try:
        chain.start()
        wait_for(lambda: chain.executor.stats.chunks_received >= 3, 10, "no chunks at first")
        # Freeze the server first, so a request is certainly in flight when it dies.
        server.signal(signal.SIGSTOP)
        frozen_at = time.monotonic()
        wait_for(
            lambda: any(s.sent_at > frozen_at for s in chain.sent.values()), 5, "no request sent"
        )
        wait_for(lambda: chain.watchdog.tripped, 5, "watchdog never tripped")
        in_flight = {rid for rid, sent in chain.sent.items() if sent.ok is None}
        server.kill()
        killed_at, killed_tick = time.monotonic(), chain.tick
        wait_for(lambda: all(chain.sent[rid].ok is not None for rid in in_flight), 5, "hung")
        time.sleep(0.3)  # down for a while: requests fail fast, the watchdog holds
        server.start()
        chunks_before = chain.executor.stats.chunks_received
        wait_for(
            lambda: chain.executor.stats.chunks_received >= chunks_before + 3, 10, "no recovery"
        )
    finally:
        chain.stop()
        server.kill()

    assert chain.error is None, f"the loop ended: {chain.error!r}"
    assert in_flight, "no request was in flight when the server died"
    assert all(chain.sent[rid].ok is False for rid in in_flight)
    check_executed(chain)
    sources = {e.source.request_id for e in chain.executed if e.source and not e.held}
    assert not sources & in_flight
    after_kill = [e for e in chain.executed if e.tick > killed_tick]
    assert any(e.held for e in after_kill), "the watchdog did not hold during the outage"
    fresh = [e for e in after_kill if not e.held]
    assert fresh, "nothing executed after the restart"
    for executed in fresh:
        assert executed.source is not None and executed.source.request_id is not None
        assert chain.sent[executed.source.request_id].sent_at > killed_at
    assert chain.watchdog.trips >= 1
    assert chain.executor.stats.errors >= 1
    if isinstance(chain.client.transport, WebSocketTransport):
        assert chain.client.transport.stats.connects >= 2


STALL_S = 0.7
"""Longer than a 16-row chunk at 50 Hz (0.32 s): a reply in flight is all past when it lands."""


@pytest.mark.timeout(60)
def test_an_rtc_loop_rides_out_a_stall_longer_than_its_chunk() -> None:
    """``serve --policy reach-flow`` (16-row chunks) and a 50 Hz ``rtc`` loop whose
    `apply_action` stalls 0.7 s once while a request is in flight. Before, the reply, dropped as
    late, taught a delay of some 36 ticks; a later request carried it with an 8-row prefix, the
    server rightly answered 400 and `run()` raised: the robot was no longer commanded. Now
    every request's d is at most its prefix and its prefix at most the chunk, the server refuses
    nothing, and the loop goes on commanding from chunks asked for after the stall."""
    server = ServeProcess(free_port(), ("--policy", "reach-flow")).start()
    world = ReachTask()
    world.reset(3)
    sent: list[dict[str, Any] | None] = []
    stall: list[int] = []
    """The tick the stall came on, and the chunks received by then."""
    applied: list[tuple[int, str | None]] = []
    try:
        with ActionClient(f"http://127.0.0.1:{server.port}", timeout_s=TIMEOUT_S) as client:

            def infer(observation: Observation, *, rtc: dict[str, Any] | None = None) -> Any:
                sent.append(rtc)
                return client.infer(observation, **({} if rtc is None else {"rtc": rtc}))

            def observe() -> Observation:
                return Observation(world.frames(), state=world.state(), task="reach")

            def apply(action: np.ndarray) -> None:
                source = executor.source
                applied.append((loop.stats.ticks, None if source is None else source.request_id))
                world.step(action)
                received = executor.stats.chunks_received
                if not stall and received >= 3 and executor.in_flight:
                    stall.extend([loop.stats.ticks, received])
                    time.sleep(STALL_S)
                elif stall and received >= stall[1] + 4:
                    loop.stop()

            metadata = client.metadata()
            assert metadata.output.action_horizon == 16
            executor = ChunkExecutor(infer, mode="rtc", server=metadata)
            loop = ControlLoop(
                observe=observe,
                executor=executor,
                apply_action=apply,
                rate_hz=50,
                watchdog=Watchdog(0.5, "hold"),
            )
            try:
                stats = loop.run(ticks=1000)  # 20 s at most; it stops 4 chunks after the stall
            finally:
                executor.close(TIMEOUT_S + 1)
    finally:
        server.kill()
    assert stall, "the loop never stalled"
    assert stats.skipped >= 30 and executor.stats.dropped_late >= 1
    prefixes = [rtc for rtc in sent if rtc is not None]
    assert prefixes, "no request continued a chunk"
    for rtc in prefixes:
        rows = len(rtc["prefix_actions"])
        assert 0 <= rtc["inference_delay_steps"] <= rows <= 16, rtc["inference_delay_steps"]
    assert executor.stats.refused == 0 and executor.stats.errors == 0
    assert executor.last_error is None
    before = {rid for tick, rid in applied if tick <= stall[0]}
    after = [rid for tick, rid in applied if tick > stall[0] and rid is not None]
    assert len(set(after) - before) >= 3, "no fresh chunks commanded after the stall"
