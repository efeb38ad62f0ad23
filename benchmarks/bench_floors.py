"""Issue 27's targets as ratios to their floors, measured in one run; a profile of the fast paths.

    PYTHONPATH=src python benchmarks/bench_floors.py [-n 150] [--json FILE]
    PYTHONPATH=src python benchmarks/bench_floors.py --profile [--py-spy PATH] [-n 400]

Three cameras 360x640 (``synthetic_frames(3, 360, 640)``, the demo's frames). Three servers run
as separate processes: the reference server at its defaults (worker process, reference policy;
`bench_server.py --serve`), a bare Starlette endpoint under uvicorn with the same settings that
reads the body and answers a fixed action (`bench_server.py --bare`), and a bare websocket echo
(`websockets` at its defaults, except ``compression=None``: the reference server never
negotiates permessage-deflate either, see `vla_client.server.config.uvicorn_options`). Every
measurement below takes one turn per round, in an order shuffled each round (seeded), so a noisy
neighbour hits every side alike and no measurement always follows the same one (a rotation
keeps every neighbour: the SDK's HTTP request always came after the same two measurements, and
read 1.35x the bare endpoint where a strict alternation of the two read under 1.0). Rows, each
``ours / floor``:

- raw/msgpack HTTP end to end: ``ActionClient.infer`` against the server, vs the same client
  work (`bench_server.round_trip`: encode, POST with httpx, read the actions) against the bare
  endpoint. Target <= 1.2.
- realtime websocket raw: ``ActionClient(transport="websocket").infer`` on
  ``/v1/actions/realtime``, vs encoding the same request and a round trip of its bytes through
  the echo. Target <= 1.1.
- png/json end to end: ``ActionClient(encoding="png", wire="json").infer``, vs 10 ms, and vs the
  sum of its floors measured here: fpng encode of the 3 frames, base64 there and back, the
  loopback POST of the base64 bytes to the bare endpoint, and the fastest bit-exact decode of
  fpng's output found here (the project's `codecs/png_read.py` and ``cv2.imdecode``, each
  measured, both one frame after another). Targets <= 1.0 (vs 10 ms) and <= 2.0.
- raw/json server decode (`decode_request` of the project's own raw/json body) vs 10 ms.
- the server's ``preprocess_ms`` (from the reply timings) vs one memcpy of the 2 MB of frames,
  cache evicted; its ``ipc_ms`` vs a pipe round trip of a 128-byte descriptor to another process.
  No target in the issue; the ratios say how far each is from its floor.

``--profile`` runs the reference server under py-spy (``--subprocesses``, so the worker process
too; on-CPU samples only), sends raw/msgpack requests over HTTP, then over the realtime
websocket to a fresh server, and writes the top frames of each to ``docs/performance-profile.md``
(without py-spy: cProfile of the entrypoint process, the worker seen through its timings).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import cProfile
import io
import json
import os
import pstats
import random
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Literal

import cv2
import httpx
import numpy as np
import pybase64
from bench_server import GENERATIONS, memcpy_ms, round_trip, start, stop
from websockets.sync.client import connect

from vla_client import ActionClient
from vla_client.cameras.scene import synthetic_frames
from vla_client.codecs.parallel import map_frames
from vla_client.codecs.png_read import read_png
from vla_client.codecs.png_write import encode_png, png_writer
from vla_client.observation import Observation
from vla_client.protocol import encode_request, loads, read_actions
from vla_client.protocol.wire import dumps
from vla_client.server.wire.decode import decode_request

HERE = Path(__file__).resolve().parent
PROFILE_PAGE = HERE.parent / "docs" / "performance-profile.md"
WARM_UP = 5
SAMPLE_HZ = 500
DESCRIPTOR_BYTES = 128
Sampler = Callable[[], float]


def echo(port: int) -> None:
    """The bare websocket floors, ``websockets`` at its defaults but without compression (as
    the reference server): on ``/fixed`` every message is read and answered with the bare HTTP
    endpoint's fixed action chunk; on any other path it is sent straight back."""
    from websockets.asyncio.server import ServerConnection, serve

    fixed = dumps({"actions": np.zeros((16, 7), np.float32)}, "msgpack")

    async def handler(connection: ServerConnection) -> None:
        answer_fixed = connection.request is not None and connection.request.path == "/fixed"
        async for message in connection:
            await connection.send(fixed if answer_fixed else message)

    async def main() -> None:
        async with serve(handler, "127.0.0.1", port, compression=None, max_size=None):
            await asyncio.Future()

    asyncio.run(main())


