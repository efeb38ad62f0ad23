"""examples/control_loop.py when the server is down or goes away: one line, or zero velocity."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from vla_client.server import LocalServer, ReferencePolicy, ServerConfig, create_app

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "control_loop.py"


def example(*args: str) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    return subprocess.Popen(
        [sys.executable, str(EXAMPLE), *args],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
    )  # fmt: skip


@pytest.mark.parametrize("transport", ["websocket", "http"])
def test_a_server_that_is_down_is_one_line_and_exit_1(transport: str) -> None:
    process = example("--url", "http://127.0.0.1:1", "--transport", transport)
    out, err = process.communicate(timeout=60)
    assert process.returncode == 1, out + err
    assert err.startswith("error: ") and err.count("\n") == 1, err
    assert "Traceback" not in err


def test_the_velocity_robot_gets_zero_when_the_server_goes_silent() -> None:
    config = ServerConfig(in_process=True)
    server = LocalServer(create_app(ReferencePolicy(), config)).start()
    process = example(
        "--url", server.url, "--seconds", "4", "--silence", "0.3", "--cameras", "1",
        "--size", "64",
    )  # fmt: skip
    try:
        assert process.stdout is not None
        first = process.stdout.readline()  # printed once the metadata came back
        assert first.startswith("websocket to "), first
        time.sleep(0.8)  # a few chunks played
    finally:
        server.stop()
    out, err = process.communicate(timeout=60)
    assert process.returncode == 0, out + err
    assert "Traceback" not in err
    trips = [line for line in out.splitlines() if line.startswith("watchdog:")]
    assert trips and all(line.endswith("now zero") for line in trips), out


@pytest.mark.parametrize(
    ("flags", "reason"),
    [
        (("--rate", "-5"), "argument --rate: must be above 0, got '-5'"),
        (("--limit", "-1"), "argument --limit: must be above 0, got '-1'"),
        (("--seconds", "nan"), "argument --seconds: must be above 0, got 'nan'"),
        (("--cameras", "0"), "argument --cameras: must be at least 1, got '0'"),
        (("--blend", "1.5"), "argument --blend: must be a whole number, got '1.5'"),
    ],
)
def test_a_bad_flag_is_one_line_and_exit_2(flags: tuple[str, ...], reason: str) -> None:
    process = example(*flags)
    out, err = process.communicate(timeout=60)
    assert process.returncode == 2, out + err
    assert err == f"control_loop.py: error: {reason} (see --help)\n"
    assert out == ""
