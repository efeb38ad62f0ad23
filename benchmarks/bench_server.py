"""Benchmark the reference server's worker layout against bare baselines, all in one run.

    PYTHONPATH=src python benchmarks/bench_server.py [--quick]

Three cameras of 360x640x3 uint8 (synthetic scenes), loopback. Prints:
1. end-to-end latency per encoding and wire through the real server (worker process, reference
   policy): client encode -> POST -> reply decoded to an action array; p50/p90/p99, and the
   ratio to a bare harness doing the same client work against a bare Starlette endpoint (which
   for the JSON encodings also decodes the images, as the real entrypoint must);
2. entrypoint decode cost per encoding (`decode_request`);
3. IPC cost per request (the server's `ipc_ms`, from the raw/msgpack rows of table 1: the frames
   are already in shared memory, read there with the body, so this is the hand-off to the worker
   and back) against one memcpy of the same 2,073,600 bytes into a preallocated buffer, cache
   evicted (the target's baseline) and cache hot;
4. throughput with 1, 4 and 16 concurrent msgpack clients against the bare endpoint, for the
   server with one entrypoint process and with two (``--api-servers 2``: two entrypoints, one
   shared worker).

Both servers run as separate processes (this script's ``--serve``/``--bare`` modes, the same
uvicorn settings, no access log) so that clients and servers do not share a GIL.
"""

from __future__ import annotations

import argparse
import os
import socket
import statistics
import subprocess
import sys
import threading
import time
from typing import Any

import httpx
import numpy as np

from vla_client.cameras.scene import synthetic_frames
from vla_client.observation import Observation
from vla_client.protocol import encode_request, loads, read_actions
from vla_client.protocol.wire import CONTENT_TYPES, dumps
from vla_client.server.wire.decode import decode_request

CAMERAS, HEIGHT, WIDTH = 3, 360, 640
GENERATIONS = "/v1/actions/generations"
CASES = [("raw", "msgpack"), ("png", "msgpack"), ("png", "json"), ("jpeg", "json")]


def bare_app() -> object:
    """Starlette: /bare reads the body; /bare-decode also decodes it. Both reply a fixed chunk."""
    from starlette.applications import Starlette
    from starlette.concurrency import run_in_threadpool
    from starlette.requests import Request
    from starlette.responses import Response
    from starlette.routing import Route

    chunk = np.zeros((16, 7), np.float32)
    replies = {wire: dumps({"actions": chunk if wire == "msgpack" else chunk.tolist()}, wire)
               for wire in ("json", "msgpack")}  # fmt: skip

    def reply_for(request: Request) -> Response:
        wire = "msgpack" if "msgpack" in request.headers.get("content-type", "") else "json"
        return Response(replies[wire], media_type=CONTENT_TYPES[wire])

    async def bare(request: Request) -> Response:
        await request.body()
        return reply_for(request)

    async def bare_decode(request: Request) -> Response:
        body = await request.body()
        await run_in_threadpool(decode_request, body, request.headers.get("content-type"))
        return reply_for(request)

    return Starlette(routes=[Route("/bare", bare, methods=["POST"]),
                             Route("/bare-decode", bare_decode, methods=["POST"])])  # fmt: skip


def start(args: list[str], env_path: str | None = None) -> tuple[subprocess.Popen[bytes], str]:
    """Run `args` plus a free port; returns the process and its URL once it answers.

    `env_path` replaces PYTHONPATH (`ab_server.py` runs another revision's source this way).
    """
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    env = {**os.environ, "PYTHONPATH": env_path} if env_path else None
    process = subprocess.Popen([*args, str(port)], stderr=subprocess.DEVNULL, env=env)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            httpx.get(url + "/health", timeout=1)
            return process, url
        except httpx.TransportError:
            time.sleep(0.1)
    process.kill()
    raise RuntimeError(f"server {args} did not start")


def stop(processes: list[subprocess.Popen[bytes]]) -> None:
    for process in processes:
        process.terminate()
        process.wait(20)


def percentiles(samples: list[float]) -> tuple[float, float, float]:
    p50, p90, p99 = np.percentile(samples, [50, 90, 99])
    return float(p50), float(p90), float(p99)


