"""A shortened run of benchmarks/load_test.py: every request answered once, with its own actions."""

from __future__ import annotations

import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
import load_test


def test_concurrent_mixed_clients_each_get_their_own_reply() -> None:
    server = load_test.ServerProcess().start()
    try:
        report = load_test.run_load(server, clients=8, rounds=3, requests=6, time_limit=30.0)
    finally:
        server.kill()
    tally = report.tally
    assert tally.sent == 8 * 3 * 6, report.lines()
    assert tally.answered == tally.sent, report.lines()
    assert tally.consistent, report.lines()
    assert not report.leaked_segments, report.lines()
    # Resident memory must settle after the first round (thread pools, caches), not keep growing.
    assert report.rss_mb[-1] - report.rss_mb[1] < 48, report.lines()


def test_the_reply_check_catches_another_requests_actions() -> None:
    frames = {"a": np.full((8, 8, 3), 40, np.uint8)}
    expected = load_test.Expected(frames, horizon=4, action_dim=3)
    mine = load_test.request_observation(frames, client=0, seq=1)
    other = load_test.request_observation(frames, client=0, seq=2)

    result = SimpleNamespace(
        digests={"a": load_test.frame_digest(frames["a"])},
        actions=load_test.reference_actions(
            load_test.PolicyInput(images=frames, state=other.state, task=other.task),
            horizon=4,
            action_dim=3,
        ),
    )
    assert expected.check(other, "png", result)
    assert not expected.check(mine, "png", result)
