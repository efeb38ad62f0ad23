"""``send --repeat`` stopped part way by a failing server still prints what the requests so far
measured (Ctrl-C: tests/cli/test_failures.py); ``--rate recorded`` caps a recording's absurd
gaps (issues 34.9, 36.7)."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator

import numpy as np
import pytest

from vla_client.observation import Observation
from vla_client.recording import ObservationWriter
from vla_client.server import LocalServer, ReferencePolicy, ServerConfig, create_app
from vla_client.server.policy import PolicyInput


class DyingPolicy(ReferencePolicy):
    """Answers `good` requests, then fails every one after."""

    def __init__(self, good: int) -> None:
        super().__init__(action_horizon=4, action_dim=3)
        self.good = good
        self.served = 0

    def infer(self, observation: PolicyInput) -> np.ndarray:
        self.served += 1
        if self.served > self.good:
            raise RuntimeError("the GPU fell off")
        return super().infer(observation)


@pytest.fixture
def dying_url() -> Iterator[str]:
    with LocalServer(create_app(DyingPolicy(3), ServerConfig(in_process=True))) as server:
        yield server.url


def test_a_failing_server_mid_run_keeps_the_stats_so_far(cli, dying_url):
    run = cli("send", dying_url, "--repeat", "10", "--height", "16", "--width", "16", "--json")
    assert run.code == 1
    report = json.loads(run.out)
    assert (report["requests"], report["planned_requests"]) == (3, 10)
    assert "policy failed (RuntimeError)" in report["stopped_by"]
    (line,) = run.err.splitlines()
    assert line.startswith("vla-client: error: request 4 of 10 failed: server answered 500")


def test_a_failing_first_request_is_the_error_alone(cli, dying_url):
    cli("send", dying_url, "--repeat", "3", "--height", "16", "--width", "16")  # uses up 3
    run = cli("send", dying_url, "--repeat", "3", "--height", "16", "--width", "16")
    assert (run.code, run.out) == (1, "")
    assert run.err.startswith("vla-client: error: server answered 500")


def test_a_recorded_gap_of_years_is_capped_and_said_once(cli, counting_server, tmp_path):
    """A robot clock stepped by NTP mid-recording: 1.7e9 s between two steps."""
    path = tmp_path / "run.vlaobs"
    frame = np.zeros((16, 16, 3), np.uint8)
    with ObservationWriter(path) as writer:
        for wall_time in (100.0, 100.05, 1.7e9, 1.7e9 + 0.05):
            writer.write(Observation({"wrist": frame}), wall_time=wall_time)
    started = time.monotonic()
    run = cli("send", counting_server.url, "--obs", str(path), "--rate", "recorded")
    assert run.code == 0, run.err
    assert time.monotonic() - started < 60
    assert counting_server.requests == 4
    (note,) = [line for line in run.err.splitlines() if "note" in line]
    assert "steps 1 and 2 are 1.7e+09 s apart" in note and "at most 10 s" in note


def test_pauses_cap_only_what_is_over_the_limit():
    from vla_client.cli.send import MAX_RECORDED_GAP_S, pauses
    from vla_client.cli.sources import Source

    source = Source(iter(()), 4, (0.0, 0.5, 0.5 + 1e6, 1e6 + 0.75))
    gaps = [next(it) for it in [pauses("recorded", source)] for _ in range(5)]
    assert gaps == [0.0, 0.5, MAX_RECORDED_GAP_S, 0.25, 0.5]