def timed(work: Callable[[], object]) -> float:
    begin = time.perf_counter()
    work()
    return (time.perf_counter() - begin) * 1000


class PipePeer:
    """Another process answering each descriptor-sized write on a pipe: the hand-off's floor."""

    def __init__(self) -> None:
        loop = f"import os\nwhile d := os.read(0, {DESCRIPTOR_BYTES}): os.write(1, d)"
        self.process = subprocess.Popen(
            [sys.executable, "-c", loop], stdin=subprocess.PIPE, stdout=subprocess.PIPE
        )
        assert self.process.stdin is not None and self.process.stdout is not None
        self.write, self.read = self.process.stdin.fileno(), self.process.stdout.fileno()

    def round_trip(self) -> None:
        os.write(self.write, b"d" * DESCRIPTOR_BYTES)
        got = 0
        while got < DESCRIPTOR_BYTES:
            got += len(os.read(self.read, DESCRIPTOR_BYTES - got))

    def close(self) -> None:
        assert self.process.stdin is not None
        self.process.stdin.close()
        self.process.wait(10)


def bit_exact_decoders(
    pngs: list[bytes], frames: list[np.ndarray]
) -> dict[str, Callable[[], object]]:
    """The decoders of fpng's output that give back `frames` exactly, by name."""

    def opencv(png: bytes) -> np.ndarray | None:  # RGB, as the server must hand the policy
        bgr = cv2.imdecode(np.frombuffer(png, np.uint8), cv2.IMREAD_COLOR)
        return None if bgr is None else cv2.cvtColor(bgr, cv2.COLOR_BGR2RGB)

    def one_by_one(decode: Callable[[bytes], np.ndarray | None]) -> Callable[[], object]:
        return lambda: [decode(png) for png in pngs]

    def threaded(decode: Callable[[bytes], np.ndarray | None]) -> Callable[[], object]:
        return lambda: map_frames(decode, pngs)

    decoders: dict[str, Callable[[], object]] = {}
    for name, decode in (("png_read", read_png), ("cv2.imdecode", opencv)):
        decoders[name] = one_by_one(decode)
        decoders[f"{name} threads"] = threaded(decode)
    exact = {}
    for name, run in decoders.items():
        decoded = run()
        assert isinstance(decoded, list)
        if all(
            got is not None and np.array_equal(got, want)
            for got, want in zip(decoded, frames, strict=True)
        ):
            exact[name] = run
        else:
            print(f"note: {name} is not bit-exact on fpng's output here (skipped)")
    return exact


