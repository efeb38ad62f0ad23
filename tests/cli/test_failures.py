"""Every way a command can fail ends with exit 1 and one line on stderr, never a traceback."""

from __future__ import annotations

import re
import signal
import socket
import subprocess
import sys
import time

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
        "--wait-for-server",  # the wait for a starting server: tests/cli/test_quickstart.py
        "0",
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
    assert "output.action_horizon must be a whole number" in line


def test_reply_without_actions(cli, error_line, bad_metadata_url):
    run = cli("send", bad_metadata_url, "--height", "32", "--width", "32")
    assert run.code == 1
    assert error_line(run.err)


def test_server_refuses_the_request(cli, error_line, wrist_only_url):
    run = cli("send", wrist_only_url, "--no-check", "--cameras", "3", "--height", "32")
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
    assert run.err.startswith("vla-client: error: ") and run.err.count("\n") == 1
    assert reason in run.err


def test_console_script_exit_code_and_stderr(dead_url):
    """The installed entry point, in its own process: exit status 1 and one stderr line."""
    completed = subprocess.run(
        [sys.executable, "-m", "vla_client.cli", "send", dead_url, "--wait-for-server", "0"],
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


@pytest.mark.parametrize(
    ("command", "value"),
    [("send", "0"), ("send", "-2"), ("metadata", "0"), ("bench", "-1"), ("cameras", "0")],
)
def test_a_timeout_of_zero_or_less_is_refused(cli, usage_error, counting_server, command, value):
    url = [] if command == "cameras" else [counting_server.url]
    line = usage_error(cli(command, *url, "--timeout", value))
    assert f"argument --timeout: must be a number of seconds above 0, got '{value}'" in line
    assert counting_server.requests == 0


def test_cameras_errors_go_to_stderr(cli, error_line):
    run = cli("cameras", "--camera", "wrist=nope.mp4")
    assert run.code == 1 and run.out == ""
    assert "camera 'nope.mp4' is none of" in error_line(run.err)


def test_a_missing_camera_device_is_one_line_without_opencv_noise():
    """OpenCV writes its WARN/ERROR lines to the process's stderr, so run a real process."""
    completed = subprocess.run(
        [sys.executable, "-m", "vla_client.cli", "cameras", "--camera", "wrist=9"],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert completed.returncode == 1
    assert completed.stdout == ""
    assert completed.stderr == (
        "vla-client: error: cannot open camera 9; `vla-client cameras` without --camera lists "
        "the cameras this machine has\n"
    )


@pytest.mark.parametrize("output", [[], ["--json"]], ids=["table", "json"])
def test_a_closed_pipe_ends_quietly(counting_server, output):
    """``vla-client send ... | head``: the reader left before the output was written."""
    process = subprocess.Popen(
        [sys.executable, "-m", "vla_client.cli", "send", counting_server.url, "--repeat", "2",
         "--height", "32", "--width", "32", *output],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )  # fmt: skip
    process.stdout.close()  # type: ignore[union-attr]
    _, stderr = process.communicate(timeout=60)
    assert stderr == b""
    assert process.returncode == 1
    assert counting_server.requests == 2  # the work was done; only the printing was cut off


def test_usage_errors_are_one_line_with_exit_2(cli, usage_error):
    assert "unrecognized arguments: --bogus" in usage_error(cli("send", "--bogus"))
    assert "invalid choice: 'png2'" in usage_error(cli("send", "--encoding", "png2"))


def _default_sigint() -> None:
    """In the child: Ctrl-C as a terminal delivers it. A suite started in the background by a
    non-interactive shell inherits SIGINT ignored, and Python then never raises
    KeyboardInterrupt."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def test_ctrl_c_stops_without_a_traceback(counting_server):
    process = subprocess.Popen(
        [sys.executable, "-m", "vla_client.cli", "send", counting_server.url, "--repeat", "100",
         "--rate", "2", "--height", "32", "--width", "32"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, preexec_fn=_default_sigint,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 30
        while counting_server.requests < 2 and time.monotonic() < deadline:  # it is sending
            time.sleep(0.05)
        process.send_signal(signal.SIGINT)
        out, err = process.communicate(timeout=30)
    finally:  # a sender left running would add requests to the next tests' counts
        process.kill()
        process.wait()
    assert process.returncode == 130
    # what the requests so far measured is printed, and one line says why it stopped there
    assert "Traceback" not in err
    (line,) = err.splitlines()
    assert re.fullmatch(r"vla-client: error: stopped by Ctrl-C after \d+ of 100 requests", line)
    assert f"request(s) to {counting_server.url}" in out and "p99" in out
