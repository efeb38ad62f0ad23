"""The examples run out of the box: each is started as a user would, and its report is read."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def run_example(name: str, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    return subprocess.run(
        [sys.executable, str(ROOT / "examples" / name), *args],
        capture_output=True, text=True, env=env, timeout=60, check=False,
    )  # fmt: skip


@pytest.mark.parametrize("transport", ["websocket", "http"])
def test_control_loop_example_runs_against_its_own_server(transport: str) -> None:
    result = run_example(
        "control_loop.py", "--transport", transport, "--seconds", "1.5", "--size", "96"
    )
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr
    out = result.stdout
    assert f"{transport} to http://127.0.0.1:" in out
    ticks = re.search(r"ticks (\d+): applied (\d+), idle (\d+), overruns \d+, clipped (\d+)", out)
    assert ticks, out
    total, applied, idle, clipped = map(int, ticks.groups())
    assert total == 30 and applied + idle == total and applied >= total // 2
    assert clipped == 0, "the example's safety limits clip the reference policy's actions"
    chunks = re.search(
        r"chunks (\d+)/(\d+) requests; .*mismatched (\d+), late (\d+), errors (\d+)", out
    )
    assert chunks, out
    received, sent, mismatched, late, errors = map(int, chunks.groups())
    assert 2 <= received <= sent <= received + 1
    assert mismatched == late == errors == 0
    for line in ("tick jitter ms:", "inference round trip ms:", "observation->action ms:"):
        assert re.search(re.escape(line) + r"\s+n=[1-9]\d* p50=\d", out), line


def test_rtc_reach_example_continues_each_chunk_on_the_reach_task() -> None:
    """The guide's real-time chunking, end to end: the reach-flow policy served locally, one
    episode of the reach task under `ControlLoop` with ``mode="rtc"``."""
    result = run_example("rtc_reach.py")
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr
    out = result.stdout
    assert "started a local server of the reach-flow policy at http://127.0.0.1:" in out
    assert re.search(r"mode rtc: reached the target in \d+ steps", out), out
    chunks = re.search(r"chunks (\d+)/(\d+) requests, \d+ ticks, errors (\d+)", out)
    assert chunks, out
    received, sent, errors = map(int, chunks.groups())
    assert received >= 2 and sent - received <= 1 and errors == 0
    assert re.search(r"seam jump/step \d+\.\d over [1-9]\d* chunk switches", out), out


def test_rtc_reach_example_against_a_server_without_rtc_names_one_with_it() -> None:
    from vla_client.server import LocalServer, ReferencePolicy, create_app

    with LocalServer(create_app(ReferencePolicy())) as server:
        result = run_example("rtc_reach.py", server.url)
    assert result.returncode == 1
    assert result.stderr.strip() == (
        "error: mode 'rtc': the server (reference) announces no real-time chunking; it supports "
        "modes naive, aligned, blended (vla-client's server does it with a policy that "
        "announces it: vla-client serve --policy reach-flow, the reach task's flow policy)"
    )