def measure(n: int) -> dict[str, float]:
    """Median ms of every measurement (see the module docstring), `n` alternating rounds."""
    frames_by_camera = synthetic_frames(3, 360, 640)
    frames = list(frames_by_camera.values())
    observation = Observation(images=frames_by_camera, task="bench")
    json_body, json_type = encode_request(observation, encoding="raw", wire="json")
    pngs = [encode_png(frame) for frame in frames]
    transfer_body = b"".join(pybase64.b64encode(png) for png in pngs)
    decoders = bit_exact_decoders(pngs, frames)
    stage_names = ("preprocess_ms", "ipc_ms", "total_ms")
    client_stages = ("fit_ms", "encode_ms", "round_trip_ms", "decode_ms")
    server_timings: dict[str, list[float]] = {
        name: [] for name in (*stage_names, *(f"http sdk {stage}" for stage in client_stages))
    }  # the raw/msgpack HTTP requests' stages: the server's, and the client's own
    processes: list[subprocess.Popen[bytes]] = []
    with contextlib.ExitStack() as stack:
        stack.callback(stop, processes)
        urls = {}
        for name, command in (("server", [str(HERE / "bench_server.py"), "--serve"]),
                              ("bare", [str(HERE / "bench_server.py"), "--bare"]),
                              ("echo", [__file__, "--echo"])):  # fmt: skip
            process, urls[name] = start([sys.executable, *command])
            processes.append(process)
        server, bare, echo_url = urls["server"], urls["bare"], urls["echo"].replace("http", "ws")
        peer = PipePeer()
        stack.callback(peer.close)
        http = stack.enter_context(httpx.Client(timeout=60))
        clients = {
            "http": ActionClient(server, encoding="raw", wire="msgpack", timeout_s=60),
            "ws": ActionClient(server, encoding="raw", wire="msgpack", transport="websocket",
                               timeout_s=60),
            "png": ActionClient(server, encoding="png", wire="json", timeout_s=60),
        }  # fmt: skip
        for client in clients.values():
            stack.enter_context(client)
        sockets = {
            path: stack.enter_context(connect(echo_url + path, compression=None, max_size=None))
            for path in ("/echo", "/fixed")
        }

        def sdk_http() -> float:
            begin = time.perf_counter()
            result = clients["http"].infer(observation)
            ms = (time.perf_counter() - begin) * 1000
            for key in stage_names:
                server_timings[key].append(result.timings.server[key])
            for stage in client_stages:
                server_timings[f"http sdk {stage}"].append(getattr(result.timings, stage))
            return ms

        def bare_websocket(path: str) -> Sampler:
            def once() -> None:
                body, _ = encode_request(observation, encoding="raw", wire="msgpack")
                sockets[path].send(body)
                reply = sockets[path].recv(timeout=30)
                if path == "/fixed":
                    read_actions(loads(reply, "msgpack"))  # type: ignore[arg-type]

            return lambda: timed(once)

        samplers: dict[str, Sampler] = {
            "http sdk": sdk_http,
            "http round_trip to server": lambda: round_trip(
                http, server + GENERATIONS, observation, "raw", "msgpack"
            )[0],
            "http bare": lambda: round_trip(http, bare + "/bare", observation, "raw", "msgpack")[0],
            "ws sdk": lambda: timed(lambda: clients["ws"].infer(observation)),
            "ws echo": bare_websocket("/echo"),
            "ws fixed reply": bare_websocket("/fixed"),
            "png sdk": lambda: timed(lambda: clients["png"].infer(observation)),
            "fpng encode": lambda: timed(lambda: [encode_png(frame) for frame in frames]),
            "base64 (pybase64)": lambda: timed(
                lambda: [pybase64.b64decode(pybase64.b64encode(png), validate=True) for png in pngs]
            ),
            "loopback transfer": lambda: timed(
                lambda: http.post(bare + "/bare", content=transfer_body).raise_for_status()
            ),
            **{f"decode {name}": _timer(decode) for name, decode in decoders.items()},
            "raw/json decode": lambda: timed(lambda: decode_request(json_body, json_type)),
            "pipe wake-up": lambda: timed(peer.round_trip),
        }
        samples: dict[str, list[float]] = {name: [] for name in samplers}
        order = list(samplers.items())
        shuffle = random.Random(27).shuffle
        for i in range(n + WARM_UP):
            if i == WARM_UP:
                for values in [*samples.values(), *server_timings.values()]:
                    values.clear()
            shuffle(order)
            for name, sampler in order:
                samples[name].append(sampler())
    medians = {name: statistics.median(values) for name, values in samples.items()}
    medians |= {name: statistics.median(values) for name, values in server_timings.items()}
    medians["server total_ms"] = medians.pop("total_ms")
    medians["memcpy 2 MB evicted"] = memcpy_ms(frames, max(5, min(n, 100)), evict=True)
    return medians


def _timer(work: Callable[[], object]) -> Sampler:
    return lambda: timed(work)


