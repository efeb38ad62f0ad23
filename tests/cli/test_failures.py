"""Every way a command can fail ends with exit 1 and one line on stderr, never a traceback."""

from __future__ import annotations

import socket
import subprocess
import sys

import pytest


@pytest.fixture
def dead_url() -> str:
    """A loopback URL where nothing listens."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}"


@pytest.mark.parametrize("command", ["send", "metadata", "bench"])
def test_server_down(cli, error_line, dead_url, command):
    run = cli(
        command,
        dead_url,
        *(
            ["--repeat", "1", "--encodings", "raw", "--wires", "msgpack"]
            if command == "bench"
            else []
        ),
    )
    assert run.code == 1
    assert "cannot reach the server" in error_line(run.err)


def test_timeout(cli, error_line, slow_server_url):
    run = cli("send", slow_server_url, "--timeout", "0.3", "--height", "32", "--width", "32")
    assert run.code == 1
    assert "time" in error_line(run.err).lower()


def test_bad_metadata(cli, error_line, bad_metadata_url):
    run = cli("metadata", bad_metadata_url)
    assert run.code == 1
    line = error_line(run.err)
    assert "invalid" in line and "action_horizon" in line


def test_reply_without_actions(cli, error_line, bad_metadata_url):
    run = cli("send", bad_metadata_url, "--height", "32", "--width", "32")
    assert run.code == 1
    assert error_line(run.err)


def test_server_refuses_the_request(cli, error_line, wrist_only_url):
    run = cli("send", wrist_only_url, "--height", "32", "--width", "32")
    assert run.code == 1
    line = error_line(run.err)
    assert "400" in line and "unknown cameras" in line


def test_serve_with_a_missing_replay_file(cli):
    run = cli("serve", "--policy", "replay", "--replay-file", "/no/such/actions.npz")
    assert run.code != 0
    lines = [line for line in run.err.splitlines() if line.strip()]
    assert len(lines) == 1 and "/no/such/actions.npz" in lines[0]


@pytest.mark.parametrize(
    ("args", "reason"),
    [
        (("--api-servers", "0"), "must be in 1..64"),
        (("--api-servers", "2", "--in-process"), "drop --in-process"),
    ],
)
def test_serve_refuses_api_servers_it_cannot_run(cli, args, reason):
    run = cli("serve", *args)
    assert run.code == 2
    assert run.err.startswith("error: ") and run.err.count("\n") == 1
    assert reason in run.err


def test_console_script_exit_code_and_stderr(dead_url):
    """The installed entry point, in its own process: exit status 1 and one stderr line."""
    completed = subprocess.run(
        [sys.executable, "-m", "vla_client.cli", "send", dead_url],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert completed.returncode == 1
    assert completed.stdout == ""
    assert completed.stderr.startswith("vla-client: error: cannot reach the server")
    assert completed.stderr.count("\n") == 1


def test_a_missing_extra_is_one_line_naming_the_extra(cli, monkeypatch):
    import builtins

    real_import = builtins.__import__

    def no_uvicorn(name, *args, **kwargs):
        if name.split(".")[0] == "uvicorn":
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_uvicorn)
    run = cli("serve", "--port", "0")
    assert run.code == 1
    assert run.err.strip() == (
        "vla-client: error: this needs the 'server' extra (uvicorn is not installed): "
        "pip install 'vla-client[server]'"
    )
