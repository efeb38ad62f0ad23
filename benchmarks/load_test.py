"""Load test: concurrent clients, mixed transports and encodings, every reply checked.

Starts ``vla-client serve`` as a subprocess (or uses ``--url``), then runs rounds of N client
threads. Each request carries its own state and task, so the reference policy's chunk differs
per request; the client recomputes the expected chunk (`reference_actions` on the frames the
server must have decoded) and checks the server's frame digests. It reports requests sent,
answered, mismatched (wrong actions, digests or request id: must be 0), failed with a typed
error, and lost (no outcome at all: must be 0), the server's resident memory after each round,
and shared-memory segments left in /dev/shm after the server stops.

    PYTHONPATH=src python benchmarks/load_test.py --clients 8 --rounds 5 --requests 20

Exit status 1 when anything was mismatched or lost, or a segment leaked.
"""

from __future__ import annotations

import argparse
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import numpy as np

import vla_client
from vla_client.cameras.scene import synthetic_frames
from vla_client.client import ActionClient
from vla_client.codecs import frame_digest
from vla_client.errors import MismatchedReplyError, ProtocolError, VLAClientError
from vla_client.observation import Observation
from vla_client.protocol import encode_image_value
from vla_client.server.policies import reference_actions
from vla_client.server.policy import PolicyInput
from vla_client.server.wire.decode import decode_image_value
from vla_client.server.worker import SEGMENT_PREFIX

# (transport, encoding, wire): client i uses MIXES[i % len(MIXES)].
MIXES: tuple[tuple[str, str, str], ...] = (
    ("http", "png", "json"), ("http", "jpeg", "json"), ("http", "raw", "msgpack"),
    ("http", "pixels", "json"), ("websocket", "png", "msgpack"), ("websocket", "raw", "msgpack"),
    ("http", "jpeg", "msgpack"), ("websocket", "jpeg", "msgpack"),
)  # fmt: skip
SHM_DIR = Path("/dev/shm")


@dataclass
class Tally:
    """Outcomes of every request sent; `lost` is whatever has no outcome.

    `stray` counts replies a client read and discarded because they answered another request
    (a reply delivered twice, or to the wrong connection, would land here).
    """

    sent: int = 0
    answered: int = 0
    mismatched: int = 0
    stray: int = 0
    errors: Counter[str] = field(default_factory=Counter)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    @property
    def lost(self) -> int:
        return self.sent - self.answered - self.mismatched - sum(self.errors.values())

    @property
    def consistent(self) -> bool:
        """Nothing mismatched, lost or stray: each request got its own reply or a typed error."""
        return self.mismatched == 0 and self.lost == 0 and self.stray == 0

    def add(self, outcome: str) -> None:
        with self._lock:
            if outcome == "answered":
                self.answered += 1
            elif outcome == "mismatched":
                self.mismatched += 1
            else:
                self.errors[outcome] += 1

    def count_sent(self) -> None:
        with self._lock:
            self.sent += 1

    def count_stray(self, replies: int) -> None:
        with self._lock:
            self.stray += replies


@dataclass
class LoadReport:
    """What the run saw: the tally, the server's memory per round, leaked segments."""

    tally: Tally
    rss_mb: list[float] = field(default_factory=list)
    seconds: float = 0.0
    leaked_segments: list[str] = field(default_factory=list)

    def lines(self) -> list[str]:
        t = self.tally
        return [
            f"sent {t.sent}  answered {t.answered}  mismatched {t.mismatched}  lost {t.lost}  "
            f"stray replies {t.stray}  errors {dict(t.errors) or 0}  in {self.seconds:.1f} s "
            f"({t.answered / max(self.seconds, 1e-9):.0f} req/s)",
            "server RSS per round (MiB): " + " ".join(f"{v:.0f}" for v in self.rss_mb),
            f"leaked shared-memory segments: {self.leaked_segments or 0}",
        ]


