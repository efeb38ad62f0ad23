"""Record what a server receives and answers, to look at later or replay.

A `RequestRecorder` takes each served request (the decoded frames, state, task and parameters,
the actions returned and the timings) and writes it, on a background thread, as a step of an
observation recording (`vla_client.recording`): ``vla-client view FILE`` shows the frames and
``vla-client send URL --obs FILE`` replays the requests to any server. Files go in one folder,
named ``requests-<start time>-<process id>-<n>.vlaobs``.

Bounded. The files a recorder writes never hold more than `max_bytes` together and never number
more than `max_files`: each file takes at most ``max_bytes // max_files`` bytes, then the next
one starts. When that next file would be one too many, `on_full` decides:

- ``"rotate"`` (the default) deletes the recorder's oldest file: the folder keeps the latest
  requests, like a flight recorder, which is what one wants when a robot misbehaves hours in;
- ``"stop"`` stops recording and says so once: the folder keeps the first requests.

Private. The recordings hold camera frames: each file is readable by its owner only (0600),
and a folder the recorder creates is 0700 (one that exists already keeps its mode).

Files that were in the folder before the recorder started are never touched. A request too big
for one file is skipped (counted in `stats`).

Never in the way of serving. `record` only puts the request on a bounded queue (no encoding, no
I/O); when the writer falls behind and the queue is full the request is dropped, counted, and
the first drop is logged. A folder that cannot be written (missing, read-only, not a folder,
disk full) stops the recording: it is logged once, `record` does nothing from then on, and the
caller goes on serving. A write that fails halfway is cut back, so every file reads to its last
whole step.
"""

from __future__ import annotations

import logging
import os
import queue
import threading
import time
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any, Literal

import numpy as np

from vla_client.errors import VLAClientError
from vla_client.observation import Observation
from vla_client.recording import (
    IMAGE_FORMATS,
    SUFFIX,
    EncodedStep,
    ImageFormat,
    ObservationWriter,
    ServedRequest,
    encode_step,
)
from vla_client.validation import check_choice

log = logging.getLogger(__name__)

OnFull = Literal["rotate", "stop"]
ON_FULL = ("rotate", "stop")
DEFAULT_MAX_BYTES = 1 << 30
DEFAULT_MAX_FILES = 16
DEFAULT_QUEUE_SIZE = 64


@dataclass(frozen=True)
class RecorderStats:
    """What a recorder has done so far.

    `recorded` steps written; `dropped` requests not recorded because the queue was full;
    `skipped` requests that cannot be stored (bigger than a file, or values msgpack cannot
    carry); `files` and `bytes` what the folder holds now; `rotated` files deleted to make room;
    `stopped` why recording stopped, or None while it goes on.
    """

    recorded: int
    dropped: int
    skipped: int
    files: int
    bytes: int
    rotated: int
    stopped: str | None


@dataclass(frozen=True)
class _Request:
    frames: Mapping[str, np.ndarray]
    state: np.ndarray | None
    task: str
    served: ServedRequest
    wall_time: float
    depth: Mapping[str, np.ndarray]


