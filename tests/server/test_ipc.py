"""``ipc://`` against a real server in the default layout (a worker process reading the
client's shared memory): the same chunk, digests and timings as over HTTP, every client option,
both clients, the control loop, the socket's and segments' permissions and the API key."""

from __future__ import annotations

import asyncio
import os
import socket
import stat
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from vla_client import ActionClient, AsyncActionClient, ClientOptions, Observation
from vla_client.control import ChunkExecutor, ControlLoop
from vla_client.errors import (
    ConnectError,
    DeadlineExceededError,
    ProtocolError,
    ServerError,
)
from vla_client.protocol.ipc import Answer, FrameLayout, Infer, decode_answer, framed
from vla_client.segments import SEGMENT_PREFIX
from vla_client.server import LocalServer, ReferencePolicy, ServerConfig, create_app
from vla_client.server.worker import WorkerRunner
from vla_client.transports import NO_RETRY, RetryPolicy

RNG = np.random.default_rng(7)


def observation(height: int = 90, width: int = 160) -> Observation:
    frames = {n: RNG.integers(0, 256, (height, width, 3), dtype=np.uint8) for n in "abc"}
    return Observation(frames, state=np.arange(7, dtype=np.float32), task="pick")


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[LocalServer, str]]:
    """The reference policy in its worker process, on a port and at ``ipc://``."""
    path = str(tmp_path_factory.mktemp("ipc") / "s.sock")
    config = ServerConfig(port=0, ipc_path=path)
    with LocalServer(create_app(ReferencePolicy(), config)) as server:
        assert isinstance(server.app.state.pipeline.runner, WorkerRunner)
        yield server, path


def mine(pid: int | None = None) -> set[str]:
    """This process's (or `pid`'s) client segments in /dev/shm: other runs share the machine."""
    pid = os.getpid() if pid is None else pid
    return {
        name
        for name in os.listdir("/dev/shm")
        if name.startswith(f"{SEGMENT_PREFIX}c") and name.split("_")[2] == str(pid)
    }


def test_the_chunk_digests_and_stages_are_http_s(served):
    server, path = served
    sent = observation()
    runtime = {"return_timing": True}
    with (
        ActionClient(f"ipc://{path}") as ipc,
        ActionClient(server.url, encoding="raw", wire="msgpack") as http,
    ):
        over_ipc = ipc.infer(sent, return_digest=True, runtime=runtime, seed=3)
        over_http = http.infer(sent, return_digest=True, runtime=runtime, seed=3)
    np.testing.assert_array_equal(over_ipc.actions, over_http.actions)
    assert over_ipc.digests == over_http.digests == over_ipc.sent_digests
    assert set(over_ipc.timings.server) == set(over_http.timings.server)
    assert over_ipc.timings.server["inference_ms"] > 0
    assert over_ipc.timings.bytes_sent > sum(f.nbytes for f in sent.images.values())


def test_the_async_client_gets_the_same_chunk(served):
    server, path = served
    sent = observation()

    async def both() -> tuple[np.ndarray, np.ndarray]:
        async with AsyncActionClient(f"ipc://{path}") as ipc:
            first = await ipc.infer(sent)
            second = await ipc.infer(sent)  # the same connection and segment again
        return first.actions, second.actions

    first, second = asyncio.run(both())
    with ActionClient(server.url) as http:
        expected = http.infer(sent).actions
    np.testing.assert_array_equal(first, expected)
    np.testing.assert_array_equal(second, expected)
    assert mine() == set()  # closed: its segments are unlinked


def test_a_resized_frame_is_what_the_server_sees(served):
    server, path = served
    sent = observation(120, 200)
    options = {"resize": "pad", "image_size": (64, 96), "camera_map": {"a": "left"}}
    with (
        ActionClient(f"ipc://{path}", **options) as ipc,
        ActionClient(server.url, encoding="raw", wire="msgpack", **options) as http,
    ):
        over_ipc = ipc.infer(sent, return_digest=True)
        over_http = http.infer(sent, return_digest=True)
        fitted = ipc.fit(sent)
    np.testing.assert_array_equal(over_ipc.actions, over_http.actions)
    assert set(over_ipc.digests) == {"left", "b", "c"}
    assert over_ipc.digests == over_http.digests == over_ipc.sent_digests
    assert fitted.images["left"].shape == (64, 96, 3)


def test_a_segment_is_reused_until_a_call_fails(served):
    _, path = served
    with ActionClient(f"ipc://{path}", deadline_s=30) as client:
        client.infer(observation())
        client.infer(observation())
        assert len(mine()) == 1  # one segment, kept for the next call
        (kept,) = mine()
        with pytest.raises(ServerError) as refused:
            client.infer(observation(), action_horizon=10_000)
        assert refused.value.status_code == 400
        assert kept not in mine()  # a failed call's segment is not reused
        client.infer(observation())
        assert client.stats.sent == 4
        client.reset()
    assert mine() == set()


