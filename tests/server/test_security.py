"""What a lab network needs: loopback, API key, limits, timeouts, no tracebacks, no pickle."""

from __future__ import annotations

import logging
import os
import pickle
import re
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import numpy as np
import pytest
from served import LAYOUTS, Resources, serve
from websockets.exceptions import ConnectionClosed, InvalidStatus
from websockets.sync.client import connect

from vla_client.cli.serve import is_loopback
from vla_client.client import ActionClient
from vla_client.errors import ServerError, VLAClientError
from vla_client.observation import Observation
from vla_client.protocol import DecodeLimits, encode_request
from vla_client.server import LocalServer, ReferencePolicy, ServerConfig, create_app
from vla_client.server.config import WorkerSettings
from vla_client.server.edge.auth import check_api_key
from vla_client.server.policy import PolicyInput

KEY = "k3y-for-tests"
QUEUE = 8
FRAME = np.full((32, 32, 3), 90, np.uint8)
OBSERVATION = Observation({"cam": FRAME}, state=[0.5], task="reach")


def _serve(
    policy: ReferencePolicy | None = None, layout: str = "in_process", **settings: object
) -> LocalServer:
    return serve(policy or ReferencePolicy(), layout, **settings)


@pytest.fixture(scope="module", params=LAYOUTS)
def keyed(request: pytest.FixtureRequest) -> Iterator[LocalServer]:
    """A server with an API key and small limits, in the worker layout and in-process."""
    server = _serve(
        layout=request.param,
        api_key=KEY,
        max_body_bytes=256 * 1024,
        max_ws_message_bytes=64 * 1024,
        limits=DecodeLimits(max_cameras=2, max_image_pixels=64 * 64),
        worker=WorkerSettings(queue_size=QUEUE),
    )
    yield server
    server.stop()


@pytest.fixture(autouse=True)
def nothing_left_behind(request: pytest.FixtureRequest) -> Iterator[None]:
    """After each test on the keyed server: no slot held, no descriptor or segment left."""
    if "keyed" not in request.fixturenames:
        yield
        return
    server = request.getfixturevalue("keyed")
    resources = Resources(keep=QUEUE, server=server)
    yield
    resources.check()


def _post(url: str, body: bytes, content_type: str, key: str | None = KEY) -> httpx.Response:
    headers = {"Content-Type": content_type}
    if key:
        headers["Authorization"] = f"Bearer {key}"
    return httpx.post(f"{url}/v1/actions/generations", content=body, headers=headers, timeout=10)


def test_defaults_are_loopback_without_key() -> None:
    config = ServerConfig()
    assert config.host == "127.0.0.1" and config.api_key is None
    assert KEY not in repr(ServerConfig(api_key=KEY))
    assert is_loopback("127.0.0.1") and is_loopback("::1") and is_loopback("localhost")
    assert not is_loopback("0.0.0.0") and not is_loopback("192.168.1.5")


@pytest.mark.parametrize(
    ("headers", "ok"),
    [
        ({"authorization": f"Bearer {KEY}"}, True),
        ({"Authorization": f"bearer {KEY}"}, True),
        ({"authorization": f"Api-Key {KEY}"}, True),
        ({"authorization": f"Bearer {KEY}x"}, False),
        ({"authorization": f"Bearer {KEY[:-1]}"}, False),
        ({"authorization": f"Basic {KEY}"}, False),
        ({"authorization": KEY}, False),
        ({"authorization": "Bearer "}, False),
        ({}, False),
    ],
)
def test_check_api_key(headers: dict[str, str], ok: bool) -> None:
    assert check_api_key(headers, KEY) is ok
    assert check_api_key(headers, None)


def test_every_route_but_health_needs_the_key(keyed: LocalServer) -> None:
    assert httpx.get(f"{keyed.url}/health").status_code == 200
    for path in ("/v1/actions/metadata", "/openapi.json", "/docs", "/nowhere"):
        reply = httpx.get(f"{keyed.url}{path}")
        assert reply.status_code == 401, path
        assert reply.json() == {"detail": "missing or invalid API key"}
        assert reply.headers["www-authenticate"] == "Bearer"
    body, content_type = encode_request(OBSERVATION)
    assert _post(keyed.url, body, content_type, key=None).status_code == 401
    assert _post(keyed.url, body, content_type, key="wrong").status_code == 401
    assert _post(keyed.url, body, content_type).status_code == 200
    openpi_style = {"Authorization": f"Api-Key {KEY}"}
    assert httpx.get(f"{keyed.url}/v1/actions/metadata", headers=openpi_style).status_code == 200


