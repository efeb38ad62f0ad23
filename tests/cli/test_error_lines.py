"""Failures said in the command line's terms, one line each: a contract error names the flag
that fixes it, a web server is called not a VLA server, a remote traceback shrinks to its last
line (all of it with -v), and usage mistakes (a URL without its scheme, a port that cannot
exist, two kinds of frame source) exit 2 before anything is sent."""

from __future__ import annotations

import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import cv2
import numpy as np
import pytest

from vla_client.codecs import msgpack_numpy
from vla_client.server import LocalServer, ReferencePolicy, create_app

REMOTE_TRACEBACK = (
    "Traceback (most recent call last):\n"
    '  File "/srv/policy.py", line 12, in infer\n'
    "    raise ValueError('joint 3 out of range')\n"
    "ValueError: joint 3 out of range\n"
)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture(scope="module")
def web_server_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """``python -m http.server``: answers every path with an HTML page, the action API's too."""
    port = _free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "http.server", str(port), "--bind", "127.0.0.1"],
        cwd=tmp_path_factory.mktemp("www"), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)
        yield f"http://127.0.0.1:{port}"
    finally:
        process.terminate()
        process.wait(timeout=30)


@pytest.fixture(scope="module")
def raising_openpi_url() -> Iterator[str]:
    """A websocket server that behaves as openpi's ``WebsocketPolicyServer`` does when its
    policy raises: the traceback as a text frame, then close code 1011."""
    from websockets.sync.server import serve

    def handler(connection) -> None:  # type: ignore[no-untyped-def]
        connection.send(msgpack_numpy.packb({"policy": "droid-dummy"}))
        for _ in connection:
            connection.send(REMOTE_TRACEBACK)
            connection.close(1011, "Internal server error. Traceback included in previous frame.")

    server = serve(handler, "127.0.0.1", 0)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"ws://127.0.0.1:{server.socket.getsockname()[1]}/openpi/policy"
    finally:
        server.shutdown()
        thread.join(timeout=10)


@pytest.fixture(scope="module")
def strict_size_url() -> Iterator[str]:
    """A reference server that refuses frames other than 48x64."""
    policy = ReferencePolicy(image_size=(48, 64), image_size_required=True)
    with LocalServer(create_app(policy)) as server:
        yield server.url


@pytest.fixture
def png(tmp_path: Path) -> str:
    path = tmp_path / "front.png"
    cv2.imwrite(str(path), np.full((40, 64, 3), 90, np.uint8))
    return str(path)


@pytest.mark.parametrize("command", ["metadata", "send"])
def test_a_web_server_is_not_a_vla_server(cli, error_line, web_server_url, command):
    size = ("--height", "32", "--width", "32") if command == "send" else ()
    run = cli(command, web_server_url, *size)
    assert run.code == 1
    assert error_line(run.err) == (
        f"vla-client: error: {web_server_url} is not a VLA server "
        "(GET /v1/actions/metadata answered text/html)"
    )


def test_bench_says_a_web_server_is_not_a_vla_server(cli, error_line, web_server_url):
    run = cli(
        "bench", web_server_url, "--repeat", "1", "--warmup", "0",
        "--encodings", "raw", "--wires", "msgpack", "--transports", "http",
    )  # fmt: skip
    assert run.code == 1
    assert "is not a VLA server (GET /v1/actions/metadata answered text/html)" in error_line(
        run.err
    )


def test_a_camera_the_server_lacks_names_the_camera_map_flag(cli, error_line, wrist_only_url, png):
    run = cli("send", wrist_only_url, "--image", f"front={png}")
    assert run.code == 1
    line = error_line(run.err)
    assert line.endswith("'front' matches none of them; map it to one, for example "
                         "--camera-map front=wrist")  # fmt: skip
    assert "camera_map" not in line


def test_a_frame_of_the_wrong_size_names_the_resize_flag(cli, error_line, strict_size_url, png):
    run = cli("send", strict_size_url, "--image", f"front={png}", "--resize", "none")
    assert run.code == 1
    assert error_line(run.err).endswith(
        "; resize frames (--resize pad or --resize crop) or send them at that size"
    )
    assert cli("send", strict_size_url, "--image", f"front={png}", "--resize", "pad").code == 0


def test_a_remote_traceback_is_one_line_and_all_of_it_with_verbose(
    cli, error_line, raising_openpi_url
):
    run = cli("send", raising_openpi_url, "--height", "32", "--width", "32")
    assert run.code == 1
    assert error_line(run.err) == (
        "vla-client: error: server answered 500: ValueError: joint 3 out of range "
        "(-v shows the server's detail)"
    )
    verbose = cli("-v", "send", raising_openpi_url, "--height", "32", "--width", "32")
    assert verbose.code == 1
    assert REMOTE_TRACEBACK.strip() in verbose.err


@pytest.mark.parametrize(
    ("args", "reason"),
    [
        (("send", "localhost:18007"), "such as http://localhost:18007"),
        (("metadata", "127.0.0.1:8000"), "such as http://127.0.0.1:8000"),
        (("send", "http://127.0.0.1:99999"), "the port must be in 1..65535"),
        (("metadata", "ws://127.0.0.1:0"), "the port must be in 1..65535"),
        (("send", "ftp://127.0.0.1:8000"), "takes an http, https, ws, wss, tcp or ipc URL"),
        (("send", "--camera", "front=0", "--image", "side=x.png"), "not cameras and images"),
        (("record", "out.vlaobs", "--camera", "front=0", "--image", "side=x.png"), "not cameras"),
    ],
)
def test_usage_mistakes_exit_2_with_one_line(cli, usage_error, args, reason):
    assert reason in usage_error(cli(*args))
