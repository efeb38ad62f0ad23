"""Read an ``.rrd`` file back with Rerun's own reader (each entity's rows, in time order), and a
real Rerun process standing in for a viewer."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
import warnings
from collections import defaultdict
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any


def read_rrd(path: Path, timeline: str = "loop_time") -> dict[str, list[dict[str, Any]]]:
    """Entity path -> its rows (component column -> value, plus the timeline's time in
    seconds as ``"t"``), sorted by time; static rows (series names) under ``"static:PATH"``."""
    from rerun.chunk import RrdReader

    rows: dict[str, list[dict[str, Any]]] = defaultdict(list)
    with warnings.catch_warnings():  # a viewer stopped by ^C leaves no footer: read it all
        warnings.filterwarnings("ignore", "RRD file has no footer")
        chunks = RrdReader(path).stream().to_chunks()
    for chunk in chunks:
        batch = chunk.to_record_batch()
        names = [n for n in batch.schema.names if ":" in n]
        entity = chunk.entity_path if not chunk.is_static else "static:" + chunk.entity_path
        times = None
        if timeline in batch.schema.names:  # durations in ns
            times = batch.column(timeline).cast("int64").to_pylist()
        for i in range(chunk.num_rows):
            row = {name: batch.column(name)[i].as_py() for name in names}
            if times is not None:
                row["t"] = times[i] / 1e9 if times[i] is not None else None
            rows[entity].append(row)
    for entity_rows in rows.values():
        entity_rows.sort(key=lambda r: r.get("t") or 0.0)
    return dict(rows)


@contextmanager
def saving_viewer(port: int, received: Path) -> Iterator[subprocess.Popen[bytes]]:
    """A real Rerun process listening on `port` where a viewer would, saving what it receives
    to `received` (``rerun --save``: a viewer without a window); stopped with ^C on the way
    out, so the file is complete.

    The ``rerun`` script runs the viewer as its child: it starts in a process group of its own,
    and `signal_viewer` signals the whole group (signalling the script alone left the viewer
    running, an orphan, after the test that meant to kill it)."""
    binary = Path(sys.executable).with_name("rerun")
    process = subprocess.Popen(
        [str(binary), "--port", str(port), "--save", str(received)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 30
        while not _listening(port):
            assert process.poll() is None and time.monotonic() < deadline, "rerun did not start"
            time.sleep(0.1)
        yield process
    finally:
        if process.poll() is None:
            time.sleep(1)  # what was sent last is written
            signal_viewer(process, signal.SIGINT)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)  # whatever is left of the group


def signal_viewer(process: subprocess.Popen[bytes], signum: int) -> None:
    """Send `signum` to the viewer `saving_viewer` started (its whole process group) and wait
    up to 10 s for every process of the group to end."""
    os.killpg(process.pid, signum)
    process.wait(10)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            os.killpg(process.pid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.05)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _listening(port: int) -> bool:
    with socket.socket() as probe:
        probe.settimeout(0.2)
        return probe.connect_ex(("127.0.0.1", port)) == 0
