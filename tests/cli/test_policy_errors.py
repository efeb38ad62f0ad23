"""A policy that raises, as its author meets it (issue 45 item 4): ``vla-client serve`` on
loopback tells the client the exception's message in the 500, its log has the traceback, and
``vla-client send URL -v`` (``-v`` after the command) is taken. Elsewhere, or with
``--no-send-policy-errors``, the client gets the exception's type only."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import pytest

import vla_client
from vla_client import ActionClient, Observation
from vla_client.errors import ServerError
from vla_client.server import LocalServer, Policy, PolicySpec, ServerConfig, create_app
from vla_client.server.policy import PolicyInput

sys.path.insert(0, str(Path(__file__).parents[1] / "server"))
sys.path.insert(0, str(Path(__file__).parents[2] / "benchmarks"))
from load_test import free_port
from serve_process import start_serve

del sys.path[:2]

RAISES = """
import numpy as np
from vla_client.server import Policy, PolicySpec


class Raises(Policy):
    @property
    def spec(self):
        return PolicySpec(family="mine", action_horizon=2, action_dim=2)

    def infer(self, observation):
        raise RuntimeError(f"my policy broke on {observation.task!r}")
"""
SEND = ("--cameras", "1", "--height", "16", "--width", "16", "--task", "pick")
MESSAGE = "server answered 500: policy failed: RuntimeError: my policy broke on 'pick'"


@pytest.fixture
def servers() -> Iterator[list[subprocess.Popen[bytes]]]:
    started: list[subprocess.Popen[bytes]] = []
    yield started
    for server in started:
        server.terminate()
        server.wait(30)


@pytest.fixture
def serve(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, servers: list[subprocess.Popen[bytes]]
) -> Callable[..., str]:
    """``vla-client serve --policy raising:Raises ARGS`` on loopback; returns its URL."""
    (tmp_path / "raising.py").write_text(RAISES)
    monkeypatch.chdir(tmp_path)
    source = Path(vla_client.__file__).resolve().parents[1]  # the vla_client tested here
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(tmp_path), str(source)]))

    def start(*args: str) -> str:
        port = free_port()
        servers.append(start_serve(port, "--policy", "raising:Raises", *args))
        return f"http://127.0.0.1:{port}"

    return start


def test_serve_on_loopback_sends_the_message_and_logs_the_traceback(cli, serve, servers) -> None:
    run = cli("send", serve(), *SEND)
    assert run.code == 1
    assert run.err == f"vla-client: error: {MESSAGE}\n"
    servers[0].terminate()
    log = servers[0].communicate(timeout=30)[1].decode()
    assert "ERROR vla_client.server: policy failed (RuntimeError) (request " in log, log
    assert "Traceback (most recent call last):" in log
    assert "RuntimeError: my policy broke on 'pick'" in log
    assert "details are in the server log" not in log


def test_no_send_policy_errors_gives_the_type_only(cli, serve) -> None:
    run = cli("send", serve("--no-send-policy-errors"), *SEND)
    assert run.code == 1
    assert "policy failed (RuntimeError); details are in the server log" in run.err
    assert "my policy broke" not in run.err


@pytest.mark.parametrize("verbose", ["-v", "--verbose"])
def test_verbose_is_taken_after_the_command(serve, verbose: str) -> None:
    """``vla-client send URL -v``, as the docs suggest, in its own process (so its log shows)."""
    run = subprocess.run(
        [sys.executable, "-m", "vla_client.cli", "send", serve(), *SEND, verbose],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert run.returncode == 1, run.stderr
    assert "DEBUG" in run.stderr  # the debug log -v turns on
    assert run.stderr.endswith(f"vla-client: error: {MESSAGE}\n")


def test_verbose_before_the_command_still_counts_and_is_off_unless_given() -> None:
    from vla_client.cli import build_parser

    parser = build_parser()
    assert parser.parse_args(["-v", "send"]).verbose is True
    assert parser.parse_args(["send", "-v"]).verbose is True
    assert parser.parse_args(["send"]).verbose is False


class Raises(Policy):
    @property
    def spec(self) -> PolicySpec:
        return PolicySpec(family="mine", action_horizon=2, action_dim=2)

    def infer(self, observation: PolicyInput) -> np.ndarray:
        raise RuntimeError("secret path /opt/weights")


@pytest.mark.parametrize("send_policy_errors", [False, True])
def test_server_config_send_policy_errors(send_policy_errors: bool) -> None:
    """Off in the library's default config (`create_app`, `LocalServer`), on when asked."""
    assert ServerConfig().send_policy_errors is False
    config = ServerConfig(in_process=True, send_policy_errors=send_policy_errors)
    with (
        LocalServer(create_app(Raises(), config)) as server,
        ActionClient(server.url) as client,
        pytest.raises(ServerError) as raised,
    ):
        client.infer(Observation({"cam": np.zeros((8, 8, 3), np.uint8)}))
    assert raised.value.status_code == 500
    assert raised.value.detail == (
        "policy failed: RuntimeError: secret path /opt/weights"
        if send_policy_errors
        else "policy failed (RuntimeError); details are in the server log"
    )


def test_send_policy_errors_must_be_a_bool() -> None:
    with pytest.raises(ValueError, match="send_policy_errors must be True or False; got 1"):
        ServerConfig(send_policy_errors=1)  # type: ignore[arg-type]