def test_options_refused_over_ipc_name_what_is_valid(served):
    _, path = served
    with pytest.raises(ValueError, match="leave encoding and wire unset"):
        ActionClient(f"ipc://{path}", encoding="png")
    with pytest.raises(ValueError, match="ipc://PATH"):
        ActionClient(f"ipc://{path}", endpoint="openpi")
    with pytest.raises(ValueError, match="ipc://PATH"):
        ActionClient("ipc://")
    with pytest.raises(ValueError, match="ipc://PATH URL with no endpoint"):
        ActionClient(f"ipc://{path}", transport="http")
    with pytest.raises(ValueError, match="ipc://PATH URL with no endpoint"):
        ActionClient("http://127.0.0.1:8000", transport="ipc")
    options = ClientOptions(layout="droid")
    with pytest.raises(ValueError, match="layout is for openpi's endpoint"):
        options.for_transport(websocket=False, openpi=False, ipc=True)
    filled = ClientOptions().for_transport(websocket=False, openpi=False, ipc=True)
    assert (filled.encoding, filled.wire) == ("raw", "msgpack")


def test_a_deadline_bounds_the_call(served):
    _, path = served
    with (
        ActionClient(f"ipc://{path}", deadline_s=1e-4) as client,
        pytest.raises(DeadlineExceededError),
    ):
        client.infer(observation(360, 640))
    assert mine() == set()


def test_the_control_loop_runs_over_ipc(served):
    _, path = served
    with ActionClient(f"ipc://{path}") as client:
        executor = ChunkExecutor(client.infer)
        applied: list[np.ndarray] = []

        def apply_action(action: np.ndarray) -> None:
            applied.append(action)
            if executor.stats.chunks_received >= 3:
                loop.stop()

        loop = ControlLoop(
            observe=lambda: observation(), executor=executor, apply_action=apply_action,
            rate_hz=50,
        )  # fmt: skip
        try:
            loop.run(ticks=1000)
        finally:
            executor.close(5)
    assert executor.stats.chunks_received >= 3 and executor.stats.errors == 0
    assert applied and all(a.shape == (7,) for a in applied)


def test_the_socket_and_segments_are_the_server_user_s_only(served):
    _, path = served
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    assert stat.S_ISSOCK(os.stat(path).st_mode)
    with ActionClient(f"ipc://{path}") as client:
        client.infer(observation())
        (name,) = mine()
        assert stat.S_IMODE(os.stat(f"/dev/shm/{name}").st_mode) == 0o600


def test_the_api_key_is_checked_on_the_socket(tmp_path):
    path = str(tmp_path / "k.sock")
    config = ServerConfig(port=0, ipc_path=path, api_key="sesame-1234")
    with LocalServer(create_app(ReferencePolicy(), config)):
        with ActionClient(f"ipc://{path}", api_key="wrong") as client:
            with pytest.raises(ServerError) as refused:
                client.infer(observation())
            assert refused.value.status_code == 401
            assert mine() == set()
        with ActionClient(f"ipc://{path}", api_key="sesame-1234") as client:
            assert client.infer(observation()).actions.shape == (16, 7)


def raw_request(path: str, infer: Infer) -> Answer:
    """One request sent by hand, its answer."""
    with socket.socket(socket.AF_UNIX) as sock:
        sock.connect(path)
        sock.settimeout(30)
        reader = sock.makefile("rb")
        reader.read(int.from_bytes(reader.read(4), "big"))  # the greeting
        sock.sendall(framed(infer))
        return decode_answer(reader.read(int.from_bytes(reader.read(4), "big")))


def test_a_client_cannot_name_another_process_s_segment(served):
    _, path = served
    with ActionClient(f"ipc://{path}") as client:
        client.infer(observation())
        (name,) = mine()
        stolen = name.replace(f"_{os.getpid()}_", f"_{os.getppid()}_")
        for segment in (stolen, "vlac_1_abc_0_1", "../etc/passwd"):
            answer = raw_request(path, Infer(b"\x80", segment, (FrameLayout("a", (2, 2, 3), 0),)))
            assert answer.status in (400, 422), answer
        # a name of its own that is not in the server's /dev/shm (another container's)
        elsewhere = name.rsplit("_", 1)[0] + "_999"
        answer = raw_request(path, Infer(b"\x80", elsewhere, (FrameLayout("a", (2, 2, 3), 0),)))
        assert answer.status == 400 and b"--ipc=host" in answer.body
        # its own segment, but a frame that runs past its end
        body = client.transport.frames._idle[0].size
        answer = raw_request(path, Infer(b"\x80", name, (FrameLayout("a", (body, 2, 3), 0),)))
        assert answer.status == 400 and b"past the end" in answer.body


