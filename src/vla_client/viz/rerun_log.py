"""Log a robot run to Rerun, live to a viewer or to an ``.rrd`` file, off the control thread.

What is logged, on one timeline, ``loop_time`` (seconds on the loop's own clock since the log
started), under these entities:

- ``camera/NAME``: each camera frame as sent to the server (after the fit: renamed and resized,
  when `infer` is given the client's `ActionClient.fit`);
- ``robot/state`` and ``robot/action``: the state and the applied action, one series per joint
  (``joint 0``, ``joint 1``, ...), each tick;
- ``plan/N``: the N-th chunk received (from 0), every joint, at the times its rows were planned
  for (row r at the observation's time + r periods): consecutive plans overlap, so a seam shows
  as a jump from one plan's line to the next;
- ``latency/encode``, ``latency/round_trip``, ``latency/server_preprocess``,
  ``latency/server_inference`` (ms), per reply;
- ``events``: the safety gate's clips and rejections and the watchdog's trips and recoveries.

Logging never slows or fails the loop. The control thread only puts what it saw on a bounded
queue; a background thread turns it into Rerun calls. When the queue is full (the viewer or the
disk is slower than the loop) an item is dropped and counted in `dropped`. Rerun writes and
sends on threads of its own, and says that its sink failed (a disk that filled up, a viewer
that went away) only when asked to flush; so the logging thread flushes every `FLUSH_EVERY_S`,
and the first failure, of a flush or of a Rerun call, is logged once as a warning and kept in
`failure` when it happens, not at `close`. The items handed to Rerun since its last good flush,
and every item after, count in `dropped`. ``rerun`` is imported when a `RerunLog` is made (``pip
install 'vla-client[rerun]'``).
"""

from __future__ import annotations

import logging
import os
import queue
import socket
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any

import numpy as np

from vla_client.client.result import ActionResult
from vla_client.control.safety import SafetyGate
from vla_client.control.types import Action, InferFn
from vla_client.control.watchdog import Watchdog
from vla_client.observation import Observation
from vla_client.validation import check_at_least, check_positive

log = logging.getLogger(__name__)

TIMELINE = "loop_time"
QUEUE_SIZE = 256
"""Items waiting for the logging thread at most: seconds of a loop at 50 Hz."""
STAGES: tuple[tuple[str, Callable[[ActionResult], float | None]], ...] = (
    ("encode", lambda r: r.timings.encode_ms),
    ("round_trip", lambda r: r.timings.round_trip_ms),
    ("server_preprocess", lambda r: r.timings.server.get("preprocess_ms")),
    ("server_inference", lambda r: r.timings.server.get("inference_ms")),
)
"""The latency series, in ms, and where each reply says it (a server may leave some out)."""
FLUSH_EVERY_S = 0.5
"""How often the logging thread asks Rerun to hand what it has to its sink: a failed sink shows
this long after it fails, or when the next item comes."""
FLUSH_TIMEOUT_S = 5.0
"""How long such a flush may take before the sink counts as failed."""
_URL_SCHEMES = ("rerun://", "rerun+http://", "rerun+https://")


@dataclass(frozen=True)
class _Scope:
    """Where an item goes, fixed when it is put: its entity prefix, the clock time that is 0 on
    the timeline, and the period a chunk's rows are apart (None: plans are not drawn)."""

    prefix: str
    origin: float | None
    period_s: float | None


@dataclass(frozen=True)
class _Tick:
    t: float
    state: np.ndarray | None
    action: Action | None


@dataclass(frozen=True)
class _Sent:
    t: float
    """When the observation was sent; row 0 of its chunk is planned for this time."""
    observation: Observation
    fit: Callable[[Observation], Observation] | None
    replied_at: float
    actions: np.ndarray | None
    """The chunk received, None when the request failed."""
    latencies_ms: dict[str, float]


@dataclass(frozen=True)
class _Event:
    t: float
    text: str
    level: str


_Item = _Tick | _Sent | _Event


def layout(prefix: str, cameras: list[str]) -> Any:
    """The viewer's layout, for the run under `prefix` (the first, where there are several):
    the cameras side by side; below, every plan with the applied action in one plot (a seam is
    a jump from one plan to the next), the state, the latencies and the events."""
    import rerun.blueprint as rrb

    root = f"/{prefix}"
    return rrb.Blueprint(
        rrb.Vertical(
            rrb.Horizontal(
                *(rrb.Spatial2DView(name=name, origin=f"{root}camera/{name}") for name in cameras)
            ),
            rrb.Horizontal(
                rrb.TimeSeriesView(
                    name="plans and applied action",
                    contents=[f"+ {root}plan/**", f"+ {root}robot/action"],
                ),
                rrb.TimeSeriesView(name="state", contents=f"+ {root}robot/state"),
            ),
            rrb.Horizontal(
                rrb.TimeSeriesView(name="latency (ms)", contents=f"+ {root}latency/**"),
                rrb.TextLogView(name="events", contents=f"+ {root}events"),
            ),
            row_shares=[2, 2, 1],
        ),
        collapse_panels=True,
    )


