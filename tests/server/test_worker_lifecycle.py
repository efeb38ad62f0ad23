"""Starting, stopping and killing the inference worker, and linking to a shared one.

The workers here are real processes (`Lifecycle` writes what they did to a file); a shared
worker's peer is a real Unix socket the test answers on, with the worker's own framing
(`Channel`) and messages, so a link's errors and callbacks can be read exactly. Waits are
bounded generously; no test depends on how fast the machine is.
"""

from __future__ import annotations

import asyncio
import gc
import os
import signal
import socket
import subprocess
import sys
import threading
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from my_policies import Lifecycle
from worker_doubles import SlowToReap

from vla_client.errors import PolicyStartError, WorkerStartError
from vla_client.server.worker.channel import Channel
from vla_client.server.worker.messages import (
    Batch,
    BatchDone,
    Ready,
    StartFailed,
    decode_order,
    encode,
)
from vla_client.server.worker.supervisor import WorkerLink, WorkerProcess
from vla_client.server.worker.threads import worker_threads


@pytest.fixture
def spawned(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[subprocess.Popen[bytes]]]:
    """The worker processes the supervisor starts (real ones), killed when the test ends."""
    started: list[subprocess.Popen[bytes]] = []
    popen = subprocess.Popen

    def record(*args: Any, **kwargs: Any) -> subprocess.Popen[bytes]:
        started.append(popen(*args, **kwargs))
        return started[-1]

    monkeypatch.setattr(subprocess, "Popen", record)  # what the supervisor calls
    yield started
    for process in started:
        if process.poll() is None:
            process.kill()
        process.wait()


def _worker(tmp_path: Path, **kwargs: Any) -> tuple[WorkerProcess, list[int | None]]:
    exits: list[int | None] = []
    policy = Lifecycle(str(tmp_path / "log"), gate=kwargs.pop("gate", ""))
    worker = WorkerProcess(
        policy, max_batch=2, on_message=lambda _: None, on_exit=exits.append, **kwargs
    )
    return worker, exits


def _log(tmp_path: Path) -> list[str]:
    return [line.split()[0] for line in (tmp_path / "log").read_text().splitlines()]


def test_stop_asks_the_worker_to_exit_and_it_closes_its_policy(
    tmp_path: Path, spawned: list[subprocess.Popen[bytes]]
) -> None:
    worker, exits = _worker(tmp_path)

    async def run() -> None:
        await worker.start()
        assert worker.pid == spawned[0].pid
        await worker.stop(timeout_s=60)
        assert worker.pid is None
        with pytest.raises(BrokenPipeError, match="the inference worker is not running"):
            worker.send(Batch(1, ()))
        await worker.stop()  # a second stop has nothing to do

    asyncio.run(run())
    assert spawned[0].returncode == 0, "it exited by itself, not killed"
    assert _log(tmp_path) == ["load", "warm_up", "close"]
    assert exits == [], "a worker stopped on purpose is no death to report"


def test_stop_kills_a_worker_that_does_not_exit_in_time(
    tmp_path: Path, spawned: list[subprocess.Popen[bytes]]
) -> None:
    worker, _ = _worker(tmp_path)

    async def run() -> None:
        await worker.start()
        os.kill(spawned[0].pid, signal.SIGSTOP)  # it cannot read the Stop
        await worker.stop(timeout_s=0.5)

    asyncio.run(run())
    assert spawned[0].returncode == -signal.SIGKILL
    assert _log(tmp_path) == ["load", "warm_up"]


def test_stop_after_an_unnoticed_death_reaps_it_quietly(
    tmp_path: Path, spawned: list[subprocess.Popen[bytes]]
) -> None:
    # The worker died, and the event loop has not yet read the end of its pipe: the Stop
    # cannot be sent (a broken pipe), which is no error of the stop's.
    worker, exits = _worker(tmp_path)

    async def run() -> None:
        await worker.start()
        spawned[0].kill()
        spawned[0].wait()  # the loop does not run meanwhile
        await worker.stop(timeout_s=60)

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ResourceWarning)
        asyncio.run(run())
        gc.collect()
    assert exits == []
    assert spawned[0].returncode == -signal.SIGKILL
    assert [w for w in caught if w.category is ResourceWarning] == [], "its pipe was closed"