def test_a_path_that_is_no_server_is_one_error_naming_it(tmp_path):
    missing = tmp_path / "none.sock"
    with (
        ActionClient(f"ipc://{missing}", retry=NO_RETRY, timeout_s=5) as client,
        pytest.raises(ConnectError, match=str(missing)),
    ):
        client.metadata()
    other = tmp_path / "other.sock"
    with socket.socket(socket.AF_UNIX) as listener:
        listener.bind(str(other))
        listener.listen()

        with ActionClient(f"ipc://{other}", timeout_s=2) as client:
            answered = _answer_once(listener, b"HTTP/1.1 400 Bad Request\r\n\r\n")
            with pytest.raises(ProtocolError, match=f"{other} is not a vla-client server"):
                client.metadata()
            answered.join(5)


def _answer_once(listener: socket.socket, reply: bytes):
    import threading

    def serve() -> None:
        conn, _ = listener.accept()
        with conn:
            conn.sendall(reply)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    return thread


def test_the_cli_names_the_path_in_one_line(tmp_path, capsys):
    from vla_client.cli import main

    missing = tmp_path / "none.sock"
    code = main(["metadata", f"ipc://{missing}", "--timeout", "2"])
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if line.strip()]
    assert code != 0 and len(lines) == 1, err
    assert lines[0].startswith("vla-client: error: ") and str(missing) in lines[0]


def test_a_stale_socket_is_replaced_and_a_live_one_refused(tmp_path):
    path = tmp_path / "stale.sock"
    stale = socket.socket(socket.AF_UNIX)
    stale.bind(str(path))
    stale.close()  # the file stays, nobody listens: what a killed server leaves
    config = ServerConfig(port=0, ipc_path=str(path))
    with LocalServer(create_app(ReferencePolicy(), config)):
        with ActionClient(f"ipc://{path}") as client:
            assert client.infer(observation()).actions.shape == (16, 7)
        from vla_client.server.edge.ipc import bind_private

        with pytest.raises(ValueError, match="another server listens there"):
            bind_private(str(path))
    assert not Path(path).exists()  # the server removes its socket when it stops


@pytest.mark.parametrize("where", ["file", "missing/s.sock"])
def test_serve_refuses_an_unusable_ipc_path_in_one_line(tmp_path, capsys, where):
    from vla_client.cli import main

    (tmp_path / "file").write_text("not a socket")
    path = tmp_path / where
    code = main(["serve", "--port", "18999", "--ipc", str(path)])
    lines = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert code == 2 and len(lines) == 1, lines
    assert lines[0].startswith("vla-client: error: --ipc ") and str(path) in lines[0]


def test_the_in_process_layout_reads_the_frames_in_place_too(tmp_path):
    path = str(tmp_path / "t.sock")
    config = ServerConfig(port=0, ipc_path=path, in_process=True)
    sent = observation()
    with LocalServer(create_app(ReferencePolicy(), config)) as server:
        with ActionClient(f"ipc://{path}") as ipc, ActionClient(server.url) as http:
            over_ipc = ipc.infer(sent, return_digest=True)
            np.testing.assert_array_equal(over_ipc.actions, http.infer(sent).actions)
        assert over_ipc.digests == over_ipc.sent_digests
    assert mine() == set()


class SlowToLoad(ReferencePolicy):
    """The reference policy, a second to load: the server answers 503 and Retry-After until."""

    def load(self) -> None:
        time.sleep(1.0)


def test_a_loading_server_s_503s_are_retried_as_over_http(tmp_path):
    path = str(tmp_path / "w.sock")
    config = ServerConfig(port=0, ipc_path=path, in_process=True)
    server = LocalServer(create_app(SlowToLoad(), config)).start(wait_ready=False)
    try:
        with ActionClient(f"ipc://{path}", retry=RetryPolicy(warm_up_s=30)) as client:
            assert client.infer(observation()).actions.shape == (16, 7)
            assert client.stats.retries >= 1  # the 503s while it loaded
    finally:
        server.stop()


@pytest.mark.parametrize("how", ["reset", "closed"])
def test_a_server_that_drops_the_connection_mid_exchange_is_a_connect_error(tmp_path, how):
    """A server killed mid-request resets the connection: that is the client's `ConnectError`,
    never the socket's own `ConnectionResetError`."""
    import struct
    import threading

    from vla_client.protocol.ipc import GREETING, VERSION, Hello

    path = str(tmp_path / "drop.sock")
    listener = socket.socket(socket.AF_UNIX)
    listener.bind(path)
    listener.listen()

    def serve() -> None:
        conn, _ = listener.accept()
        conn.sendall(framed(Hello(GREETING, VERSION)))
        conn.recv(4)  # the request has begun
        if how == "reset":
            conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        conn.close()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        with (
            ActionClient(f"ipc://{path}", check_contract=False, retry=NO_RETRY) as client,
            pytest.raises(ConnectError, match="ipc://"),
        ):
            client.infer(observation())
        assert mine() == set()  # the failed call's segment is unlinked
    finally:
        thread.join(5)
        listener.close()