def test_clients_pass_the_key_and_fail_typed_without_it(keyed: LocalServer) -> None:
    ws_url = keyed.url.replace("http", "ws")
    for url in (keyed.url, ws_url):
        with ActionClient(url, api_key=KEY) as client:
            assert client.infer(OBSERVATION).actions.shape == (16, 7)
        with ActionClient(url, api_key="wrong") as client, pytest.raises(VLAClientError):
            client.infer(OBSERVATION)
    with ActionClient(keyed.url) as client, pytest.raises(ServerError) as caught:
        client.infer(OBSERVATION)
    assert caught.value.status_code == 401


@pytest.mark.parametrize("path", ["/v1/actions/realtime", "/openpi/policy"])
def test_websocket_handshake_refused_without_key(keyed: LocalServer, path: str) -> None:
    url = keyed.url.replace("http", "ws") + path
    with pytest.raises(InvalidStatus) as caught:
        connect(url, open_timeout=5).close()
    assert caught.value.response.status_code == 401
    with connect(url, additional_headers={"Authorization": f"Api-Key {KEY}"}) as ws:
        assert ws.recv(timeout=5)  # the metadata frame


def test_websocket_message_over_the_limit_closes_1009(keyed: LocalServer) -> None:
    url = keyed.url.replace("http", "ws") + "/v1/actions/realtime"
    with connect(url, additional_headers={"Authorization": f"Bearer {KEY}"}) as ws:
        ws.recv(timeout=5)
        ws.send(b"\x00" * (128 * 1024))
        with pytest.raises(ConnectionClosed) as caught:
            ws.recv(timeout=5)
    assert caught.value.rcvd is not None and caught.value.rcvd.code == 1009


def test_limits_answer_413(keyed: LocalServer) -> None:
    big = b"{" + b" " * (300 * 1024) + b"}"
    assert _post(keyed.url, big, "application/json").status_code == 413

    def chunked() -> Iterator[bytes]:  # no Content-Length: the limit holds while reading
        for _ in range(40):
            yield b" " * 10_000

    reply = httpx.post(
        f"{keyed.url}/v1/actions/generations",
        content=chunked(),
        headers={"Authorization": f"Bearer {KEY}", "Content-Type": "application/json"},
    )
    assert reply.status_code == 413
    cameras = Observation({f"c{i}": FRAME for i in range(3)})
    assert _post(keyed.url, *encode_request(cameras)).status_code == 413
    large = Observation({"cam": np.zeros((65, 64, 3), np.uint8)})
    for encoding in ("png", "raw", "pixels"):
        reply = _post(keyed.url, *encode_request(large, encoding=encoding))  # type: ignore[arg-type]
        assert reply.status_code == 413, encoding
        assert "pixels" in reply.json()["detail"]


class _Failing(ReferencePolicy):
    def infer(self, observation: PolicyInput) -> np.ndarray:
        raise RuntimeError("secret detail at /opt/model/weights.bin")


class _Slow(ReferencePolicy):
    def infer(self, observation: PolicyInput) -> np.ndarray:
        time.sleep(1.0)
        return super().infer(observation)


def test_errors_send_no_traceback_and_log_the_request_id(caplog: pytest.LogCaptureFixture) -> None:
    server = _serve(_Failing())
    try:
        with caplog.at_level(logging.ERROR, logger="vla_client.server"):
            body, content_type = encode_request(OBSERVATION, request_id="req-trace-1")
            reply = _post(server.url, body, content_type, key=None)
    finally:
        server.stop()
    assert reply.status_code == 500 and set(reply.json()) == {"detail"}
    assert "Traceback" not in reply.text and 'File "' not in reply.text
    logged = [r for r in caplog.records if "req-trace-1" in r.getMessage()]
    assert logged and 'test_security.py", line' in logged[0].getMessage()  # the traceback stays


def test_unhandled_errors_answer_only_the_request_id(caplog: pytest.LogCaptureFixture) -> None:
    app = create_app(ReferencePolicy(), ServerConfig(in_process=True))

    @app.get("/boom")
    async def boom() -> None:
        raise KeyError("secret internal state")

    with LocalServer(app) as server, caplog.at_level(logging.ERROR, logger="vla_client.server"):
        reply = httpx.get(f"{server.url}/boom", headers={"X-Request-ID": "ignored"})
    assert reply.status_code == 500
    detail = reply.json()["detail"]
    assert detail.startswith("internal server error (request act_") and "secret" not in detail
    request_id = detail.removeprefix("internal server error (request ").rstrip(")")
    assert any(
        request_id in r.getMessage() and "KeyError" in r.getMessage() for r in caplog.records
    )


@pytest.mark.parametrize("layout", LAYOUTS)
def test_slow_inference_answers_504(layout: str) -> None:
    server = _serve(_Slow(), layout, infer_timeout_s=0.2)
    try:
        reply = _post(server.url, *encode_request(OBSERVATION), key=None)
    finally:
        server.stop()
    assert reply.status_code == 504 and "0.2 s" in reply.json()["detail"]