def test_kill_ends_the_worker_and_its_exit_code_is_reported(
    tmp_path: Path, spawned: list[subprocess.Popen[bytes]]
) -> None:
    worker, exits = _worker(tmp_path)
    worker.kill()  # not started: nothing to kill

    async def run() -> None:
        await worker.start()
        worker.kill()
        for _ in range(600):  # the event loop reads the end of the pipe
            if exits:
                break
            await asyncio.sleep(0.05)
        worker.kill()  # already dead: nothing happens

    asyncio.run(run())
    assert exits == [-signal.SIGKILL]
    assert worker.pid is None
    assert spawned[0].returncode == -signal.SIGKILL


def test_a_worker_not_ready_in_time_is_a_start_error_and_is_ended(
    tmp_path: Path, spawned: list[subprocess.Popen[bytes]]
) -> None:
    worker, _ = _worker(tmp_path, gate=str(tmp_path / "never"), start_timeout_s=0.75)
    with pytest.raises(WorkerStartError, match=r"^inference worker not ready after 0\.75 s$"):
        asyncio.run(worker.start())
    assert spawned[0].returncode == -signal.SIGKILL, "it was reaped, killed after a wait"
    assert worker.pid is None


def test_a_worker_that_dies_while_starting_is_a_start_error_with_its_code(
    tmp_path: Path, spawned: list[subprocess.Popen[bytes]], monkeypatch: pytest.MonkeyPatch
) -> None:
    # Its end of the pipe stays open elsewhere (as in a helper process the policy started,
    # which inherited it): the death is seen through the process, not the end of the pipe.
    held: list[int] = []
    record = subprocess.Popen  # the `spawned` fixture's recorder (the same module)

    def hold_its_end(*args: Any, **kwargs: Any) -> subprocess.Popen[bytes]:
        held.append(os.dup(kwargs["pass_fds"][0]))
        process: subprocess.Popen[bytes] = record(*args, **kwargs)
        return process

    monkeypatch.setattr(subprocess, "Popen", hold_its_end)
    worker, _ = _worker(tmp_path, gate=str(tmp_path / "never"), start_timeout_s=600)

    def terminate_when_started() -> None:
        for _ in range(600):
            if spawned:
                break
            threading.Event().wait(0.05)
        spawned[0].send_signal(signal.SIGTERM)

    killer = threading.Thread(target=terminate_when_started)
    killer.start()
    try:
        with pytest.raises(WorkerStartError, match=r"^inference worker exited with code -15$"):
            asyncio.run(worker.start())
    finally:
        killer.join()
        for fd in held:
            os.close(fd)


def test_a_worker_runs_with_its_threads_and_says_what_it_decodes(
    tmp_path: Path, spawned: list[subprocess.Popen[bytes]], monkeypatch: pytest.MonkeyPatch
) -> None:
    environments: list[dict[str, str]] = []
    record = subprocess.Popen  # the `spawned` fixture's recorder (the same module)

    def note_environment(*args: Any, **kwargs: Any) -> subprocess.Popen[bytes]:
        environments.append(kwargs["env"])
        process: subprocess.Popen[bytes] = record(*args, **kwargs)
        return process

    monkeypatch.setattr(subprocess, "Popen", note_environment)
    worker, _ = _worker(tmp_path)
    assert worker.threads == worker_threads(None, 1, os.environ), "one entrypoint's share"
    assert worker.decodes_jpeg is False
    with pytest.raises(BrokenPipeError, match="the inference worker is not running"):
        worker.send(Batch(1, ()))

    async def run() -> None:
        await worker.start()
        assert worker.decodes_jpeg is False, "what its Ready said"
        await worker.stop(timeout_s=60)

    asyncio.run(run())
    args = spawned[0].args
    assert isinstance(args, list)
    assert args[:3] == [sys.executable, "-m", "vla_client.server.worker"]
    assert environments == [worker.threads.environment(os.environ)]


