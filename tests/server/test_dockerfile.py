"""The Dockerfile, checked where no docker daemon is: its build arguments, what it copies, and
its entrypoint and health check run here as the image would run them. Where a daemon answers
(`docker info`), the image is built and served too."""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
from serve_process import wait_until_healthy

import vla_client

if sys.version_info >= (3, 11):
    import tomllib
else:  # the server extra installs it there
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))
from load_test import free_port  # noqa: E402


def instructions() -> list[tuple[str, str]]:
    """``(INSTRUCTION, arguments)`` in order, continuation lines joined, comments dropped."""
    text = (ROOT / "Dockerfile").read_text()
    lines = [line for line in text.splitlines() if not line.lstrip().startswith("#")]
    joined = re.sub(r"\\\n", " ", "\n".join(lines))
    found = []
    for line in joined.splitlines():
        if line.strip():
            instruction, _, arguments = line.strip().partition(" ")
            found.append((instruction.upper(), arguments.strip()))
    return found


def args() -> dict[str, str]:
    return dict(
        arguments.split("=", 1) if "=" in arguments else (arguments, "")
        for instruction, arguments in instructions()
        if instruction == "ARG"
    )


def only(instruction: str, *, last: bool = False) -> str:
    """The arguments of the Dockerfile's one `instruction` (its last, given `last`)."""
    found = [a for i, a in instructions() if i == instruction]
    if last:
        return found[-1]
    (arguments,) = found
    return arguments


def pyproject() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())


def test_the_base_is_a_build_argument_cpu_by_default_cuda_when_given() -> None:
    assert only("FROM") == "${BASE_IMAGE}"
    base = args()["BASE_IMAGE"]
    version = re.fullmatch(r"python:(3\.\d+)-slim", base)
    assert version, f"the default base is a CPU Python image, got {base}"
    floor = pyproject()["project"]["requires-python"].removeprefix(">=")
    assert tuple(map(int, version[1].split("."))) >= tuple(map(int, floor.split(".")))
    header = (ROOT / "Dockerfile").read_text()
    assert "--build-arg BASE_IMAGE=nvidia/cuda:" in header, "the CUDA build is shown"
    # A CUDA base has no Python: the image installs the distribution's when there is none.
    run = next(a for i, a in instructions() if i == "RUN")
    assert "command -v python3" in run and "python3-venv" in run


def test_the_extras_installed_are_the_packages_own() -> None:
    extras = pyproject()["project"]["optional-dependencies"]
    assert args()["EXTRAS"] == "server"
    assert {"server", "torch"} <= set(extras), "the extras the Dockerfile names exist"
    assert 'pip install ".[${EXTRAS}]"' in " ".join(a for i, a in instructions() if i == "RUN")


def test_what_the_image_copies_exists_and_is_not_ignored() -> None:
    copied = [shlex.split(a)[:-1] for i, a in instructions() if i == "COPY"]
    sources = [source for sources in copied for source in sources]
    assert sources == ["pyproject.toml", "README.md", "src"]
    kept = {
        line[1:] for line in (ROOT / ".dockerignore").read_text().splitlines() if line[:1] == "!"
    }
    for source in sources:
        assert (ROOT / source).exists() and source in kept, source


PORT_FILE = "/home/vla/serve.port"
"""Where the image's server writes the port it listens on, and its health check reads it."""


def test_the_entrypoint_and_health_check_serve_as_in_the_image(tmp_path: Path) -> None:
    """`docker run IMAGE --port N`: options after the image name follow the entrypoint's, and
    the health check probes the port the server listens on (it reads the server's port file;
    it probed 8000 whatever the port)."""
    entrypoint = json.loads(only("ENTRYPOINT"))  # exec form: signals reach the server
    assert entrypoint == ["vla-client", "serve", "--host", "0.0.0.0", "--port-file", PORT_FILE]
    assert pyproject()["project"]["scripts"]["vla-client"] == "vla_client.cli:main"
    assert only("USER") != "root" and only("EXPOSE") == "8000"
    assert only("WORKDIR", last=True) == str(Path(PORT_FILE).parent), "the user can write there"
    # Run here: the image's options with the port file in a private folder, then what a user
    # adds after the image name: another port (and loopback for this test, not every interface).
    port_file = str(tmp_path / "serve.port")
    port = free_port()
    source = str(Path(vla_client.__file__).resolve().parents[1])
    command = [sys.executable, "-m", "vla_client.cli", *entrypoint[1:]]
    command[command.index(PORT_FILE)] = port_file
    server = subprocess.Popen(
        [*command, "--port", str(port), "--host", "127.0.0.1"],
        env={**os.environ, "PYTHONPATH": source},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        wait_until_healthy(port, server)
        check = only("HEALTHCHECK").split(" CMD ", 1)[1]
        assert PORT_FILE in check and ":8000" not in check
        probe = subprocess.run(
            shlex.split(check.replace(PORT_FILE, port_file)),
            env={**os.environ, "PATH": os.path.dirname(sys.executable)},
            timeout=30,
        )
        assert probe.returncode == 0, "the health check passes on a serving container"
        assert Path(port_file).read_text() == f"{port}\n"
        assert httpx.get(f"http://127.0.0.1:{port}/v1/actions/metadata").status_code == 200
    finally:
        server.terminate()  # what `docker stop` sends
        _, errors = server.communicate(timeout=30)
    assert b"Finished server process" in errors, errors.decode()[-2000:]
    assert not Path(port_file).exists(), "the port file goes with the server"


def test_the_docs_say_how_much_shared_memory_to_give_the_container() -> None:
    assert "--shm-size" in (ROOT / "Dockerfile").read_text()
    guide = (ROOT / "docs" / "server.md").read_text()
    assert "docker run" in guide and "--shm-size" in guide


def docker_unavailable() -> str | None:
    if shutil.which("docker") is None:
        return "no docker command"
    info = subprocess.run(["docker", "info"], capture_output=True, text=True, timeout=60)
    return None if info.returncode == 0 else "no docker daemon answers"


@pytest.mark.skipif(docker_unavailable() is not None, reason="needs a docker daemon")
def test_the_image_builds_and_serves(tmp_path: Path) -> None:
    tag = "vla-client-test:ci"
    subprocess.run(["docker", "build", "-t", tag, str(ROOT)], check=True, timeout=1800)
    port = free_port()
    name = f"vla-client-test-{port}"
    subprocess.run(
        ["docker", "run", "-d", "--rm", "--name", name, "--shm-size=256m",
         "-p", f"127.0.0.1:{port}:8000", tag],
        check=True, timeout=120,
    )  # fmt: skip
    try:
        deadline_s = 120
        for _ in range(deadline_s * 10):
            try:
                if httpx.get(f"http://127.0.0.1:{port}/health", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            subprocess.run(["sleep", "0.1"], check=True)
        assert httpx.get(f"http://127.0.0.1:{port}/health").status_code == 200
    finally:
        subprocess.run(["docker", "stop", name], timeout=60)