class RerunLog:
    """A Rerun log of a robot run; a context manager (or call `close`).

    `target`: None spawns a Rerun viewer (or uses the one already running) and streams to it; a
    ``rerun+http://HOST:PORT/proxy`` URL streams to that viewer; a path ending in ``.rrd``
    writes the file. `gate` and `watchdog` are watched for interventions and trips.
    `period_s` is the time between a chunk's rows (a `ControlLoop` hands over its own period).
    `prefix` goes before every entity path (one run of several in a file). `block=True` waits
    for room in the queue instead of dropping (converting a file, where nothing runs in real
    time). Anything else is a `ValueError`, and so is a missing ``rerun``.

    A `ControlLoop` is given the log as ``log=`` and logs each tick; the frames sent, the chunks
    and the latencies come from wrapping the inference (`infer`), so the executor is built with
    ``ChunkExecutor(log.infer(client.infer, fit=client.fit))``.
    """

    def __init__(
        self,
        target: str | Path | None = None,
        *,
        gate: SafetyGate | None = None,
        watchdog: Watchdog | None = None,
        period_s: float | None = None,
        prefix: str = "",
        queue_size: int = QUEUE_SIZE,
        block: bool = False,
        application_id: str = "vla-client",
    ) -> None:
        check_positive("period_s", period_s, allow_none=True, finite=True)
        check_at_least("queue_size", queue_size, 1, integer=True)
        if not isinstance(block, bool):
            raise ValueError(f"block must be True or False; got {block!r}")
        try:
            import rerun as rr
        except ImportError:
            raise ValueError(
                "logging to Rerun needs rerun-sdk, which is not installed: "
                "pip install 'vla-client[rerun]'"
            ) from None
        self._rr = rr
        self._stream = rr.RecordingStream(application_id)
        self.target = _open(self._stream, target)
        self.gate = gate
        self.watchdog = watchdog
        self._scope = _Scope(_prefix(prefix), None, period_s)
        self._block = block
        self._clock: Callable[[], float] = time.monotonic
        self._seen = self._counts()
        self._plans: dict[str, int] = {}  # chunks logged, by prefix
        self._named: set[str] = set()
        self._laid_out = False
        self._full = 0  # counted by the control thread
        self._lost = 0  # counted by the logging thread, once Rerun has failed
        self._unflushed = 0  # handed to Rerun since its last good flush
        self.failure: Exception | None = None
        """What made Rerun fail (a Rerun call, or a flush: its sink), set when it happens; nothing
        more is logged after it."""
        self._queue: queue.Queue[tuple[_Scope, _Item] | None] = queue.Queue(queue_size)
        self._thread = threading.Thread(target=self._drain, name="vla-rerun-log", daemon=True)
        self._thread.start()

    # What the control thread calls: each only puts an item on the queue.

    @property
    def period_s(self) -> float | None:
        """The time between a chunk's rows; None until a loop or the constructor gives it."""
        return self._scope.period_s

    @property
    def prefix(self) -> str:
        """What goes before the entity paths of what is logged now."""
        return self._scope.prefix

    def use_clock(self, clock: Callable[[], float], period_s: float) -> None:
        """Time everything on `clock` from now on (its reading now is 0 on the timeline), and
        plan chunk rows `period_s` apart."""
        check_positive("period_s", period_s, finite=True)
        self._clock = clock
        self._scope = _Scope(self._scope.prefix, clock(), period_s)

    def start(
        self, prefix: str, *, gate: SafetyGate | None = None, watchdog: Watchdog | None = None
    ) -> None:
        """Log what comes next under `prefix` (an episode of several, say), watching `gate`
        and `watchdog`; its time starts from 0 again when a loop hands over its clock."""
        self._scope = _Scope(_prefix(prefix), None, self._scope.period_s)
        self.gate, self.watchdog = gate, watchdog
        self._seen = self._counts()

    def tick(self, t: float, observation: Observation, action: Action | None) -> None:
        """Log the state and the applied action at clock time `t`, and what the gate and
        watchdog did since the last tick."""
        self._put(_Tick(t, observation.state, action))
        self._watch(t)

    def infer(
        self, infer: InferFn, *, fit: Callable[[Observation], Observation] | None = None
    ) -> InferFn:
        """`infer`, logging each observation sent (passed through `fit` on the logging thread:
        `ActionClient.fit`, over HTTP) and each reply's chunk and latencies."""

        def logged(observation: Observation) -> ActionResult:
            sent_at = self._clock()
            result = None
            try:
                result = infer(observation)
                return result
            finally:
                self.sent(sent_at, observation, result, fit=fit)

        return logged

    def sent(
        self,
        sent_at: float,
        observation: Observation,
        result: ActionResult | None,
        *,
        fit: Callable[[Observation], Observation] | None = None,
        replied_at: float | None = None,
    ) -> None:
        """Log one request sent at clock time `sent_at` and its reply (None: it failed), as
        `infer` does; the reply came at `replied_at` (default: now)."""
        latencies: dict[str, float] = {}
        if result is not None:
            latencies = {s: v for s, read in STAGES if (v := read(result)) is not None}
        actions = None if result is None else result.actions
        self.put_sent(sent_at, observation, actions, latencies, fit=fit, replied_at=replied_at)

    def put_sent(
        self,
        sent_at: float,
        observation: Observation,
        actions: np.ndarray | None,
        latencies_ms: dict[str, float],
        *,
        fit: Callable[[Observation], Observation] | None = None,
        replied_at: float | None = None,
    ) -> None:
        """`sent` from its parts: the chunk (None: none came) and the latencies by stage name
        (a recording's, say, which holds the server's timings only)."""
        replied = self._clock() if replied_at is None else replied_at
        self._put(_Sent(sent_at, observation, fit, replied, actions, latencies_ms))

    def event(self, t: float, text: str, *, level: str = "WARN") -> None:
        """A line in ``events`` at clock time `t`."""
        self._put(_Event(t, text, level))

    def close(self, timeout: float | None = 10.0) -> None:
        """Log the last events, wait up to `timeout` s for the queue to empty and as long again
        for Rerun to write or send it (None: as long as it takes), end the log."""
        self._watch(self._clock())
        self._queue.put(None)
        self._thread.join(timeout)
        try:
            if self.failure is None:
                self._flush(1e38 if timeout is None else timeout)
            self._stream.disconnect()
        except Exception as exc:  # the log is over either way
            self.failure = self.failure or exc
            log.warning("could not finish the Rerun log %s: %s", self.target, exc)
        if self.dropped:
            log.warning("Rerun log %s: %d item(s) not logged", self.target, self.dropped)

    def __enter__(self) -> RerunLog:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()

    @property
    def dropped(self) -> int:
        """Items not logged: the queue was full, or Rerun had failed."""
        return self._full + self._lost

    def _put(self, item: _Item) -> None:
        if self._scope.origin is None:
            self._scope = _Scope(self._scope.prefix, item.t, self._scope.period_s)
        try:
            self._queue.put((self._scope, item), block=self._block)
        except queue.Full:
            self._full += 1

    def _counts(self) -> tuple[int, int, int, bool]:
        """The gate's clips and rejections, the watchdog's trips and whether it is tripped."""
        gate, watchdog = self.gate, self.watchdog
        return (
            gate.clipped if gate is not None else 0,
            gate.rejected if gate is not None else 0,
            watchdog.trips if watchdog is not None else 0,
            watchdog.tripped if watchdog is not None else False,
        )

    def _watch(self, t: float) -> None:
        watchdog = self.watchdog
        clipped, rejected, trips, tripped = self._counts()
        was_clipped, was_rejected, was_trips, was_tripped = self._seen
        if clipped > was_clipped:
            self.event(t, f"safety gate clipped {clipped - was_clipped} action(s)")
        if rejected > was_rejected:
            self.event(
                t, f"safety gate rejected {rejected - was_rejected} action(s)", level="ERROR"
            )
        if trips > was_trips and watchdog is not None:
            self.event(t, f"watchdog tripped: server silent, {watchdog.behaviour}", level="ERROR")
        elif was_tripped and not tripped:
            self.event(t, "watchdog: server back", level="INFO")
        self._seen = (clipped, rejected, trips, tripped)

    # The logging thread.

    def _drain(self) -> None:
        flushed_at = time.monotonic()
        while (entry := self._queue.get()) is not None:
            if self.failure is not None:
                self._lost += 1
                continue
            try:
                self._write(*entry)
            except Exception as exc:  # a call Rerun refused: say so once, never raise
                self._lost += 1
                self._fail(exc)
                continue
            self._unflushed += 1
            if time.monotonic() - flushed_at >= FLUSH_EVERY_S:
                try:
                    self._flush(FLUSH_TIMEOUT_S)
                except Exception as exc:  # a full disk, a viewer gone: the same
                    self._fail(exc)
                flushed_at = time.monotonic()

    def _flush(self, timeout_s: float) -> None:
        """Have Rerun hand everything to its sink; a failed sink raises, and what was handed to
        Rerun since the last good flush counts as dropped."""
        try:
            self._stream.flush(timeout_sec=timeout_s)
        except Exception:
            self._lost += self._unflushed
            raise
        finally:
            self._unflushed = 0

    def _fail(self, exc: Exception) -> None:
        self.failure = exc
        log.warning("Rerun log %s failed, logging no more: %s", self.target, exc)

    def _write(self, scope: _Scope, item: _Item) -> None:
        rr, stream = self._rr, self._stream
        assert scope.origin is not None  # set by the first item put
        stream.set_time(TIMELINE, duration=item.t - scope.origin)
        if isinstance(item, _Tick):
            for entity, values in (("robot/state", item.state), ("robot/action", item.action)):
                if values is not None:
                    path = scope.prefix + entity
                    self._series(path, len(values))
                    stream.log(path, rr.Scalars(np.asarray(values, np.float64)))
        elif isinstance(item, _Event):
            stream.log(scope.prefix + "events", rr.TextLog(item.text, level=item.level))
        else:
            self._write_sent(scope, item, scope.origin)

    def _write_sent(self, scope: _Scope, item: _Sent, origin: float) -> None:
        rr, stream = self._rr, self._stream
        observation = item.fit(item.observation) if item.fit is not None else item.observation
        if not self._laid_out:
            self._laid_out = True
            stream.send_blueprint(layout(scope.prefix, list(observation.images)))
        for name, frame in observation.images.items():
            stream.log(f"{scope.prefix}camera/{name}", rr.Image(frame))
        if item.actions is None:
            return
        stream.set_time(TIMELINE, duration=item.replied_at - origin)
        for stage, value in item.latencies_ms.items():
            stream.log(f"{scope.prefix}latency/{stage}", rr.Scalars(value))
        actions = np.asarray(item.actions, np.float64)
        if actions.ndim != 2 or scope.period_s is None:
            return  # a batch, or no period to place the rows at
        number = self._plans.get(scope.prefix, 0)
        self._plans[scope.prefix] = number + 1
        path = f"{scope.prefix}plan/{number}"
        self._series(path, actions.shape[1])
        times = item.t - origin + scope.period_s * np.arange(len(actions))
        stream.send_columns(
            path,
            indexes=[rr.TimeColumn(TIMELINE, duration=times)],
            columns=rr.Scalars.columns(scalars=actions),
        )

    def _series(self, path: str, joints: int) -> None:
        """Name an entity's series ``joint 0``, ``joint 1``, ... once."""
        if path in self._named:
            return
        self._named.add(path)
        names = [f"joint {j}" for j in range(joints)]
        self._stream.log(path, self._rr.SeriesLines(names=names), static=True)