def test_a_worker_shared_through_its_listener_answers_a_link(
    tmp_path: Path, spawned: list[subprocess.Popen[bytes]]
) -> None:
    address = str(tmp_path / "worker.sock")
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(address)
    listener.listen()
    worker, _ = _worker(tmp_path, listener=listener)
    link, _, _ = _link(address, start_timeout_s=60)

    async def run() -> None:
        await worker.start()
        await link.start()
        assert link.pid == worker.pid == spawned[0].pid
        assert link.decodes_jpeg is False
        await link.stop()
        await worker.stop(timeout_s=60)

    try:
        asyncio.run(run())
    finally:
        listener.close()
    assert spawned[0].returncode == 0


def test_a_death_not_reaped_in_time_is_reported_without_a_code(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    started: list[SlowToReap] = []

    def popen(*args: Any, **kwargs: Any) -> SlowToReap:
        started.append(SlowToReap(*args, **kwargs))
        return started[-1]

    monkeypatch.setattr(subprocess, "Popen", popen)
    worker, exits = _worker(tmp_path)

    async def run() -> None:
        await worker.start()
        worker.kill()
        for _ in range(600):
            if exits:
                break
            await asyncio.sleep(0.05)

    try:
        asyncio.run(run())
    finally:
        for process in started:
            process.kill()
            process.wait()
    assert exits == [None]


class Peer:
    """The shared worker's end of a link: a listening Unix socket; `answer` accepts one
    connection and sends it `greeting` (nothing, when None)."""

    def __init__(self, address: str) -> None:
        self.listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.listener.bind(address)
        self.listener.listen()
        self.conn: Channel | None = None

    def answer(self, greeting: Ready | StartFailed | None) -> None:
        sock, _ = self.listener.accept()
        self.conn = Channel(sock)
        if greeting is not None:
            self.conn.send(encode(greeting))

    def close(self) -> None:
        if self.conn is not None:
            self.conn.close()
        self.listener.close()


def _link(address: str, **kwargs: Any) -> tuple[WorkerLink, list[Any], list[int | None]]:
    messages: list[Any] = []
    exits: list[int | None] = []
    link = WorkerLink(address, on_message=messages.append, on_exit=exits.append, **kwargs)
    return link, messages, exits


def test_a_link_to_no_worker_fails_naming_the_address(tmp_path: Path) -> None:
    address = str(tmp_path / "worker.sock")
    link, _, _ = _link(address, start_timeout_s=0.3)
    with pytest.raises(WorkerStartError, match=rf"^no inference worker at {address}$"):
        asyncio.run(link.start())
    refusing = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)  # bound, never listening
    refusing.bind(address)
    try:
        with pytest.raises(WorkerStartError, match=rf"^no inference worker at {address}$"):
            asyncio.run(link.start())
    finally:
        refusing.close()


def test_a_link_waits_for_a_worker_that_is_being_restarted(tmp_path: Path) -> None:
    address = str(tmp_path / "worker.sock")
    link, _, _ = _link(address, start_timeout_s=600)
    peers: list[Peer] = []

    def restart_later() -> None:
        threading.Event().wait(0.5)
        peers.append(Peer(address))
        peers[0].answer(Ready(pid=os.getpid()))

    restarting = threading.Thread(target=restart_later)
    restarting.start()

    async def run() -> None:
        await link.start()
        await link.stop()

    try:
        asyncio.run(run())
    finally:
        restarting.join()
        peers[0].close()
    assert link.pid == os.getpid()


