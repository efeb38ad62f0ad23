"""GR00T's server not there, or not GR00T's: said fast, with what to check (issue 45, item 3).

ZeroMQ keeps trying an address where nothing listens, silently; the client used to wait the whole
reply timeout (31.9 s for ``vla-client send`` and its 30 s) to say ``no reply``. Its monitor tells
what the attempts meet, so a call waits `connect_timeout_s` (5 s by default) for the connection
to open and then names the reason. And a flat state of one value per state key needs no split;
any other flat state's error names ``--state-split KEY=DIM``.
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator

import numpy as np
import pytest

from gr00t_server import Gr00tServer, from_bytes
from vla_client import ActionClient, Observation
from vla_client.cli import main
from vla_client.errors import ConnectError

pytest.importorskip("zmq")

FRAME = np.zeros((8, 8, 3), np.uint8)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def test_send_to_a_port_where_nothing_listens_says_so_and_what_to_do(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The command as a user types it, with its 30 s reply timeout: the refusal comes after the
    connection wait (5 s), naming the port, GR00T's server and the flag for a longer wait."""
    port = free_port()
    started = time.monotonic()
    code = main(["send", f"tcp://127.0.0.1:{port}"])
    took = time.monotonic() - started
    err = capsys.readouterr().err
    assert code == 1
    assert err.strip() == (
        f"vla-client: error: nothing answers at tcp://127.0.0.1:{port} (waited 5 s): connection "
        f"refused, nothing listens on port {port} of 127.0.0.1; start GR00T's server there or "
        "give the address of a running one (its default port is 5555); a server still "
        "starting: wait longer with connect_timeout_s= (--connect-timeout on the command line)"
    )
    assert took < 30  # not the reply timeout it used to wait out


def test_connect_timeout_sets_the_wait(capsys: pytest.CaptureFixture[str]) -> None:
    port = free_port()
    code = main(["metadata", f"tcp://127.0.0.1:{port}", "--connect-timeout", "0.5"])
    assert code == 1
    assert f"nothing answers at tcp://127.0.0.1:{port} (waited 0.5 s)" in capsys.readouterr().err


def test_a_server_that_starts_within_the_wait_answers(capsys: pytest.CaptureFixture[str]) -> None:
    """The wait is for a server still starting: one that binds during it is used."""
    port = free_port()
    done = threading.Event()

    def serve() -> None:
        time.sleep(0.5)
        with Gr00tServer(port=port):
            done.wait(30)

    thread = threading.Thread(target=serve)
    thread.start()
    try:
        code = main(["send", f"tcp://127.0.0.1:{port}", "--connect-timeout", "20",
                     "--state", "0.1,0.2"])  # fmt: skip
    finally:
        done.set()
        thread.join()
    assert code == 0, capsys.readouterr().err


def test_connect_timeout_is_for_gr00ts_server_only(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["send", "http://127.0.0.1:8000", "--connect-timeout", "1"]) == 2
    assert "--connect-timeout is for GR00T's server (tcp:// URLs)" in capsys.readouterr().err
    with pytest.raises(ValueError, match="connect_timeout_s is for GR00T's server"):
        ActionClient("http://127.0.0.1:8000", connect_timeout_s=1)
    with pytest.raises(ValueError, match="connect_timeout_s must be a number > 0"):
        ActionClient("tcp://127.0.0.1:5555", connect_timeout_s=0)


def test_python_callers_get_the_same_connect_error() -> None:
    port = free_port()
    client = ActionClient(f"tcp://127.0.0.1:{port}", timeout_s=30, connect_timeout_s=0.3)
    with client, pytest.raises(ConnectError) as refused:
        client.metadata()
    assert f"nothing listens on port {port} of 127.0.0.1" in str(refused.value)
    assert refused.value.sent is False


def test_a_server_gone_between_calls_is_said_as_fast() -> None:
    """A server that stopped after answering: the next call's attempts are refused, and said so
    after the connection wait, not the reply timeout."""
    with Gr00tServer() as server:
        client = ActionClient(server.url, timeout_s=30, connect_timeout_s=0.5)
        client.metadata()
    started = time.monotonic()
    # Which the client meets first depends on when ZeroMQ notices the server gone: its
    # connection dropped under the call, or the call's attempts refused.
    with client, pytest.raises(ConnectError, match=r"nothing listens on port|dropped the conn"):
        client.reset()
    assert time.monotonic() - started < 15, "said after the connection wait, not the 30 s"


@pytest.fixture
def stranger() -> Iterator[int]:
    """A TCP server on a free port that answers anything with an HTTP error and hangs up (an
    ordinary web server on the port given)."""
    listener = socket.create_server(("127.0.0.1", 0))
    stop = threading.Event()

    def answer() -> None:
        listener.settimeout(0.1)
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except TimeoutError:
                continue
            with conn:
                conn.recv(64)
                conn.sendall(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n")

    thread = threading.Thread(target=answer)
    thread.start()
    yield int(listener.getsockname()[1])
    stop.set()
    thread.join()
    listener.close()


def test_a_port_where_another_kind_of_server_answers_is_named_at_once(
    stranger: int, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(["send", f"tcp://127.0.0.1:{stranger}", "--connect-timeout", "30"])
    assert code == 1
    assert capsys.readouterr().err.strip() == (
        f"vla-client: error: tcp://127.0.0.1:{stranger} answered, but not as a ZeroMQ server: it "
        "is not GR00T's policy server; check the port (GR00T's server listens on 5555 unless "
        "told otherwise)"
    )


def test_a_port_that_accepts_and_says_nothing_is_named_after_the_wait() -> None:
    with socket.create_server(("127.0.0.1", 0)) as listener:
        port = listener.getsockname()[1]
        client = ActionClient(f"tcp://127.0.0.1:{port}", connect_timeout_s=0.3)
        with client, pytest.raises(ConnectError) as refused:
            client.metadata()
    assert str(refused.value) == (
        f"tcp://127.0.0.1:{port} accepted the connection but did not speak ZeroMQ within 0.3 s: "
        "it is not GR00T's policy server; check the port"
    )


def test_a_state_of_one_value_per_key_is_sent_without_a_split(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with Gr00tServer() as server:  # state keys arm and gripper
        code = main(["send", server.url, "--state", "0.25,-1"])
        assert code == 0, capsys.readouterr().err
        sent = from_bytes(server.frames[-1])["data"]["observation"]["state"]
        with ActionClient(server.url) as client:
            client.infer(Observation({"front": FRAME, "wrist": FRAME}, state=[3.0, 4.0]))
        again = from_bytes(server.frames[-1])["data"]["observation"]["state"]
    assert {key: part.tolist() for key, part in sent.items()} == {
        "arm": [[[0.25]]],
        "gripper": [[[-1.0]]],
    }
    assert {key: part.tolist() for key, part in again.items()} == {
        "arm": [[[3.0]]],
        "gripper": [[[4.0]]],
    }


def test_a_flat_state_without_its_split_names_the_flag_and_the_keyword(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with Gr00tServer() as server:
        code = main(["send", server.url, "--state", "0,0,0,0,0,0,0"])
        with ActionClient(server.url) as client, pytest.raises(ValueError) as refused:
            client.infer(Observation({"front": FRAME, "wrist": FRAME}, state=np.zeros(7)))
    assert code == 1
    hint = "say how many of the 7 values each key takes, in the vector's order: "
    err = capsys.readouterr().err.strip()
    assert err.endswith(hint + "--state-split arm=DIM --state-split gripper=DIM")
    assert str(refused.value).endswith(hint + "state_split={'arm': DIM, 'gripper': DIM}")