class Expected:
    """The frames the server must decode for each encoding, and the chunk it must return."""

    def __init__(self, frames: dict[str, np.ndarray], horizon: int, action_dim: int) -> None:
        self.frames = frames
        self.horizon, self.action_dim = horizon, action_dim
        self._decoded: dict[str, dict[str, np.ndarray]] = {}
        self._lock = threading.Lock()

    def decoded(self, encoding: str) -> dict[str, np.ndarray]:
        with self._lock:
            if encoding not in self._decoded:
                self._decoded[encoding] = {
                    name: decode_image_value(encode_image_value(frame, encoding, "msgpack"))  # type: ignore[arg-type]
                    for name, frame in self.frames.items()
                }
            return self._decoded[encoding]

    def check(self, observation: Observation, encoding: str, result: Any) -> bool:
        frames = self.decoded(encoding)
        digests = {name: frame_digest(frame) for name, frame in frames.items()}
        chunk = reference_actions(
            PolicyInput(images=frames, state=observation.state, task=observation.task),
            horizon=self.horizon,
            action_dim=self.action_dim,
        )
        return (
            result.digests == digests
            and result.actions.shape == chunk.shape
            and bool(np.allclose(result.actions, chunk, rtol=0, atol=1e-5))
        )


def request_observation(frames: dict[str, np.ndarray], client: int, seq: int) -> Observation:
    """An observation whose state and task (hence actions) belong to this request alone."""
    state = np.array([client, seq, client * 1000 + seq], np.float32) / 100.0
    return Observation(frames, state=state, task=f"client {client} request {seq}")


def client_url(base_url: str, transport: str) -> str:
    return base_url.replace("http://", "ws://", 1) if transport == "websocket" else base_url


def run_client(
    base_url: str, client: int, requests: int, expected: Expected, tally: Tally,
    *, deadline: float, api_key: str | None = None, timeout: float = 10.0, first_seq: int = 0,
) -> None:  # fmt: skip
    """Send `requests` observations one after another, recording one outcome per request."""
    transport, encoding, wire = MIXES[client % len(MIXES)]
    with ActionClient(
        client_url(base_url, transport), encoding=encoding, wire=wire,  # type: ignore[arg-type]
        timeout_s=timeout, api_key=api_key,
    ) as session:  # fmt: skip
        seqs = range(first_seq, first_seq + requests)
        try:
            _send_all(session, client, seqs, encoding, expected, tally, deadline)
        finally:
            tally.count_stray(session.stats.mismatched_replies)


def _send_all(
    session: ActionClient, client: int, seqs: range, encoding: str, expected: Expected,
    tally: Tally, deadline: float,
) -> None:  # fmt: skip
    for seq in seqs:
        if time.monotonic() > deadline:
            return
        observation = request_observation(expected.frames, client, seq)
        tally.count_sent()
        try:
            result = session.infer(observation, return_digest=True)
        except (MismatchedReplyError, ProtocolError):
            tally.add("mismatched")
            continue
        except VLAClientError as exc:
            tally.add(type(exc).__name__)
            time.sleep(0.05)  # back off as a robot would, rather than spin while it is down
            continue
        except Exception as exc:  # an untyped error is a bug: report it, keep going
            tally.add(f"untyped {type(exc).__name__}")
            continue
        tally.add("answered" if expected.check(observation, encoding, result) else "mismatched")


def run_round(
    base_url: str, clients: int, requests: int, expected: Expected, tally: Tally,
    *, time_limit: float, api_key: str | None = None, first_seq: int = 0,
) -> None:  # fmt: skip
    """`clients` threads at once; returns when all are done or `time_limit` has passed."""
    deadline = time.monotonic() + time_limit
    threads = [
        threading.Thread(
            target=run_client,
            args=(base_url, i, requests, expected, tally),
            kwargs={"deadline": deadline, "api_key": api_key, "first_seq": first_seq},
            daemon=True,
        )
        for i in range(clients)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(max(0.0, deadline - time.monotonic()) + 15.0)


class ServerProcess:
    """``python -m vla_client.cli serve`` in its own process group, killable and restartable."""

    def __init__(self, *args: str, port: int | None = None) -> None:
        self.args = args
        self.port = port or free_port()
        self.process: subprocess.Popen[bytes] | None = None
        self.pids: list[int] = []  # every entrypoint started, restarts included

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, timeout: float = 30.0) -> ServerProcess:
        source = str(Path(vla_client.__file__).resolve().parents[1])
        path = os.pathsep.join([source, os.environ.get("PYTHONPATH", "")])
        env = {**os.environ, "PYTHONPATH": path}
        self.process = subprocess.Popen(
            [sys.executable, "-m", "vla_client.cli", "serve", "--port", str(self.port), *self.args],
            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
        )  # fmt: skip
        self.pids.append(self.process.pid)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"server exited with status {self.process.returncode}")
            try:
                if httpx.get(f"{self.url}/health", timeout=1.0).status_code == 200:
                    return self
            except httpx.TransportError:
                pass
            time.sleep(0.1)
        self.kill()
        raise RuntimeError("server did not become healthy in time")

    def kill(self) -> None:
        """SIGKILL the whole process group (entrypoint and inference worker)."""
        self._signal(signal.SIGKILL)

    def crash(self) -> None:
        """SIGKILL the entrypoint alone, as the OOM killer would; its worker must follow it."""
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait()

    def stop(self) -> None:
        """SIGTERM, as an operator would; SIGKILL after 15 s."""
        self._signal(signal.SIGTERM, grace=15.0)

    def _signal(self, sig: signal.Signals, grace: float = 5.0) -> None:
        if self.process is None or self.process.poll() is not None:
            return
        try:
            os.killpg(self.process.pid, sig)
            self.process.wait(grace)
        except subprocess.TimeoutExpired:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(grace)
        except ProcessLookupError:
            pass

    def rss_mb(self) -> float:
        """Resident memory of the server and its children, from /proc (0 where there is none)."""
        if self.process is None:
            return 0.0
        return sum(_rss_kb(pid) for pid in process_tree(self.process.pid)) / 1024


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def process_tree(pid: int) -> list[int]:
    """`pid` and its descendants, children of any of their threads included."""
    pids, index = [pid], 0
    while index < len(pids):
        for task in Path(f"/proc/{pids[index]}/task").glob("*/children"):
            pids += [int(child) for child in task.read_text().split()]
        index += 1
    return pids


