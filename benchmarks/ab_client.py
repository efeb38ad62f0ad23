"""Compare the client at another git revision with the working tree's, side by side in one run.

    PYTHONPATH=src python benchmarks/ab_client.py HEAD~1 [-n 300]

Both clients talk to the same servers, started once from the working tree: the reference
server at its defaults (`bench_server.py --serve`), the bare Starlette endpoint
(`bench_server.py --bare`) and the bare websocket answering a fixed action
(`bench_floors.py --echo`, path ``/fixed``). Each client runs in a process of its own (two
versions of `vla_client` cannot share one), with A the revision given (its ``src`` exported
with ``git archive``) and B the working tree. A third process, on the working tree, measures
the same requests sent without the SDK (`bench_server.round_trip` over HTTP; over a websocket,
`encode_request`, send, receive, `read_actions`), to the reference server and to the bare
endpoints. Every round takes one request of each kind, in an order that rotates each round, so
a noisy neighbour hits every side alike; each process times its own request. Raw/msgpack
requests, 3 cameras 360x640, as in `bench_floors.py`.

Rows: A and B per path, B/A, and each against its floors: the plain request to the same
server (the SDK's own share) and the bare endpoint (issue 27's targets: HTTP <= 1.2, websocket
<= 1.1); then the CPU each client process spent per request, which a busy machine moves
least. Run it once with A the same code as B (``HEAD`` on a clean tree) before reading small
ratios: on a 2-core machine at load 16 such a run read B/A 0.99-1.01 for the medians and
0.95-1.00 for the CPU (10th percentiles, also tried, read 1.2-1.4 there: not shown).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from ab_server import export
from bench_server import start, stop

if TYPE_CHECKING:  # the runners import the package of their own tree, at run time
    from websockets.sync.client import ClientConnection

    from vla_client.observation import Observation

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
WARM_UP = 10
SDK_KINDS = ("http", "ws")
PLAIN_KINDS = ("http plain to server", "http plain to bare", "ws plain to server", "ws fixed")


def runner(server: str, bare: str, fixed: str, plain: bool) -> None:
    """Serve timing requests on stdin: a kind per line, answered on stdout with the ms it took
    and the ms of CPU this process spent on it (all its threads, the kernel's share included).

    Without `plain`, the kinds are `SDK_KINDS` (``ActionClient.infer`` over HTTP and over the
    realtime websocket); with it, `PLAIN_KINDS` (the same requests without the SDK).
    """
    from vla_client.cameras.scene import synthetic_frames
    from vla_client.observation import Observation

    observation = Observation(images=synthetic_frames(3, 360, 640), task="bench")
    with contextlib.ExitStack() as stack:
        kinds = stack.enter_context(
            _plain_kinds(server, bare, fixed, observation)
            if plain
            else _sdk_kinds(server, observation)
        )
        for work in kinds.values():  # every connection open, the server's policy loaded
            _ready(work)
        print("ready", flush=True)
        for line in sys.stdin:
            work = kinds[line.strip()]
            begin, cpu = time.perf_counter(), time.process_time()
            work()
            wall_ms, cpu_ms = (
                (time.perf_counter() - begin) * 1000,
                (time.process_time() - cpu) * 1000,
            )
            print(f"{wall_ms:.6f} {cpu_ms:.6f}", flush=True)


def _ready(work: Callable[[], object]) -> None:
    """Run `work` until it succeeds (the server answers 503 while its policy loads)."""
    for _ in range(600):
        try:
            work()
            return
        except Exception:  # any failure here is the server still starting
            time.sleep(0.1)
    work()


@contextlib.contextmanager
def _sdk_kinds(server: str, observation: Observation) -> Iterator[dict[str, Callable[[], object]]]:
    from vla_client import ActionClient

    http = ActionClient(server, encoding="raw", wire="msgpack", timeout_s=60)
    ws = ActionClient(server, encoding="raw", wire="msgpack", transport="websocket", timeout_s=60)
    with http, ws:
        yield {
            "http": lambda: http.infer(observation),
            "ws": lambda: ws.infer(observation),
        }


@contextlib.contextmanager
def _plain_kinds(
    server: str, bare: str, fixed: str, observation: Observation
) -> Iterator[dict[str, Callable[[], object]]]:
    import httpx
    from bench_server import GENERATIONS, round_trip
    from websockets.sync.client import connect

    from vla_client.protocol import encode_request, loads, read_actions

    realtime = server.replace("http", "ws") + "/v1/actions/realtime"
    with (
        httpx.Client(timeout=60) as http,
        connect(realtime, compression=None, max_size=None) as to_server,
        connect(fixed, compression=None, max_size=None) as to_fixed,
    ):
        to_server.recv(timeout=60)  # the server's metadata frame

        def over(socket: ClientConnection) -> Callable[[], object]:
            def once() -> object:
                body, _ = encode_request(observation, encoding="raw", wire="msgpack")
                socket.send(body)
                return read_actions(loads(socket.recv(timeout=60), "msgpack"))  # type: ignore[arg-type]

            return once

        def post(url: str) -> Callable[[], object]:
            return lambda: round_trip(http, url, observation, "raw", "msgpack")

        yield {
            "http plain to server": post(server + GENERATIONS),
            "http plain to bare": post(bare + "/bare"),
            "ws plain to server": over(to_server),
            "ws fixed": over(to_fixed),
        }


class Runner:
    """A `runner` process on `src` (a tree's source folder)."""

    def __init__(self, src: Path, urls: list[str], plain: bool) -> None:
        command = [sys.executable, __file__, "--runner", *urls, *(["--plain"] if plain else [])]
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(src), str(HERE)])}
        self.process = subprocess.Popen(
            command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env
        )
        if self._line() != "ready":
            raise RuntimeError(f"the client runner on {src} did not start")

    def time(self, kind: str) -> tuple[float, float]:
        """One request of `kind`: (wall ms, CPU ms)."""
        assert self.process.stdin is not None
        self.process.stdin.write(kind + "\n")
        self.process.stdin.flush()
        wall, cpu = self._line().split()
        return float(wall), float(cpu)

    def _line(self) -> str:
        assert self.process.stdout is not None
        return self.process.stdout.readline().strip()

    def close(self) -> None:
        assert self.process.stdin is not None
        self.process.stdin.close()
        self.process.wait(30)