def ratio_rows(m: dict[str, float]) -> list[tuple[str, float, str, float, str]]:
    """(target, ours ms, floor, floor ms, target ratio) per row of the issue."""
    decoders = {name: ms for name, ms in m.items() if name.startswith("decode ")}
    fastest = min(decoders, key=decoders.__getitem__)
    png_floor = (
        m["fpng encode"] + m["base64 (pybase64)"] + m["loopback transfer"] + decoders[fastest]
    )
    return [
        ("raw/msgpack HTTP end to end", m["http sdk"], "bare endpoint", m["http bare"], "<= 1.2"),
        ("  (round_trip, no SDK) to server", m["http round_trip to server"], "bare endpoint",
         m["http bare"], "-"),
        ("realtime websocket raw", m["ws sdk"], "bare websocket echo", m["ws echo"], "<= 1.1"),
        ("realtime websocket raw", m["ws sdk"], "bare websocket, fixed reply", m["ws fixed reply"],
         "<= 1.1"),
        ("png/json end to end", m["png sdk"], "10 ms", 10.0, "<= 1.0"),
        ("png/json end to end", m["png sdk"], f"sum of floors ({fastest[7:]})", png_floor,
         "<= 2.0"),
        ("raw/json server decode", m["raw/json decode"], "10 ms", 10.0, "<= 1.0"),
        ("server preprocess_ms", m["preprocess_ms"], "memcpy 2 MB evicted",
         m["memcpy 2 MB evicted"], "-"),
        ("server ipc_ms", m["ipc_ms"], "pipe round trip 128 B", m["pipe wake-up"], "-"),
    ]  # fmt: skip


def run_header() -> str:
    load = ", ".join(f"{value:.2f}" for value in os.getloadavg())
    return (
        f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, load {load}, "
        f"{os.cpu_count()} CPUs, Python {sys.version.split()[0]}, PNG by {png_writer()}"
    )


def report(n: int, json_path: str | None) -> None:
    header = run_header()
    medians = measure(n)
    rows = ratio_rows(medians)
    print(f"vla-client floors (issue 27), {header}; median of {n} alternating rounds")
    print("websockets: compression off on both (the reference server never negotiates deflate)")
    print(f"\n{'target':<34}{'ours ms':>9}  {'floor':<34}{'floor ms':>9}{'ratio':>8}  target")
    for target, ours, floor, floor_ms, goal in rows:
        print(f"{target:<34}{ours:9.2f}  {floor:<34}{floor_ms:9.2f}{ours / floor_ms:8.2f}  {goal}")
    print("\nfloors and parts (median ms)")
    for name, value in medians.items():
        print(f"  {name:<30}{value:9.3f}")
    if json_path:
        document = {
            "header": header,
            "rounds": n,
            "medians_ms": medians,
            "ratios": [
                {"target": t, "ours_ms": o, "floor": f, "floor_ms": fm, "ratio": o / fm, "goal": g}
                for t, o, f, fm, g in rows
            ],
        }
        Path(json_path).write_text(json.dumps(document, indent=2) + "\n")


# --- profile -------------------------------------------------------------------------------


def children(pid: int) -> list[int]:
    path = Path(f"/proc/{pid}/task/{pid}/children")
    return [int(child) for child in path.read_text().split()] if path.exists() else []


def profiled_server(
    spy: str | None, out: Path
) -> tuple[subprocess.Popen[bytes], str, Callable[[], None]]:
    """The reference server under py-spy (or cProfile); the returned function stops it so that
    the profile is written to `out`."""
    serve = [str(HERE / "bench_server.py"), "--serve"]
    if spy:
        command = [spy, "record", "--subprocesses", "--format", "raw", "--rate", str(SAMPLE_HZ),
                   "--nonblocking", "-o", str(out), "--", sys.executable, *serve]  # fmt: skip
    else:
        command = [sys.executable, "-m", "cProfile", "-o", str(out), *serve]
    process, url = start(command)

    def finish() -> None:
        # py-spy writes once the server it runs exits. uvicorn stops on SIGINT, then raises it
        # again, which under cProfile is a KeyboardInterrupt that still writes the profile.
        for pid in children(process.pid) if spy else [process.pid]:
            os.kill(pid, signal.SIGINT)
        process.wait(60)

    return process, url, finish


