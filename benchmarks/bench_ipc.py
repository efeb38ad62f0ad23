"""A call's cost above the policy over ``ipc://``, HTTP raw/msgpack and the websocket, one run.

    PYTHONPATH=src python benchmarks/bench_ipc.py [--repeats N]

One ``vla-client serve --ipc PATH`` (the reference policy, its worker process: the default
layout) in a process of its own; one client of each kind sends the same observation (3 cameras
360x640, a 7-value state) in alternation, asking for the server's timings. Each call's cost is
the client's whole call (`ActionClient.infer`, fitting and encoding included) minus the
server's own ``inference_ms``. The baseline, measured in the same alternation, is one copy of
the three frames with ``np.copyto`` into a ready buffer.

Targets (issue 44): ``ipc://`` at most 3x one copy, and at most half of HTTP raw/msgpack.
The median of each stage over ``ipc://`` is printed too (docs/performance.md reads them).
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import functools
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import numpy as np

from vla_client import ActionClient, Observation
from vla_client.cameras.scene import synthetic_frames
from vla_client.protocol.ipc import SharedFrames
from vla_client.transports.ipc_memory import FramePool

CAMERAS, HEIGHT, WIDTH = 3, 360, 640
FLOOR = """
import os, socket, sys
listener = socket.socket(socket.AF_UNIX)
listener.bind(sys.argv[1])
listener.listen()
relay, worker = socket.socketpair()
if os.fork() == 0:  # the worker: answers each byte the relay passes on
    relay.close()
    while data := worker.recv(1):
        worker.sendall(data)
    os._exit(0)
worker.close()
client, _ = listener.accept()
while data := client.recv(1):  # the entrypoint: passes each byte to the worker and back
    relay.sendall(data)
    client.sendall(relay.recv(1))