def compare(revision: str, n: int) -> None:
    load = ", ".join(f"{value:.2f}" for value in os.getloadavg())
    print(f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, load {load}, "
          f"{os.cpu_count()} CPUs; A = {revision}, B = the working tree")  # fmt: skip
    with tempfile.TemporaryDirectory() as folder, contextlib.ExitStack() as stack:
        processes: list[subprocess.Popen[bytes]] = []
        stack.callback(stop, processes)
        urls = {}
        for name, command in (("server", [str(HERE / "bench_server.py"), "--serve"]),
                              ("bare", [str(HERE / "bench_server.py"), "--bare"]),
                              ("echo", [str(HERE / "bench_floors.py"), "--echo"])):  # fmt: skip
            process, urls[name] = start([sys.executable, *command])
            processes.append(process)
        fixed = urls["echo"].replace("http", "ws") + "/fixed"
        served = [urls["server"], urls["bare"], fixed]
        runners = {
            "A": Runner(export(revision, Path(folder)) / "src", served, plain=False),
            "B": Runner(ROOT / "src", served, plain=False),
            "plain": Runner(ROOT / "src", served, plain=True),
        }
        for each in runners.values():
            stack.callback(each.close)
        turns = [(name, kind) for name in ("A", "B") for kind in SDK_KINDS]
        turns += [("plain", kind) for kind in PLAIN_KINDS]
        samples: dict[tuple[str, str], list[tuple[float, float]]] = {turn: [] for turn in turns}
        for i in range(n + WARM_UP):
            for name, kind in turns[i % len(turns) :] + turns[: i % len(turns)]:
                ms = runners[name].time(kind)
                if i >= WARM_UP:
                    samples[name, kind].append(ms)
    m = {turn: statistics.median(wall for wall, _ in values) for turn, values in samples.items()}
    cpu = {turn: statistics.median(c for _, c in values) for turn, values in samples.items()}
    load = ", ".join(f"{value:.2f}" for value in os.getloadavg())
    print(f"median ms of {n} alternating rounds (load at the end {load})\n")
    print(f"{'path':<6}{'A':>8}{'B':>8}{'B/A':>7}  {'plain':>8}{'A/plain':>8}{'B/plain':>8}"
          f"  {'bare':>8}{'A/bare':>7}{'B/bare':>7}  target")  # fmt: skip
    for kind, plain, bare, target in (
        ("http", "http plain to server", "http plain to bare", "<= 1.2"),
        ("ws", "ws plain to server", "ws fixed", "<= 1.1"),
    ):
        a, b, p, f = m["A", kind], m["B", kind], m["plain", plain], m["plain", bare]
        print(f"{kind:<6}{a:8.2f}{b:8.2f}{b / a:7.3f}  {p:8.2f}{a / p:8.3f}{b / p:8.3f}"
              f"  {f:8.2f}{a / f:7.2f}{b / f:7.2f}  {target}")  # fmt: skip
    print("\nplain: the same request without the SDK to the same server; bare: the bare "
          "endpoint (HTTP) or the bare websocket answering a fixed action")  # fmt: skip
    print("\nCPU ms of the client process per request (median; the kernel's share included)")
    print(f"{'path':<6}{'A':>8}{'B':>8}{'B/A':>7}  {'plain':>8}")
    for kind, plain in (("http", "http plain to server"), ("ws", "ws plain to server")):
        a, b, p = cpu["A", kind], cpu["B", kind], cpu["plain", plain]
        print(f"{kind:<6}{a:8.3f}{b:8.3f}{b / a:7.3f}  {p:8.3f}")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("revision", nargs="?", help="git revision to compare the working tree with")
    parser.add_argument("-n", type=int, default=300, help="rounds (default 300)")
    parser.add_argument("--runner", nargs=3, metavar="URL", help=argparse.SUPPRESS)
    parser.add_argument("--plain", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.runner:
        server, bare, fixed = args.runner
        runner(server, bare, fixed, plain=args.plain)
        return
    if args.revision is None or args.n < 1:
        parser.error("give a revision, and -n of at least 1")
    compare(args.revision, args.n)


if __name__ == "__main__":
    main()
