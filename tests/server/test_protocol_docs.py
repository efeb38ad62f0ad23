"""docs/real-servers.md's "Try them without a GPU": each ``vla-client serve --protocol`` command
run as the page writes it, then the page's own example for that family against it.

The command runs as a subprocess with its environment as written (GR00T's ``VLA_CLIENT_API_KEY``),
and with free ports appended (``--port``, and GR00T's ``--protocol-port``), as the test suite
may not take fixed ones. The family's example is the Python block the page runs against the
family's server elsewhere (tests/client/test_gr00t.py and its kin), exec'd with the URL's host
and port replaced by the local server's: everything else as written.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from serve_process import wait_until_healthy

import vla_client

ROOT = Path(__file__).resolve().parents[2]
PAGE = (ROOT / "docs" / "real-servers.md").read_text()
COMMAND = re.compile(
    r"<!-- run by tests/server/test_protocol_docs.py: ([\w-]+) -->\n```bash\n(.*?)```", re.S
)
EXAMPLE = {
    "gr00t": "<!-- run against a GR00T server: tests/client/test_gr00t.py -->",
    "vllm-omni": "<!-- run against a vLLM-Omni server: tests/client/test_vllm_omni.py -->",
    "roboarena": "<!-- run against a RoboArena server: tests/client/test_roboarena.py -->",
}


def commands() -> dict[str, str]:
    """Family -> its serve command, its continuation lines joined and its comments dropped."""
    found = {}
    for family, block in COMMAND.findall(PAGE):
        lines = [line for line in block.splitlines() if not line.startswith("#")]
        found[family] = " ".join(line.rstrip("\\").strip() for line in lines)
    assert set(found) == set(EXAMPLE)
    return found


def example(family: str) -> str:
    """The page's example for `family`: the Python block after its marker."""
    start = PAGE.index(EXAMPLE[family]) + len(EXAMPLE[family])
    match = re.match(r"\n```python\n(.*?)```", PAGE[start:], re.S)
    assert match is not None, family
    return match.group(1)


def free_port() -> int:
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.fixture(params=sorted(EXAMPLE))
def served(request: pytest.FixtureRequest) -> Iterator[tuple[str, str]]:
    """(family, the URL its example should use) with the page's command serving it."""
    family = request.param
    if family == "gr00t":
        pytest.importorskip("zmq")
    words = shlex.split(commands()[family])
    env = dict(os.environ)
    while "=" in words[0]:
        name, _, value = words.pop(0).partition("=")
        env[name] = value
    assert words[0] == "vla-client"
    source = str(Path(vla_client.__file__).resolve().parents[1])
    env["PYTHONPATH"] = os.pathsep.join([source, env.get("PYTHONPATH", "")])
    port = free_port()
    ports = ["--port", str(port)]
    url = {"vllm-omni": f"ws://localhost:{port}", "roboarena": f"ws://localhost:{port}"}.get(family)
    if family == "gr00t":
        zmq_port = free_port()
        ports += ["--protocol-port", str(zmq_port)]
        url = f"tcp://localhost:{zmq_port}"
    server = subprocess.Popen(
        [sys.executable, "-m", "vla_client.cli", *words[1:], *ports],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
    )  # fmt: skip
    try:
        wait_until_healthy(port, server)
        yield family, str(url)
    finally:
        server.terminate()
        server.communicate(timeout=30)


def test_each_familys_example_runs_against_the_pages_command(served: tuple[str, str]) -> None:
    family, url = served
    code = example(family)
    written = re.search(r'URL = "(\w+://[^/"]+)', code)
    assert written is not None
    code = code.replace(written.group(1), url)
    namespace: dict[str, object] = {}
    exec(compile(code, f"real-servers.md ({family})", "exec"), namespace)
    assert namespace["client"] is not None  # the example ran to its end
    checks = {
        "gr00t": lambda: namespace["arm"].shape == (16, 6),  # type: ignore[attr-defined]
        "vllm-omni": lambda: namespace["joints"].shape == (16, 7),  # type: ignore[attr-defined]
        "roboarena": lambda: namespace["chunk"].shape == (16, 8),  # type: ignore[attr-defined]
    }
    assert checks[family](), family


@pytest.mark.parametrize(
    ("args", "line"),
    [
        (
            ["--protocol", "roboarena"],
            "vla-client: error: --protocol roboarena: RoboArena's actions are (N, 8), 7 joints "
            "then the gripper; this policy's have 7 values (serve one of 8: --action-dim 8 for "
            "the reference policy)",
        ),
        (
            ["--protocol", "gr00t", "--state-dim", "7", "--state-split", "arm=6"],
            "vla-client: error: --protocol gr00t: the state split {'arm': 6} adds up to 6; the "
            "policy's state has 7",
        ),
        (
            ["--protocol", "vllm-omni", "--action-split", "a=3"],
            "vla-client: error: --protocol vllm-omni: the action split {'a': 3} adds up to 3; the "
            "policy's action has 7",
        ),
        (
            ["--protocol", "grpc"],
            "vla-client: error: --protocol must be one of gr00t, vllm-omni, roboarena, got 'grpc'",
        ),
        (
            ["--state-split", "arm=6"],
            "vla-client: error: --state-split is for --protocol gr00t; drop it or serve that "
            "protocol",
        ),
        (
            ["--protocol", "roboarena", "--action-dim", "8", "--action-split", "a=8"],
            "vla-client: error: --action-split is for --protocol gr00t or --protocol vllm-omni; "
            "drop it or serve that protocol",
        ),
        (
            ["--protocol", "gr00t", "--api-servers", "2"],
            "vla-client: error: --protocol gr00t serves one ZeroMQ socket; drop --api-servers",
        ),
    ],
)
def test_a_family_that_cannot_carry_the_policy_is_one_line_before_it_starts(
    args: list[str], line: str, capsys: pytest.CaptureFixture[str]
) -> None:
    from vla_client.cli import main

    assert main(["serve", "--port", str(free_port()), *args]) == 2
    assert capsys.readouterr().err.strip() == line