def _rss_kb(pid: int) -> int:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


def leaked_segments(pids: list[int], wait_s: float = 10.0) -> list[str]:
    """Segments created by the entrypoints `pids` still in /dev/shm after up to `wait_s`.

    A segment's name carries its creator's pid (`SEGMENT_PREFIX` + pid), so segments of other
    servers on the machine are not counted. After a SIGKILL the resource tracker unlinks the
    entrypoint's segments a moment later, hence the wait.
    """
    prefixes = tuple(f"{SEGMENT_PREFIX}{pid}_" for pid in pids)
    deadline = time.monotonic() + wait_s
    while True:
        names = sorted(p.name for p in SHM_DIR.glob("*") if p.name.startswith(prefixes))
        if not names or time.monotonic() > deadline:
            return names
        time.sleep(0.05)


def run_load(
    server: ServerProcess, *, clients: int, rounds: int, requests: int, time_limit: float,
    api_key: str | None = None, size: tuple[int, int] = (96, 128),
) -> LoadReport:  # fmt: skip
    """`rounds` rounds against a started `server`, then stop it and look for leaked segments."""
    with ActionClient(server.url, api_key=api_key) as probe:
        spec = probe.metadata().output
    assert spec.action_horizon and spec.action_dim
    expected = Expected(synthetic_frames(2, *size, seed=3), spec.action_horizon, spec.action_dim)
    report = LoadReport(Tally())
    start = time.monotonic()
    per_round = time_limit / rounds
    for index in range(rounds):
        run_round(
            server.url, clients, requests, expected, report.tally,
            time_limit=per_round, api_key=api_key, first_seq=index * requests,
        )  # fmt: skip
        report.rss_mb.append(server.rss_mb())
    report.seconds = time.monotonic() - start
    server.stop()
    report.leaked_segments = leaked_segments(server.pids)
    return report


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--requests", type=int, default=20, help="requests per client per round")
    parser.add_argument("--time-limit", type=float, default=120.0, help="seconds, all rounds")
    parser.add_argument("--api-key", default=None)
    parser.add_argument("--server-arg", action="append", default=[], help="extra serve flag")
    args = parser.parse_args()
    extra = [*args.server_arg, *(["--api-key", args.api_key] if args.api_key else [])]
    server = ServerProcess(*extra).start()
    try:
        report = run_load(
            server, clients=args.clients, rounds=args.rounds, requests=args.requests,
            time_limit=args.time_limit, api_key=args.api_key,
        )  # fmt: skip
    finally:
        server.kill()
    print(f"{args.clients} clients x {args.rounds} rounds x {args.requests} requests; mixes:")
    print("  " + ", ".join("/".join(mix) for mix in MIXES[: args.clients]))
    print("\n".join(report.lines()))
    return 0 if report.tally.consistent and not report.leaked_segments else 1


if __name__ == "__main__":
    sys.exit(main())
