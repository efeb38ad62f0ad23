"""`RerunLog` on a real control loop against a real server, read back with Rerun's reader."""

from __future__ import annotations

import logging
import signal
import sys
import time

import numpy as np
import pytest

from rrd import free_port, read_rrd, saving_viewer, signal_viewer
from timing import LATE_S
from vla_client.cameras.scene import synthetic_frames
from vla_client.client import ActionClient, ActionResult
from vla_client.control import ChunkExecutor, ControlLoop, SafetyGate, SimRobot, Watchdog
from vla_client.observation import Observation

rr = pytest.importorskip("rerun")

from vla_client.viz import RerunLog, rerun_log  # noqa: E402

LATENCY = ("encode", "round_trip", "server_preprocess", "server_inference")


def test_a_control_loop_logs_every_entity_with_exact_values(server_url, tmp_path):
    path = tmp_path / "run.rrd"
    robot = SimRobot(7, 0.05, frames=lambda t: synthetic_frames(2, 48, 64, t=t), task="stack")
    applied: list[np.ndarray] = []
    replies: list[ActionResult] = []
    gate = SafetyGate(low=-0.01, high=0.01, on_bounds="clip")
    watchdog = Watchdog(5.0, "hold")

    def apply(action: np.ndarray) -> None:
        applied.append(action.copy())
        robot.apply(action)

    with ActionClient(server_url) as client, RerunLog(path, gate=gate, watchdog=watchdog) as log:

        def infer(observation: Observation) -> ActionResult:
            result = client.infer(observation)
            replies.append(result)
            return result

        executor = ChunkExecutor(log.infer(infer, fit=client.fit), prefetch_at=4)
        loop = ControlLoop(
            observe=robot.observe, executor=executor, apply_action=apply, rate_hz=20,
            gate=gate, watchdog=watchdog, log=log,
        )  # fmt: skip
        stats = loop.run(ticks=30)
        executor.close(5)
    assert log.dropped == 0 and log.failure is None
    rows = read_rrd(path)
    assert len(rows["/robot/state"]) == 30
    actions = rows["/robot/action"]
    assert len(actions) == stats.applied == len(applied) > 10
    for row, action in zip(actions, applied, strict=True):
        assert row["Scalars:scalars"] == action.astype(np.float64).tolist()
    assert np.ptp(np.asarray(applied)) > 0  # the actions differ: the check above tells them apart
    assert rows["static:/robot/action"][0]["SeriesLines:names"] == [f"joint {j}" for j in range(7)]
    sent = executor.stats.requests_sent
    assert len(rows["/camera/wrist"]) == len(rows["/camera/left"]) == sent
    plans = sorted((e for e in rows if e.startswith("/plan/")), key=lambda e: int(e.split("/")[2]))
    assert plans == [f"/plan/{n}" for n in range(len(replies))]
    for entity, reply in zip(plans, replies, strict=True):
        values = [row["Scalars:scalars"] for row in rows[entity]]
        assert values == reply.actions.astype(np.float64).tolist()
        times = [row["t"] for row in rows[entity]]
        assert np.allclose(np.diff(times), 0.05)  # a row per period, on the loop's clock
    for stage in LATENCY:
        assert len(rows[f"/latency/{stage}"]) == len(replies)
    round_trips = [row["Scalars:scalars"][0] for row in rows["/latency/round_trip"]]
    assert round_trips == [r.timings.round_trip_ms for r in replies]
    assert gate.clipped > 0
    texts = [row["TextLog:text"][0] for row in rows["/events"]]
    clips = [int(text.split()[3]) for text in texts if text.startswith("safety gate clipped")]
    assert sum(clips) == gate.clipped  # every clip, told on the tick it happened
    # the loop's clock: ticks 50 ms apart from the first
    ticks = [row["t"] for row in rows["/robot/state"]]
    assert ticks[0] >= 0 and 29 * 0.05 - 1e-6 <= ticks[-1] <= 29 * 0.05 + LATE_S