def drive(
    url: str, transport: Literal["http", "websocket"], n: int, client_profile: Path
) -> dict[str, float]:
    """`n` requests on `transport` for their server timings (median ms), then `n` more under
    cProfile, written to `client_profile`: the client's share of the round trip."""
    observation = Observation(images=synthetic_frames(3, 360, 640), task="bench")
    timings: dict[str, list[float]] = {}
    with ActionClient(
        url, encoding="raw", wire="msgpack", transport=transport, timeout_s=60
    ) as client:
        for i in range(n + WARM_UP):
            begin = time.perf_counter()
            result = client.infer(observation)
            end_to_end = (time.perf_counter() - begin) * 1000
            if i >= WARM_UP:
                for key, value in {
                    "end to end (client)": end_to_end,
                    **result.timings.server,
                }.items():
                    timings.setdefault(key, []).append(value)
        profiler = cProfile.Profile()
        profiler.enable()
        for _ in range(n):
            client.infer(observation)
        profiler.disable()
        profiler.dump_stats(client_profile)
    return {key: statistics.median(values) for key, values in timings.items()}


def package(frame: str) -> str:
    """The package (or top-level module) of a py-spy frame ``function (path:line)``."""
    path = frame.rpartition(" (")[2]
    head = path.split("/", 1)[0] if "/" in path else path.split(":", 1)[0]
    return "vla_client." + path.split("/")[1] if head == "vla_client" else head


