"""The README's quickstart block, pasted as written (issue 45 item 1): ``vla-client serve &``
returns at once and the ``send`` after it runs while the server is still starting; the send
waits for it, saying so, and a server that is really down is still reported."""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CLI = f"{sys.executable} -m vla_client.cli"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def quickstart_lines() -> list[str]:
    """The quickstart's commands that need no camera: ``serve &`` and the first ``send``."""
    block = re.search(r"## Quickstart\n\n```bash\n(.*?)```", (ROOT / "README.md").read_text(), re.S)
    assert block is not None
    lines = [line.split("  #")[0].strip() for line in block.group(1).splitlines()]
    serve = next(line for line in lines if " serve &" in line)
    send = next(line for line in lines if " send " in line)
    return [serve, send]


def run_script(script: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    return subprocess.run(
        ["bash", "-c", script], capture_output=True, text=True, env=env, timeout=300
    )


def test_the_quickstart_block_runs_as_a_script_with_its_ampersand(tmp_path: Path) -> None:
    port = free_port()
    serve, send = quickstart_lines()
    assert serve == ".venv/bin/vla-client serve &", serve
    assert send == ".venv/bin/vla-client send --repeat 20", send
    # as written, but on a free port and with this interpreter's vla-client
    serve = serve.replace(".venv/bin/vla-client serve", f"{CLI} serve --port {port}")
    send = send.replace(".venv/bin/vla-client send", f"{CLI} send http://127.0.0.1:{port}")
    script = f"cd {tmp_path}\n{serve}\nSERVER=$!\n{send}\nCODE=$?\nkill $SERVER\nwait\nexit $CODE\n"
    result = run_script(script)
    assert result.returncode == 0, result.stderr[-3000:]
    assert f"20 request(s) to http://127.0.0.1:{port}" in result.stdout


def test_a_server_that_is_down_is_reported_after_the_wait_it_announced(tmp_path: Path) -> None:
    port = free_port()
    result = run_script(f"{CLI} send http://127.0.0.1:{port} --wait-for-server 0.5")
    assert result.returncode == 1
    waiting, error = result.stderr.splitlines()
    assert waiting == (
        f"vla-client: nothing listens on port {port} of 127.0.0.1 yet; waiting up to 0.5 s "
        "for a server to start there (--wait-for-server SECONDS)"
    )
    assert error.startswith(
        f"vla-client: error: cannot reach the server at http://127.0.0.1:{port}"
    )
    assert "connection refused" in error


def test_no_wait_is_announced_with_wait_for_server_0(tmp_path: Path) -> None:
    port = free_port()
    result = run_script(f"{CLI} metadata http://127.0.0.1:{port} --wait-for-server 0")
    assert result.returncode == 1
    assert result.stderr.startswith("vla-client: error: cannot reach the server"), result.stderr