def run_loop(
    server_url: str, log: RerunLog, ticks: int = 12, **infer_options: object
) -> ControlLoop:
    robot = SimRobot(7, 0.05, frames=lambda t: synthetic_frames(1, 32, 32, t=t), task="stack")
    with ActionClient(server_url) as client:
        executor = ChunkExecutor(log.infer(client.infer, **infer_options), prefetch_at=4)  # type: ignore[arg-type]
        loop = ControlLoop(
            observe=robot.observe, executor=executor, apply_action=robot.apply, rate_hz=40, log=log
        )
        loop.run(ticks=ticks)
        executor.close(5)
    return loop


def test_a_failing_log_is_told_once_and_the_loop_goes_on(server_url, tmp_path, caplog):
    def broken_fit(observation: Observation) -> Observation:
        raise RuntimeError("no such camera")

    log = RerunLog(tmp_path / "run.rrd")
    with caplog.at_level(logging.WARNING, logger="vla_client.viz.rerun_log"):
        # The first item the logging thread writes fails, whether or not a reply comes soon
        # (on a busy machine none may come within the loop's 12 ticks).
        log.sent(0.0, Observation(synthetic_frames(1, 32, 32)), None, fit=broken_fit)
        loop = run_loop(server_url, log, fit=broken_fit)
        log.close()
    assert loop.stats.ticks == 12
    assert isinstance(log.failure, RuntimeError) and log.dropped >= 1 + 12  # it and each tick
    told = [r.getMessage() for r in caplog.records if "logging no more" in r.getMessage()]
    assert told == [f"Rerun log {tmp_path / 'run.rrd'} failed, logging no more: no such camera"]


def test_a_viewer_that_is_not_there_does_not_stop_the_loop(server_url):
    log = RerunLog("rerun+http://127.0.0.1:9/proxy")  # the discard port: nothing listens
    loop = run_loop(server_url, log)
    log.close(timeout=5)
    assert loop.stats.ticks == 12
    assert "unable to connect" in str(log.failure) and log.dropped > 0  # it was None and 0


def test_a_full_queue_drops_and_counts_instead_of_waiting(server_url, tmp_path):
    import threading

    release = threading.Event()

    def slow_fit(observation: Observation) -> Observation:
        release.wait(10)  # the logging thread is stuck here: the queue fills
        return observation

    log = RerunLog(tmp_path / "run.rrd", queue_size=2)
    # The logging thread is stuck from the first item on, whether or not a reply comes soon
    # (on a busy machine none may come within the loop's 20 ticks).
    log.sent(0.0, Observation(synthetic_frames(1, 32, 32)), None, fit=slow_fit)
    loop = run_loop(server_url, log, fit=slow_fit, ticks=20)
    assert log.dropped >= 20 - 2 and loop.stats.ticks == 20  # all but the queue's two
    release.set()
    log.close()
    assert log.failure is None


@pytest.mark.parametrize(
    ("target", "options", "reason"),
    [
        ("run.txt", {}, "a .rrd file; got 'run.txt'"),
        ("/no/such/dir/run.rrd", {}, "the folder /no/such/dir does not exist"),
        ("run.rrd", {"queue_size": 0}, "queue_size"),
        ("run.rrd", {"period_s": float("nan")}, "period_s"),
    ],
)
def test_options_are_checked(tmp_path, monkeypatch, target, options, reason):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ValueError, match=reason):
        RerunLog(target, **options)


def test_a_loop_refuses_a_log_that_is_not_one(server_url):
    with pytest.raises(ValueError, match="log must be a TickLog"):
        ControlLoop(
            observe=lambda: None, executor=ChunkExecutor(lambda o: None), apply_action=print,  # type: ignore[arg-type,return-value]
            rate_hz=10, log="run.rrd",  # type: ignore[arg-type]
        )  # fmt: skip


@pytest.fixture
def viewer(tmp_path, monkeypatch):
    """A real Rerun process listening where the log looks for a viewer, saving what it receives
    to ``received.rrd``."""
    port = free_port()
    monkeypatch.setattr(rerun_log, "VIEWER_PORT", port)
    received = tmp_path / "received.rrd"
    with saving_viewer(port, received) as process:
        yield process, received


def test_without_a_file_the_log_streams_to_the_viewer_listening(server_url, viewer):
    process, received = viewer
    log = RerunLog()
    loop = run_loop(server_url, log)
    log.close()
    time.sleep(1)  # the viewer writes what it was sent
    signal_viewer(process, signal.SIGINT)
    rows = read_rrd(received)
    assert len(rows["/robot/state"]) == loop.stats.ticks == 12
    assert len(rows["/robot/action"]) == loop.stats.applied