def test_a_silent_worker_is_a_start_error_after_the_timeout(tmp_path: Path) -> None:
    address = str(tmp_path / "worker.sock")
    peer = Peer(address)
    link, _, _ = _link(address, start_timeout_s=0.5)
    answering = threading.Thread(target=peer.answer, args=(None,))
    answering.start()
    try:
        with pytest.raises(
            WorkerStartError, match=r"^the inference worker did not answer within 0\.5 s$"
        ):
            asyncio.run(link.start())
    finally:
        answering.join()
        peer.close()


def test_a_worker_that_closes_at_once_exited_before_it_was_ready(tmp_path: Path) -> None:
    address = str(tmp_path / "worker.sock")
    peer = Peer(address)
    link, _, _ = _link(address, start_timeout_s=600)

    def answer_and_close() -> None:
        peer.answer(None)
        assert peer.conn is not None
        peer.conn.close()

    answering = threading.Thread(target=answer_and_close)
    answering.start()
    try:
        with pytest.raises(
            WorkerStartError, match=r"^inference worker exited before it was ready$"
        ):
            asyncio.run(link.start())
    finally:
        answering.join()
        peer.close()


def test_a_shared_worker_whose_policy_failed_is_a_policy_start_error(tmp_path: Path) -> None:
    address = str(tmp_path / "worker.sock")
    peer = Peer(address)
    link, _, _ = _link(address, start_timeout_s=600)
    answering = threading.Thread(target=peer.answer, args=(StartFailed("no weights here"),))
    answering.start()
    try:
        with pytest.raises(PolicyStartError, match=r"^no weights here$"):
            asyncio.run(link.start())
    finally:
        answering.join()
        peer.close()
    assert link.pid is None


def test_a_link_carries_batches_and_replies_and_reports_the_end(tmp_path: Path) -> None:
    address = str(tmp_path / "worker.sock")
    peer = Peer(address)
    link, messages, exits = _link(address, start_timeout_s=600)
    answering = threading.Thread(target=peer.answer, args=(Ready(pid=4321, decodes_jpeg=True),))
    answering.start()

    async def run() -> None:
        await link.start()
        assert (link.pid, link.decodes_jpeg) == (4321, True)
        link.send(Batch(7, (), forget=(3,)))
        assert peer.conn is not None
        received = await asyncio.to_thread(peer.conn.receive)
        assert [decode_order(frame) for frame in received] == [Batch(7, (), forget=(3,))]
        peer.conn.send(encode(BatchDone(7, (), 1.5)))
        for _ in range(600):
            if messages:
                break
            await asyncio.sleep(0.05)
        peer.conn.close()  # the worker dies
        for _ in range(600):
            if exits:
                break
            await asyncio.sleep(0.05)
        with pytest.raises(BrokenPipeError):
            link.send(Batch(8, ()))

    try:
        asyncio.run(run())
    finally:
        answering.join()
        peer.close()
    assert messages == [BatchDone(7, (), 1.5)]
    assert exits == [None], "a link cannot know the exit code of a worker it did not start"


def test_a_link_stop_disconnects_without_ending_the_worker(tmp_path: Path) -> None:
    address = str(tmp_path / "worker.sock")
    peer = Peer(address)
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    link, _, exits = _link(address, start_timeout_s=600)
    answering = threading.Thread(target=peer.answer, args=(Ready(pid=sleeper.pid),))
    answering.start()

    async def run() -> None:
        await link.start()
        await link.stop()
        assert peer.conn is not None
        with pytest.raises(EOFError):
            await asyncio.to_thread(peer.conn.receive)
        await link.stop()  # stopped already: nothing to do

    try:
        asyncio.run(run())
        assert sleeper.poll() is None, "stop only disconnects"
        assert exits == []
        link.kill()  # kill ends the shared worker, by its pid from Ready
        assert sleeper.wait(60) == -signal.SIGKILL
        link.kill()  # gone already: no error
    finally:
        answering.join()
        peer.close()
        if sleeper.poll() is None:
            sleeper.kill()
        sleeper.wait()


