"""The server killed with SIGKILL and restarted under load.

Every request must end as its own correct reply or a typed `VLAClientError` (connect refused,
connection dropped, timeout): none mismatched, none answered twice (a stray reply), none lost.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
import load_test

TYPED = {"ConnectError", "RequestTimeoutError", "ServerError"}


def test_kill_and_restart_under_load_loses_nothing() -> None:
    server = load_test.ServerProcess().start()
    old_pid = server.process.pid if server.process else 0
    expected = load_test.Expected(load_test.synthetic_frames(2, 64, 80, seed=5), 16, 7)
    tally = load_test.Tally()
    load = threading.Thread(
        target=load_test.run_round,
        args=(server.url, 5, 10_000, expected, tally),
        kwargs={"time_limit": 11.0},
    )
    try:
        load.start()
        time.sleep(2.0)
        server.crash()
        answered_at_crash = tally.answered
        _wait_gone(old_pid)
        server.start()
        load.join(40.0)
        assert not load.is_alive()
    finally:
        server.stop()
    assert answered_at_crash > 0
    assert tally.answered > answered_at_crash, "no request succeeded after the restart"
    assert tally.consistent, (tally, tally.lost)
    assert set(tally.errors) <= TYPED, tally.errors
    assert not load_test.leaked_segments(server.pids)


def _wait_gone(pid: int, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while os.path.exists(f"/proc/{pid}") and time.monotonic() < deadline:
        time.sleep(0.05)