def round_trip(client: httpx.Client, url: str, observation: Observation, encoding: str,
               wire: str) -> tuple[float, dict[str, float]]:  # fmt: skip
    """Client encode -> POST -> actions decoded; returns ms and the server's timings."""
    start = time.perf_counter()
    body, content_type = encode_request(observation, encoding=encoding, wire=wire)  # type: ignore[arg-type]
    reply = client.post(url, content=body, headers={"content-type": content_type})
    reply.raise_for_status()
    document = loads(reply.content, "msgpack" if "msgpack" in content_type else "json")
    read_actions(document)
    elapsed = (time.perf_counter() - start) * 1000
    return elapsed, document.get("timings", {}) if isinstance(document, dict) else {}


def latency(server: str, bare: str, observation: Observation, n: int) -> list[float]:
    """Table 1; returns the ipc_ms samples of the raw msgpack case for table 3."""
    print(f"\n1. End to end, {CAMERAS} cameras {HEIGHT}x{WIDTH}, {n} requests each (ms)")
    print(f"{'encoding/wire':<16}{'p50':>8}{'p90':>8}{'p99':>8}{'bare p50':>10}{'ratio':>8}")
    ipc: list[float] = []
    with httpx.Client(timeout=60) as client:
        for encoding, wire in CASES:
            target = bare + ("/bare" if encoding == "raw" else "/bare-decode")
            real, base = [], []
            for i in range(n + 3):
                ms, timings = round_trip(client, server + GENERATIONS, observation, encoding, wire)
                bare_ms, _ = round_trip(client, target, observation, encoding, wire)
                if i >= 3:
                    real.append(ms)
                    base.append(bare_ms)
                    if encoding == "raw":
                        ipc.append(timings["ipc_ms"])
            p50, p90, p99 = percentiles(real)
            b50 = statistics.median(base)
            print(
                f"{encoding + '/' + wire:<16}{p50:8.2f}{p90:8.2f}{p99:8.2f}"
                f"{b50:10.2f}{p50 / b50:8.2f}"
            )
    return ipc