def test_a_link_never_started_kills_nothing(tmp_path: Path) -> None:
    link, _, _ = _link(str(tmp_path / "worker.sock"))
    assert link.pid is None
    link.kill()


def test_a_reply_read_in_pieces_never_blocks_the_event_loop(tmp_path: Path) -> None:
    # The loop reads what is there and returns; half a reply waits for the rest in the buffer.
    address = str(tmp_path / "worker.sock")
    peer = Peer(address)
    link, messages, _ = _link(address, start_timeout_s=600)
    answering = threading.Thread(target=peer.answer, args=(Ready(pid=4321),))
    answering.start()
    framed = _framed(encode(BatchDone(7, (), 1.5)))
    loop_ran = threading.Event()
    rest_sent_on_time: list[bool] = []

    def send_in_two_pieces() -> None:
        assert peer.conn is not None
        sock = socket.socket(fileno=os.dup(peer.conn.fileno()))
        sock.sendall(framed[:6])
        rest_sent_on_time.append(loop_ran.wait(20))
        sock.sendall(framed[6:])
        sock.close()

    async def run() -> None:
        await link.start()
        sending = threading.Thread(target=send_in_two_pieces)
        sending.start()
        await asyncio.sleep(0.5)  # the half arrives and is read meanwhile
        loop_ran.set()
        for _ in range(600):
            if messages:
                break
            await asyncio.sleep(0.05)
        await asyncio.to_thread(sending.join)
        await link.stop()

    try:
        asyncio.run(run())
    finally:
        answering.join()
        peer.close()
    assert rest_sent_on_time == [True]
    assert messages == [BatchDone(7, (), 1.5)]


def _framed(payload: bytes) -> bytes:
    """`payload` as a `Channel` puts it on the wire."""
    ours, theirs = socket.socketpair()
    with ours, theirs:
        Channel(ours).send(payload)
        theirs.settimeout(10)
        data = b""
        while len(data) <= len(payload):
            data += theirs.recv(1 << 16)
        return data


_ORPHAN = """
import asyncio, sys
from vla_client.errors import WorkerStartError
from vla_client.server.worker.supervisor import WorkerLink
link = WorkerLink(sys.argv[1], on_message=print, on_exit=print, start_timeout_s=60)
print("linked", flush=True)
try:
    asyncio.run(link.start())
except WorkerStartError as exc:
    open(sys.argv[2], "w").write(str(exc))
"""

_PARENT = """
import subprocess, sys
child = subprocess.Popen([sys.executable, "-c", *sys.argv[1:]], stdout=subprocess.PIPE)
child.stdout.readline()
"""


def test_a_link_whose_starter_has_exited_fails_at_once(tmp_path: Path) -> None:
    # The link's process was started by one that has now exited: nobody restarts the worker.
    said = tmp_path / "said"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    parent = subprocess.Popen(
        [sys.executable, "-c", _PARENT, _ORPHAN, str(tmp_path / "worker.sock"), str(said)],
        env=env,
    )
    assert parent.wait(60) == 0
    for _ in range(1200):
        if said.exists() and said.read_text():
            break
        threading.Event().wait(0.05)
    assert said.read_text() == "the server process that runs the inference worker has exited"


def test_a_link_told_its_starter_has_changed_fails_at_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The test above, in this process, where the mutation tests can see it: the parent it
    # reads now is not the one it was made under (the test cannot make its own parent exit).
    link, _, _ = _link(str(tmp_path / "worker.sock"), start_timeout_s=60)
    parent = os.getppid()
    monkeypatch.setattr(os, "getppid", lambda: parent + 1)
    with pytest.raises(
        WorkerStartError, match=r"^the server process that runs the inference worker has exited$"
    ):
        asyncio.run(link.start())