def _prefix(text: str) -> str:
    """``episode 3`` -> ``episode 3/``; empty stays empty."""
    text = text.strip("/")
    return text + "/" if text else ""


VIEWER_PORT = 9876
"""Where a Rerun viewer listens by default (``rerun`` started by hand, or spawned)."""


def _spawn(stream: Any) -> None:
    """Stream to the Rerun viewer listening on its default port, else start one (the one
    installed beside this Python, else the first on PATH). Where there is no display to show
    a new viewer on (Linux without DISPLAY or WAYLAND_DISPLAY), that is a `ValueError` at once
    rather than a viewer that dies unseen."""
    import rerun as rr

    if _listening("127.0.0.1", VIEWER_PORT):
        stream.connect_grpc(f"rerun+http://127.0.0.1:{VIEWER_PORT}/proxy")
        return
    if sys.platform == "linux" and not (
        os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY")
    ):
        raise ValueError(
            "no display to show a Rerun viewer on (DISPLAY is not set) and no viewer listening "
            f"on port {VIEWER_PORT}: log to a .rrd file and open it where there is a screen"
        )
    beside = Path(sys.executable).with_name("rerun")
    try:
        rr.spawn(executable_path=str(beside) if beside.exists() else None, recording=stream)
    except RuntimeError as exc:
        reason = str(exc).strip().splitlines()[0]
        raise ValueError(
            f"cannot start a Rerun viewer ({reason}); install one with rerun-sdk, or log to a "
            ".rrd file and open it later"
        ) from None


def _listening(host: str, port: int) -> bool:
    """Whether something accepts connections on `host`:`port`."""
    with socket.socket() as probe:
        probe.settimeout(0.2)
        return probe.connect_ex((host, port)) == 0


def _open(stream: Any, target: str | Path | None) -> str:
    """Point `stream` at `target`; returns how the target is named in messages."""
    if target is None:
        _spawn(stream)
        return "viewer"
    text = str(target)
    if text.startswith(_URL_SCHEMES):
        stream.connect_grpc(text)
        return text
    if text.lower().endswith(".rrd"):
        folder = Path(text).parent
        if not folder.is_dir():
            raise ValueError(
                f"cannot write the Rerun log {text}: the folder {folder} does not exist"
            )
        stream.save(text)
        return text
    raise ValueError(
        f"a Rerun target is None (a viewer), a rerun+http:// URL or a .rrd file; got {text!r}"
    )