def decode_costs(observation: Observation, n: int) -> None:
    print(f"\n2. Entrypoint decode (decode_request), median of {n} (ms)")
    for encoding, wire in [*CASES, ("pixels", "json")]:
        body, content_type = encode_request(observation, encoding=encoding, wire=wire)  # type: ignore[arg-type]
        samples = []
        for _ in range(n if encoding != "pixels" else max(3, n // 10)):
            start = time.perf_counter()
            decode_request(body, content_type)
            samples.append((time.perf_counter() - start) * 1000)
        print(
            f"{encoding + '/' + wire:<16}{statistics.median(samples):8.2f}"
            f"   body {len(body) / 1e6:6.2f} MB"
        )


def memcpy_ms(frames: list[np.ndarray], n: int, *, evict: bool) -> float:
    """Median ms of one `np.copyto` of all frames (one array) into a preallocated buffer.

    With `evict`, 64 MB of other memory is written between repeats, so the copy starts from
    the cache state a server request sees (body parsing, other processes); without, the same
    2 MB are copied back to back and stay in cache.
    """
    source = np.concatenate([frame.ravel() for frame in frames])
    target = np.empty_like(source)
    other = np.zeros(64 << 20, np.uint8)
    samples = []
    for _ in range(n):
        if evict:
            other[::64] += 1
        start = time.perf_counter()
        np.copyto(target, source)
        samples.append((time.perf_counter() - start) * 1000)
    return statistics.median(samples)


def ipc_cost(ipc: list[float], observation: Observation, n: int) -> None:
    frames = list(observation.images.values())
    evicted = memcpy_ms(frames, n, evict=True)
    hot = memcpy_ms(frames, n, evict=False)
    hand_off = statistics.median(ipc)
    nbytes = sum(frame.nbytes for frame in frames)
    print(f"\n3. IPC per request ({nbytes} bytes of frames), median (ms)")
    print(f"ipc_ms (entrypoint -> worker -> entrypoint)   {hand_off:8.3f}")
    print(f"one memcpy of the frames, cache evicted       {evicted:8.3f}   "
          f"ratio {hand_off / evicted:6.2f}   (target <= 3)")  # fmt: skip
    print(f"one memcpy of the frames, cache hot           {hot:8.3f}   "
          f"ratio {hand_off / hot:6.2f}")  # fmt: skip


def throughput(
    servers: dict[str, str], bare: str, observation: Observation, seconds: float
) -> None:
    """Servers and bare endpoint take turns in short rounds, so a noisy neighbour hits all."""
    body, content_type = encode_request(observation, encoding="raw", wire="msgpack")
    rounds = 8
    urls = {name: url + GENERATIONS for name, url in servers.items()} | {"bare": bare + "/bare"}
    print(f"\n4. Throughput, raw/msgpack, {seconds:g} s per cell in {rounds} alternating rounds "
          "(requests/s; ratios to bare)")  # fmt: skip
    print(f"{'clients':<10}" + "".join(f"{name:>16}" for name in urls)
          + "".join(f"{name + '/bare':>20}" for name in servers) + f"{'503s':>6}")  # fmt: skip
    for clients in (1, 4, 16):
        counts = dict.fromkeys(urls, 0)
        busy = 0
        for _ in range(rounds):
            for name, url in urls.items():
                count, rejected = hammer(url, body, content_type, clients, seconds / rounds)
                counts[name] += count
                busy += rejected
        rates = {name: count / seconds for name, count in counts.items()}
        print(f"{clients:<10}" + "".join(f"{rate:16.1f}" for rate in rates.values())
              + "".join(f"{rates[name] / rates['bare']:20.2f}" for name in servers)
              + f"{busy:6d}")  # fmt: skip


def hammer(
    url: str, body: bytes, content_type: str, clients: int, seconds: float
) -> tuple[int, int]:
    done = [0] * clients
    rejected = [0] * clients
    stop = time.perf_counter() + seconds

    def client(index: int) -> None:
        with httpx.Client(timeout=60) as http:
            while time.perf_counter() < stop:
                reply = http.post(url, content=body, headers={"content-type": content_type})
                if reply.status_code == 200:
                    read_actions(loads(reply.content, "msgpack"))
                    done[index] += 1
                else:
                    rejected[index] += 1

    threads = [threading.Thread(target=client, args=(i,)) for i in range(clients)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return sum(done), sum(rejected)


def serve(bare_port: int | None, server_port: int | None, api_servers: int) -> None:
    """Run one of the servers with the same uvicorn settings (the server's own) and no log.

    `uvicorn.run` binds a TCP socket itself, so the event loop (uvloop where installed, as
    the server's options leave it) sets TCP_NODELAY on all servers' connections.
    """
    import uvicorn

    from vla_client.server import ReferencePolicy, ServerConfig, create_app
    from vla_client.server.config import WorkerSettings, uvicorn_options
    from vla_client.server.engine.memory import keep_freed_memory

    config = ServerConfig(port=server_port or 0, worker=WorkerSettings(queue_size=64))
    quiet: dict[str, Any] = {"log_level": "warning", "access_log": False}
    if api_servers > 1:
        from vla_client.server.api_servers import serve as serve_api_servers

        serve_api_servers(ReferencePolicy(), config, api_servers, **quiet)
        return
    if bare_port:  # the server tunes malloc at startup; the bare endpoint gets the same
        keep_freed_memory()
    app = bare_app() if bare_port else create_app(ReferencePolicy(), config)
    uvicorn.run(
        app,  # type: ignore[arg-type]
        host="127.0.0.1",
        port=bare_port or server_port or 0,
        **quiet,
        **uvicorn_options(config),
    )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help="fewer samples (CI smoke run)")
    parser.add_argument("--bare", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--serve", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--api-servers", type=int, default=1, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.bare or args.serve:
        serve(args.bare, args.serve, args.api_servers)
        return
    n = 10 if args.quick else 60
    seconds = 2.0 if args.quick else 8.0
    observation = Observation(images=synthetic_frames(CAMERAS, HEIGHT, WIDTH), task="bench")
    print(f"vla-client server benchmark, {time.strftime('%Y-%m-%d')}, {os.cpu_count()} CPUs, "
          f"Python {sys.version.split()[0]}")  # fmt: skip
    servers: list[subprocess.Popen[bytes]] = []
    try:
        real, server = start([sys.executable, __file__, "--serve"])
        servers.append(real)
        bare_process, bare = start([sys.executable, __file__, "--bare"])
        servers.append(bare_process)
        ipc = latency(server, bare, observation, n)
        decode_costs(observation, n)
        ipc_cost(ipc, observation, 200)
        two, two_url = start([sys.executable, __file__, "--api-servers", "2", "--serve"])
        servers.append(two)
        urls = {"1 entrypoint": server, "2 entrypoints": two_url}
        throughput(urls, bare, observation, seconds)
    finally:
        stop(servers)


if __name__ == "__main__":
    main()