def py_spy_tables(raw: Path, top: int) -> list[str]:
    """Tables of the frames in py-spy's collapsed stacks, per process (entrypoint and worker):
    inclusive and self shares of that process's samples, and self shares by package. Startup
    (any stack through the import system) is left out, and so, from the inclusive table, are
    the frames on nearly every stack of their thread (the server's main loop and what starts
    it, which would head the table and say nothing)."""
    stacks: dict[str, Counter[tuple[str, ...]]] = {"entrypoint": Counter(), "worker": Counter()}
    for line in raw.read_text().splitlines():
        collapsed, _, count = line.rpartition(" ")
        frames = collapsed.split(";")
        if not count.isdigit() or any("_find_and_load" in frame for frame in frames):
            continue
        roots = [frame for frame in frames if frame.startswith("process ")]
        kind = "worker" if roots and "vla_client.server.worker" in roots[-1] else "entrypoint"
        python = tuple(frame for frame in frames if not frame.startswith("process "))
        stacks[kind][python or ("(native code, no Python frame)",)] += int(count)
    lines: list[str] = []
    for kind, counts in stacks.items():
        total = sum(counts.values())
        if not total:
            continue
        inclusive: Counter[str] = Counter()
        own: Counter[str] = Counter()
        packages: Counter[str] = Counter()
        threads: Counter[str] = Counter()  # samples per outermost frame: one per thread's entry
        entries: dict[str, set[str]] = {}
        for stack, samples in counts.items():
            threads[stack[0]] += samples
            for name in set(stack):
                inclusive[name] += samples
                entries.setdefault(name, set()).add(stack[0])
            own[stack[-1]] += samples
            packages[package(stack[-1])] += samples
        inner = Counter({
            name: n for name, n in inclusive.items()
            if n < 0.9 * sum(threads[entry] for entry in entries[name])
        })  # fmt: skip
        lines += ["", f"### {kind}: {total} on-CPU samples at {SAMPLE_HZ} Hz"]
        for title, counter, rows in (
            ("inclusive (the frame and what it calls)", inner, top),
            ("self (the frame itself)", own, top),
            ("self, by package", packages, top // 2),
        ):
            lines += ["", f"Top {rows} {title}:", "", "| share | frame |", "|---:|---|"]
            lines += [f"| {n / total:.1%} | `{name}` |" for name, n in counter.most_common(rows)]
    return lines


def cprofile_tables(path: Path, top: int, who: str) -> list[str]:
    """pstats' top `top` functions of `who` by inclusive and by self time, as text blocks."""
    lines = []
    for key, title in (("cumulative", "inclusive"), ("tottime", "self")):
        text = io.StringIO()
        pstats.Stats(str(path), stream=text).strip_dirs().sort_stats(key).print_stats(top)
        body = text.getvalue().split("ncalls", 1)[-1]
        lines += ["", f"Top {top} functions of {who} by {title} time (cProfile):", "",
                  "```text", "ncalls" + body.rstrip(), "```"]  # fmt: skip
    return lines


def profile(spy: str | None, n: int, top: int) -> None:
    header = run_header()
    if spy:
        version = subprocess.run([spy, "--version"], capture_output=True, text=True, check=True)
        tool = version.stdout.strip() or "py-spy"
    else:
        tool = "cProfile (the entrypoint only; with py-spy, the worker process too)"
    page = [
        "<!-- generated by benchmarks/bench_floors.py --profile; do not edit by hand -->",
        "# Where the fast paths spend their time",
        "",
        f"Measured {header}, with {tool}.",
        "",
        "The reference server at its defaults (worker process, reference policy) answers",
        f"{n} raw/msgpack requests of 3 cameras 360x640 from `ActionClient` on each path.",
        "Regenerate with `PYTHONPATH=src python benchmarks/bench_floors.py --profile`; the ratios",
        "to each floor come from the same script without `--profile` (see",
        "[Performance](performance.md)). Startup samples (imports) are left out. The client",
        "(`ActionClient`, in the benchmark's process) is profiled with cProfile over as many",
        "requests again, after the timed ones (cProfile slows it), so the server is sampled over",
        f"{2 * n + WARM_UP} requests per path. Self time in `Runner.run` is",
        "uvloop's event loop, which is C: the socket reads and writes and the callbacks' dispatch.",
        "py-spy cannot always tell a blocking read from work: in the worker, most of",
        "`Connection._recv` is the wait for the next request, not CPU spent on the hand-off.",
    ]
    paths: tuple[tuple[Literal["http", "websocket"], str], ...] = (
        ("http", "raw/msgpack over HTTP"),
        ("websocket", "realtime websocket"),
    )
    for transport, title in paths:
        with tempfile.TemporaryDirectory() as folder:
            out, client_out = Path(folder) / "server", Path(folder) / "client"
            process, url, finish = profiled_server(spy, out)
            try:
                timings = drive(url, transport, n, client_out)
            finally:
                if process.poll() is None:
                    finish()
            tables = py_spy_tables(out, top) if spy else cprofile_tables(out, top, "the entrypoint")
            tables += ["", "### client: `ActionClient.infer`, in the benchmark's process"]
            tables += cprofile_tables(client_out, top, "the client")
        page += ["", f"## {title}", "", "Server timings from the replies (median ms): " + ", ".join(
            f"{key} {value:.2f}" for key, value in timings.items())]  # fmt: skip
        page += tables
        print(f"{title}: " + ", ".join(f"{k} {v:.2f}" for k, v in timings.items()))
    PROFILE_PAGE.write_text("\n".join(page) + "\n")
    print(f"wrote {PROFILE_PAGE}")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "-n", type=int, help="rounds (default 150); with --profile requests per path (400)"
    )
    parser.add_argument("--json", metavar="FILE", help="also write the medians and ratios here")
    parser.add_argument("--profile", action="store_true", help="write docs/performance-profile.md")
    parser.add_argument("--py-spy", default=shutil.which("py-spy"), help="py-spy to profile with")
    parser.add_argument("--top", type=int, default=20, help="frames per profile table")
    parser.add_argument("--echo", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.n is None:
        args.n = 400 if args.profile else 150
    if args.n < 1 or args.top < 1:
        raise ValueError(f"-n and --top must be at least 1; got {args.n} and {args.top}")
    if args.echo:
        echo(args.echo)
    elif args.profile:
        profile(args.py_spy, args.n, args.top)
    else:
        report(args.n, args.json)


if __name__ == "__main__":
    main()