"""
"""Two processes doing nothing but pass one byte on: the wake-ups of an ipc:// call, bare."""


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@contextlib.contextmanager
def served(path: str) -> Iterator[int]:
    """``vla-client serve --ipc path`` on a free port, until /health says ok; its port."""
    port = free_port()
    server = subprocess.Popen(
        [sys.executable, "-m", "vla_client.cli", "serve", "--port", str(port), "--ipc", path],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 120
        while True:
            with contextlib.suppress(httpx.TransportError):
                if httpx.get(f"http://127.0.0.1:{port}/health", timeout=1).status_code == 200:
                    break
            if server.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("vla-client serve did not start")
            time.sleep(0.1)
        yield port
    finally:
        server.terminate()
        server.wait(30)


def call_cost(
    client: ActionClient, observation: Observation, stages: dict[str, list[float]]
) -> float:
    """The ms of one `infer` less the server's inference_ms; its stages added to `stages`."""
    start = time.perf_counter()
    result = client.infer(observation, runtime={"return_timing": True})
    total_ms = (time.perf_counter() - start) * 1000
    timings = result.timings
    for name, value in (
        ("fit_ms", timings.fit_ms), ("encode_ms", timings.encode_ms),
        ("round_trip_ms", timings.round_trip_ms), ("decode_ms", timings.decode_ms),
        *timings.server.items(),
    ):  # fmt: skip
        stages.setdefault(name, []).append(value)
    return total_ms - timings.server["inference_ms"]


@contextlib.contextmanager
def floor_link(path: str) -> Iterator[socket.socket]:
    """A connection to `FLOOR`'s relay at `path` (its worker behind it)."""
    relay = subprocess.Popen([sys.executable, "-c", FLOOR, path])
    try:
        deadline = time.monotonic() + 30
        while not os.path.exists(path):
            if relay.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("the floor's relay did not start")
            time.sleep(0.01)
        with socket.socket(socket.AF_UNIX) as sock:
            sock.connect(path)
            yield sock
    finally:
        relay.wait(30)


def floor_ms(sock: socket.socket) -> float:
    """One byte to the floor's worker and back, through its relay."""
    start = time.perf_counter()
    sock.sendall(b"x")
    if sock.recv(1) != b"x":
        raise RuntimeError("the floor's relay answered wrong")
    return (time.perf_counter() - start) * 1000


def copy_ms(frames: list[np.ndarray], into: list[np.ndarray]) -> float:
    start = time.perf_counter()
    for frame, target in zip(frames, into, strict=True):
        np.copyto(target, frame)
    return (time.perf_counter() - start) * 1000


def write_ms(pool: FramePool, observation: Observation) -> float:
    """One `FramePool.write` of the frames into a reused segment (the client's only copy)."""
    start = time.perf_counter()
    segment, _, _ = pool.write(SharedFrames(observation.images))
    elapsed = (time.perf_counter() - start) * 1000
    pool.give_back(segment, reuse=True)
    return elapsed


def run(repeats: int) -> tuple[dict[str, float], dict[str, float]]:
    """Median cost per kind (ms) and the median of each ipc:// stage."""
    frames = synthetic_frames(CAMERAS, HEIGHT, WIDTH)
    observation = Observation(frames, state=np.zeros(7, np.float32), task="pick")
    buffers = [np.empty_like(frame) for frame in frames.values()]
    pool = FramePool()
    with (
        tempfile.TemporaryDirectory() as folder,
        served(str(Path(folder) / "s.sock")) as port,
        floor_link(str(Path(folder) / "floor.sock")) as floor,
    ):
        clients = {
            "ipc://": ActionClient(f"ipc://{folder}/s.sock"),
            "http raw/msgpack": ActionClient(
                f"http://127.0.0.1:{port}", encoding="raw", wire="msgpack"
            ),
            "websocket raw": ActionClient(f"ws://127.0.0.1:{port}", encoding="raw"),
        }
        stages: dict[str, dict[str, list[float]]] = {name: {} for name in clients}
        runs: dict[str, Callable[[], float]] = {
            name: functools.partial(call_cost, client, observation, stages[name])
            for name, client in clients.items()
        }
        runs["one copy (np.copyto)"] = lambda: copy_ms(list(frames.values()), buffers)
        runs["ipc frame write"] = lambda: write_ms(pool, observation)
        runs["floor (4 wake-ups)"] = lambda: floor_ms(floor)
        samples: dict[str, list[float]] = {name: [] for name in runs}
        for _ in range(5):  # warm-up: connections, segments, the worker's mappings
            for call in runs.values():
                call()
        order = list(runs.items())
        for i in range(repeats):
            for name, call in order[i % len(order) :] + order[: i % len(order)]:
                samples[name].append(call())
        for client in clients.values():
            client.close()
        pool.close()
    medians = {name: statistics.median(values) for name, values in samples.items()}
    ipc_stages = {name: statistics.median(v) for name, v in stages["ipc://"].items()}
    return medians, ipc_stages


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=200)
    args = parser.parse_args()
    load_before = os.getloadavg()
    medians, stages = run(args.repeats)
    load_after = os.getloadavg()
    now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    print(
        f"{now}; {os.cpu_count()} CPUs; load average (1, 5, 15 min) before "
        f"{'/'.join(f'{x:.2f}' for x in load_before)}, after "
        f"{'/'.join(f'{x:.2f}' for x in load_after)}"
    )
    print(
        f"call minus server inference_ms, {CAMERAS} cameras {HEIGHT}x{WIDTH}, "
        f"median of {args.repeats} in alternation (ms)"
    )
    copy = medians["one copy (np.copyto)"]
    http = medians["http raw/msgpack"]
    for name, median in medians.items():
        print(f"{name:<24}{median:8.3f}  x{median / copy:6.2f} copy  x{median / http:5.2f} http")
    print("targets: ipc:// <= 3.00x copy and <= 0.50x http raw/msgpack")
    print("ipc:// stages (median ms): " + ", ".join(f"{k} {v:.3f}" for k, v in stages.items()))


if __name__ == "__main__":
    main()