def test_a_viewer_that_dies_mid_run_does_not_stop_the_loop(server_url, viewer):
    process, _ = viewer
    log = RerunLog()
    robot = SimRobot(7, 0.05, frames=lambda t: synthetic_frames(1, 32, 32, t=t), task="stack")
    observed = []

    def observe() -> Observation:  # the viewer dies at the 5th tick, replies or not
        observed.append(1)
        if len(observed) == 5:
            signal_viewer(process, signal.SIGKILL)
        return robot.observe()

    with ActionClient(server_url) as client:
        executor = ChunkExecutor(log.infer(client.infer), prefetch_at=4)
        loop = ControlLoop(
            observe=observe, executor=executor, apply_action=robot.apply, rate_hz=40, log=log
        )
        stats = loop.run(ticks=30)
        executor.close(5)
        told_at_once = failure_told(log)
    started = time.monotonic()
    log.close(timeout=2)
    assert stats.ticks == 30 and robot.steps == stats.applied
    assert time.monotonic() - started < 30
    assert told_at_once and isinstance(log.failure, RuntimeError) and log.dropped > 0


def failure_told(log: RerunLog) -> bool:
    """Whether the log reports its failure before it is closed: a few more events are put (a
    failure shows at the flush after the next item) until `failure` is set, within 30 s."""
    deadline = time.monotonic() + 30
    while log.failure is None and time.monotonic() < deadline:
        log.event(0.0, "still running")
        time.sleep(rerun_log.FLUSH_EVERY_S / 2)
    return log.failure is not None and log.dropped > 0


FULL_DISK = """
import resource, signal, sys, time, json, logging
import numpy as np
from vla_client.observation import Observation
from vla_client.viz import RerunLog, rerun_log
told = []
class Told(logging.Handler):
    def emit(self, record):
        told.append(record.getMessage())
logging.getLogger("vla_client.viz.rerun_log").addHandler(Told())
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails with EFBIG
resource.setrlimit(resource.RLIMIT_FSIZE, (200_000, 200_000))  # the disk is full at 200 kB
log = RerunLog(sys.argv[1], period_s=0.05)
frames = np.random.default_rng(0).integers(0, 256, (40, 64, 64, 3), dtype=np.uint8)
deadline, sent = time.monotonic() + 30, 0
while log.failure is None and time.monotonic() < deadline:
    observation = Observation({"cam": frames[sent % 40]}, state=np.zeros(7))
    log.put_sent(sent * 0.05, observation, np.zeros((4, 7)), {"round_trip": 1.0})
    sent += 1
    time.sleep(0.01)
before_close = (repr(log.failure), log.dropped, list(told))
log.close(timeout=5)
print(json.dumps({"before_close": before_close, "sent": sent, "dropped": log.dropped}))
"""


def test_a_full_disk_is_told_when_it_fills_and_what_it_lost_is_counted(tmp_path):
    """A file size limit stands in for a full disk (writes past 200 kB fail, as with ENOSPC):
    `failure` is set and the warning told before `close`, once, and `dropped` counts what
    Rerun had not written."""
    import json
    import os
    import subprocess

    path = tmp_path / "run.rrd"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    run = subprocess.run(
        [sys.executable, "-c", FULL_DISK, str(path)], env=env, capture_output=True, text=True,
        timeout=120,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr
    report = json.loads(run.stdout)
    failure, dropped, told = report["before_close"]
    assert "File-writer thread shut down" in failure or "File too large" in failure
    assert dropped > 0 and 0 < report["dropped"] <= report["sent"]
    assert len(told) == 1 and told[0].startswith(f"Rerun log {path} failed, logging no more: ")
    assert path.stat().st_size <= 200_000


def test_with_no_display_and_no_viewer_the_log_is_refused_at_once(monkeypatch):
    monkeypatch.setattr(rerun_log, "VIEWER_PORT", free_port())
    monkeypatch.setattr(sys, "platform", "linux")
    monkeypatch.delenv("DISPLAY", raising=False)
    monkeypatch.delenv("WAYLAND_DISPLAY", raising=False)
    with pytest.raises(ValueError, match="no display to show a Rerun viewer on"):
        RerunLog()