def test_idle_keep_alive_connection_is_closed() -> None:
    server = _serve(idle_timeout_s=1)
    try:
        with socket.create_connection((server.host, server.port), timeout=10) as sock:
            sock.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
            received = b""
            while not received.endswith(b'{"status":"ok"}'):
                received += sock.recv(4096)
            assert received.startswith(b"HTTP/1.1 200")
            start = time.monotonic()
            assert sock.recv(4096) == b""  # the server hung up
            assert time.monotonic() - start < 8
    finally:
        server.stop()


class _Touch:
    """Unpickling this would create a file: the proof that a server ran pickle."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def __reduce__(self) -> tuple[object, tuple[str]]:
        return (Path.touch, (str(self.path),))  # type: ignore[return-value]


def test_pickle_bodies_are_never_loaded(keyed: LocalServer, tmp_path: Path) -> None:
    marker = tmp_path / "pwned"
    payload = pickle.dumps(_Touch(marker))
    for content_type in ("application/msgpack", "application/json", "application/python-pickle"):
        assert _post(keyed.url, payload, content_type).status_code in (400, 415)
    assert not marker.exists()


SOURCES = Path(__file__).resolve().parents[2] / "src" / "vla_client"
HANDOFF = SOURCES / "server" / "worker" / "handoff.py"
UNPICKLING = re.compile(
    r"^\s*(import|from)\s+(c?pickle|cloudpickle|dill|marshal|shelve)\b"
    r"|\b(c?pickle|cloudpickle|dill|marshal|shelve|joblib)\.loads?\("
    r"|\ballow_pickle=True",
    re.MULTILINE,
)


def test_only_the_policy_handoff_pickles_and_only_the_worker_unpacks() -> None:
    """pickle and cloudpickle are imported in one module of the package, the policy's hand-off
    to the worker, whose one reader is the worker's start on its private pipe."""
    modules = list(SOURCES.rglob("*.py"))
    using = sorted(str(p.relative_to(SOURCES)) for p in modules if UNPICKLING.search(p.read_text()))
    assert using == ["server/worker/handoff.py"]
    pipes = [p for p in SOURCES.rglob("*.py") if "multiprocessing" in p.read_text()]
    assert pipes and not [p.name for p in pipes if ".recv()" in p.read_text()]  # recv unpickles
    readers = sorted(
        str(p.relative_to(SOURCES))
        for p in SOURCES.rglob("*.py")
        if p != HANDOFF and "unpack_policy(" in p.read_text()
    )
    assert readers == ["server/worker/process.py"]
    process = (SOURCES / "server" / "worker" / "process.py").read_text()
    assert process.count("unpack_policy(") == 1
    assert "unpack_policy(start.policy)" in process  # the Start message, from the starter only


def _serve_cli_until(line: str, env: dict[str, str], *args: str) -> list[str]:
    """Start ``serve`` with `args`, read stderr until `line` shows (or it exits), then kill it.

    Binding 0.0.0.0 sends nothing anywhere: the server is killed as soon as the line shows.
    """
    process = subprocess.Popen(
        [sys.executable, "-m", "vla_client.cli", "serve", "--port", str(_free_port()), *args],
        env={**_without_key(), **env}, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
        text=True,
    )  # fmt: skip
    lines: list[str] = []
    try:
        assert process.stderr is not None
        for text in process.stderr:
            lines.append(text)
            if line in text:
                break
    finally:
        process.kill()
        process.wait()
    return lines


def _without_key() -> dict[str, str]:
    return {name: value for name, value in os.environ.items() if name != "VLA_CLIENT_API_KEY"}


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def test_cli_warns_when_exposed_without_a_key() -> None:
    exposed = _serve_cli_until("without an API key", {}, "--host", "0.0.0.0")
    assert "without an API key" in exposed[-1], exposed
    keyed = _serve_cli_until("Uvicorn running on", {"VLA_CLIENT_API_KEY": KEY}, "--host", "0.0.0.0")
    assert "Uvicorn running on" in keyed[-1] and not any("without" in x for x in keyed), keyed


@pytest.mark.parametrize(
    ("args", "env", "message"),
    [
        (("--api-key", ""), {}, "vla-client: error: --api-key must not be empty"),
        ((), {"VLA_CLIENT_API_KEY": ""}, "vla-client: error: VLA_CLIENT_API_KEY is set but empty"),
        (("--api-key", " padded"), {}, "vla-client: error: --api-key must be printable ASCII"),
    ],
)
def test_cli_refuses_an_empty_key_in_one_line(args: tuple[str, ...], env: dict[str, str],
                                              message: str) -> None:  # fmt: skip
    completed = subprocess.run(
        [sys.executable, "-m", "vla_client.cli", "serve", "--port", str(_free_port()), *args],
        env={**_without_key(), **env}, capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert completed.returncode == 2
    assert completed.stderr.startswith(message) and completed.stderr.count("\n") == 1
