"""``vla-client serve`` checks every option before anything starts: one line, exit code 2.

Nothing may start first: no worker, no port. The cases that fail on their own run in this
process (the command returns before serving); those that need a policy to try loading run the
real command.
"""

from __future__ import annotations

import re
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from vla_client.cli import build_parser, main

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
import load_test


@pytest.fixture
def busy_port() -> Iterator[int]:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        yield int(sock.getsockname()[1])


def refused(capsys: pytest.CaptureFixture[str], *args: str) -> str:
    """The one line `serve args` fails with (exit code 2, nothing on stdout)."""
    code = main(["serve", *args])
    captured = capsys.readouterr()
    assert code == 2, captured.err
    assert captured.out == ""
    assert captured.err.startswith("vla-client: error: ") and captured.err.count("\n") == 1, (
        captured.err
    )
    return captured.err


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--port", "99999"), r"--port must be in 1\.\.65535, got 99999"),
        (("--port", "-1"), r"--port must be in 1\.\.65535, got -1"),
        (("--port", "0"), r"--port must be in 1\.\.65535, got 0"),
        (("--action-horizon", "0"), r"--action-horizon must be in 1\.\.10000, got 0"),
        (("--action-dim", "-3"), r"--action-dim must be in 1\.\.10000, got -3"),
        (("--max-body-mb", "0"), "--max-body-mb must be a number > 0"),
        (("--max-body-mb", "nan"), "--max-body-mb must be a number > 0"),
        (("--max-batch", "0"), r"--max-batch must be in 1\.\.256"),
        (("--max-batch", "300"), r"--max-batch must be in 1\.\.256"),
        (("--queue-size", "0"), r"--queue-size must be in 1\.\.4096"),
        (("--batch-wait-ms", "-1"), r"--batch-wait-ms must be in 0\.\.1000"),
        (("--batch-wait-ms", "5000"), r"--batch-wait-ms must be in 0\.\.1000"),
        (("--api-servers", "0"), r"--api-servers must be in 1\.\.64"),
        (("--api-servers", "65"), r"--api-servers must be in 1\.\.64"),
        (("--api-servers", "2", "--in-process"), "drop --in-process"),
        (("--torch-threads", "0"), r"--torch-threads must be an integer in 1\.\.\d+ \(the cores"),
        (("--torch-threads", "4097"), r"--torch-threads must be an integer in 1\.\.\d+ \(the "),
        (("--torch-threads", "2", "--in-process"), "drop --in-process"),
        (("--cameras", "a,b,a"), "--cameras names a camera twice"),
        (("--policy", "torch", "--weights", "/nonexistent.pt"), "--weights /nonexistent.pt: no "),
        (("--policy", "torch", "--weights", "/"), "--weights /: not a file"),
        (
            ("--weights", "w.pt"),
            r"--weights does not apply to --policy reference \(only torch, reach-flow take it\)",
        ),
        (("--replay-file", "x.npz"), r"--replay-file does not apply to --policy reference \(only "),
        (("--policy", "replay"), "--policy replay needs --replay-file"),
        (("--policy", "replay", "--replay-file", "/no/such.npz"), "--replay-file /no/such.npz"),
        (("--policy", "replay", "--replay-file", "/etc/passwd"), "--replay-file /etc/passwd: "),
        (("--host", "host.invalid"), "--host host.invalid: no such interface or name"),
        (("--host", "192.0.2.1"), "--host 192.0.2.1: not an address of this machine"),
    ],
)
def test_a_bad_option_is_one_line_naming_it(
    capsys: pytest.CaptureFixture[str], args: tuple[str, ...], message: str
) -> None:
    assert re.search(message, refused(capsys, *args))


def test_an_unknown_omp_wait_policy_is_one_line(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OMP_WAIT_POLICY", "spin")
    line = refused(capsys, "--port", str(load_test.free_port()))
    assert "OMP_WAIT_POLICY must be ACTIVE or PASSIVE (or unset for PASSIVE); got 'spin'" in line


def test_replay_takes_its_shape_from_the_file(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    chunks = tmp_path / "chunks.npy"
    np.save(chunks, np.zeros((2, 4, 3), np.float32))
    line = refused(capsys, "--policy", "replay", "--replay-file", str(chunks), "--action-dim", "3")
    assert "--action-dim does not apply to --policy replay" in line


def test_a_busy_port_is_one_line(capsys: pytest.CaptureFixture[str], busy_port: int) -> None:
    line = refused(capsys, "--port", str(busy_port))
    assert f"--port {busy_port}: 127.0.0.1:{busy_port} is already in use" in line
    line = refused(capsys, "--port", str(busy_port), "--api-servers", "2")
    assert "is already in use" in line


def test_a_port_file_that_cannot_be_written_is_one_line_and_no_port_stays_bound(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    port = load_test.free_port()
    path = tmp_path / "no such folder" / "serve.port"
    line = refused(capsys, "--port", str(port), "--port-file", str(path))
    assert line == (
        f"vla-client: error: --port-file {path}: cannot write it (No such file or directory)\n"
    )
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", port))  # closed again: the port is free


def test_weights_that_are_not_a_state_dict_are_one_line(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    weights = tmp_path / "weights.pt"
    weights.write_text("root:x:0:0:root:/root:/bin/bash\n")
    for layout in ((), ("--in-process",)):
        completed = subprocess.run(
            [sys.executable, "-m", "vla_client.cli", "serve", "--policy", "torch",
             "--weights", str(weights), "--port", str(load_test.free_port()), *layout],
            capture_output=True, text=True, timeout=120, check=False,
        )  # fmt: skip
        assert completed.returncode == 2, completed.stderr
        assert completed.stderr.startswith(
            f"vla-client: error: --weights {weights}: policy failed to load: "
        )
        assert completed.stderr.count("\n") == 1, completed.stderr


def test_help_shows_every_default() -> None:
    parser = build_parser()
    serve = parser._subparsers._group_actions[0].choices["serve"]  # type: ignore[union-attr]
    # Compared without white space: argparse wraps lines at hyphens too (vllm- omni).
    text = "".join(serve.format_help().split())
    for option in serve._actions:
        if option.option_strings and option.dest != "help":
            help_text = " ".join((option.help or "").split()) % {"default": option.default}
            assert "(default: " in help_text, option.option_strings
            assert "".join(help_text.split()) in text, option.option_strings