class RequestRecorder:
    """Write served requests to recordings in `folder`, bounded, off the request path.

    >>> recorder = RequestRecorder("records/", max_bytes=2 << 30, max_files=20)
    >>> recorder.record(frames, state, task, parameters, actions, timings)  # per request
    >>> recorder.close()  # at shutdown: writes what is queued

    `image_format` ``"png"`` stores frames losslessly at a PNG encode each (on the recorder's
    thread); ``"raw"`` stores the pixels as they are, several times bigger. `queue_size` is how
    many requests may wait for the writer. Arrays passed to `record` are kept, not copied, until
    written: pass arrays nothing will write to afterwards. The bounds apply per recorder, so
    several server processes recording into one folder each keep their own.
    """

    def __init__(
        self,
        folder: str | Path,
        *,
        max_bytes: int = DEFAULT_MAX_BYTES,
        max_files: int = DEFAULT_MAX_FILES,
        on_full: OnFull = "rotate",
        image_format: ImageFormat = "png",
        queue_size: int = DEFAULT_QUEUE_SIZE,
    ) -> None:
        check_choice("on_full", on_full, ON_FULL)
        check_choice("image_format", image_format, IMAGE_FORMATS)
        if max_files < 1:
            raise ValueError(f"max_files must be at least 1, got {max_files}")
        if max_bytes < max_files * 4096:
            raise ValueError(
                f"max_bytes must allow at least 4096 bytes per file, got {max_bytes} for "
                f"{max_files} files"
            )
        if queue_size < 1:
            raise ValueError(f"queue_size must be at least 1, got {queue_size}")
        self.folder = Path(folder)
        self.max_bytes = max_bytes
        self.max_files = max_files
        self.on_full = on_full
        self.image_format: ImageFormat = image_format
        self.file_limit = max_bytes // max_files
        self._queue: queue.Queue[_Request | None] = queue.Queue(queue_size)
        self._lock = threading.Lock()
        self._recorded = self._dropped = self._skipped = self._rotated = 0
        self._stopped: str | None = None
        self._closed = False
        self._files: deque[tuple[Path, int]] = deque()  # kept files and sizes, oldest first
        self._writer: ObservationWriter | None = None
        self._name = f"requests-{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}"
        self._next_file = 0
        self._check_folder()
        self._thread = threading.Thread(target=self._run, name="request-recorder", daemon=True)
        self._thread.start()

    def record(
        self,
        frames: Mapping[str, np.ndarray],
        state: np.ndarray | None,
        task: str,
        parameters: Mapping[str, Any],
        actions: np.ndarray,
        timings: Mapping[str, float],
        *,
        request_id: str | None = None,
        depth: Mapping[str, np.ndarray] | None = None,
    ) -> None:
        """Queue one served request for writing; returns at once and never raises for I/O.
        `depth` holds its depth frames, stored as `vla_client.recording` stores them.

        Does nothing once the recorder is closed or recording has stopped.
        """
        if self._stopped is not None or self._closed:
            return
        served = ServedRequest(actions, dict(parameters), dict(timings), request_id)
        try:
            self._queue.put_nowait(
                _Request(frames, state, task, served, time.time(), dict(depth or {}))
            )
        except queue.Full:
            with self._lock:
                self._dropped += 1
                first = self._dropped == 1
            if first:
                log.warning(
                    "recording to %s cannot keep up: a request was dropped (the queue of %d is "
                    "full); later drops are counted, not logged",
                    self.folder,
                    self._queue.maxsize,
                )

    def stats(self) -> RecorderStats:
        """A snapshot of what the recorder has done."""
        with self._lock:
            sizes = [size for _, size in self._files]
            if self._writer is not None:
                sizes[-1] = self._writer.size
            return RecorderStats(
                recorded=self._recorded,
                dropped=self._dropped,
                skipped=self._skipped,
                files=len(sizes),
                bytes=sum(sizes),
                rotated=self._rotated,
                stopped=self._stopped,
            )

    def close(self, timeout: float = 10.0) -> None:
        """Write what is queued, close the file and stop the thread; safe to call twice."""
        if self._closed:
            return
        self._closed = True
        try:
            self._queue.put(None, timeout=timeout)
        except queue.Full:
            log.warning("recording to %s: the writer did not drain its queue in time", self.folder)
            return
        self._thread.join(timeout)
        stats = self.stats()
        log.info(
            "recording to %s closed: %d request(s) in %d file(s), %d dropped, %d skipped",
            self.folder, stats.recorded, stats.files, stats.dropped, stats.skipped,
        )  # fmt: skip

    def __enter__(self) -> RequestRecorder:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def _check_folder(self) -> None:
        if self.folder.exists() and not self.folder.is_dir():
            self._stop("it is not a folder")
            return
        try:
            self.folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        except OSError as exc:
            self._stop(f"cannot create the folder: {exc.strerror or exc}")
            return
        if not os.access(self.folder, os.W_OK | os.X_OK):
            self._stop("the folder is not writable")

    def _run(self) -> None:
        while (request := self._queue.get()) is not None:
            if self._stopped is not None:
                continue  # stopped: empty the queue so close() is not kept waiting
            try:
                self._write(request)
            except OSError as exc:
                self._stop(f"cannot write: {exc.strerror or exc}")
            except Exception as exc:  # a bug here must not leave a dead thread and a full queue
                log.exception("recording to %s failed", self.folder)
                self._stop(f"unexpected error: {exc}")
            if self._stopped is not None:
                self._close_file()
        self._close_file()

    def _write(self, request: _Request) -> None:
        try:
            observation = Observation(
                dict(request.frames), state=request.state, task=request.task, depth=request.depth
            )
            step = encode_step(
                observation,
                image_format=self.image_format,
                wall_time=request.wall_time,
                served=request.served,
                parallel=False,
            )
        except VLAClientError as exc:
            self._skip(f"it cannot be stored: {exc}")
            return
        if not self._room_for(step):
            return
        assert self._writer is not None
        self._writer.append(step)
        with self._lock:
            self._recorded += 1

    def _room_for(self, step: EncodedStep) -> bool:
        """Make sure the current file can take `step`, starting a new one (and rotating) if not;
        False when the step is not to be written."""
        writer = self._writer
        if writer is not None and writer.size + step.size <= self.file_limit:
            return True
        if len(self._files) >= self.max_files:
            if self.on_full == "stop":
                self._stop(f"it is full ({self.max_files} files, limit {self.max_bytes} bytes)")
                return False
            self._rotate()
        writer = self._open_file()
        if writer.size + step.size > self.file_limit:
            self._skip(f"a request of {step.size} bytes does not fit a file of {self.file_limit}")
            return False
        return True

    def _open_file(self) -> ObservationWriter:
        self._close_file()
        while True:
            path = self.folder / f"{self._name}-{self._next_file:04d}{SUFFIX}"
            self._next_file += 1
            try:
                writer = ObservationWriter(
                    path,
                    image_format=self.image_format,
                    exclusive=True,
                    private=True,
                    source="server",
                )
                break
            except FileExistsError:
                continue  # a file of another run with this name: take the next number
        with self._lock:
            self._writer = writer
            self._files.append((path, writer.size))
        return writer

    def _close_file(self) -> None:
        writer = self._writer
        if writer is None:
            return
        writer.close()
        with self._lock:
            self._files[-1] = (writer.path, writer.size)
            self._writer = None

    def _rotate(self) -> None:
        self._close_file()
        path, _ = self._files[0]
        path.unlink(missing_ok=True)
        with self._lock:
            self._files.popleft()
            self._rotated += 1

    def _skip(self, reason: str) -> None:
        with self._lock:
            self._skipped += 1
            first = self._skipped == 1
        if first:
            log.warning(
                "recording to %s skipped a request: %s; later skips are counted, not logged",
                self.folder,
                reason,
            )

    def _stop(self, reason: str) -> None:
        with self._lock:
            if self._stopped is not None:
                return
            self._stopped = reason
        log.error("recording to %s stopped: %s (requests are still served)", self.folder, reason)
