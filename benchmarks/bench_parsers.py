"""What a faster HTTP parser would save: the bare endpoint under uvicorn with h11 and httptools.

    PYTHONPATH=src python benchmarks/bench_parsers.py [-n 300]

The reference server parses HTTP with h11 (`vla_client.server.config.uvicorn_options`), which
bounds the size of a request's headers; httptools does not. This measures what choosing
httptools would buy on the fast path: the bare Starlette endpoint (`bench_server.bare_app`,
reading a raw/msgpack body of 3 cameras 360x640 and answering a fixed action) under uvicorn
three ways, with the server's settings otherwise: the server's own h11 protocol
(``HeaderDeadlineProtocol``), uvicorn's plain h11 protocol, and httptools. The requests
alternate between the three, in an order reversed each round. httptools must be installed
(``pip install httptools``); it is not one of the project's dependencies.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import statistics
import sys
import time
from pathlib import Path

import httpx
from bench_server import round_trip, start, stop

from vla_client.cameras.scene import synthetic_frames
from vla_client.observation import Observation

HERE = Path(__file__).resolve().parent
PARSERS = ("server's h11", "uvicorn's h11", "httptools")
WARM_UP = 10


def serve(parser: str, port: int) -> None:
    import uvicorn
    from bench_server import bare_app

    from vla_client.server import ServerConfig
    from vla_client.server.config import uvicorn_options
    from vla_client.server.engine.memory import keep_freed_memory

    keep_freed_memory()  # as the server does at startup
    options = uvicorn_options(ServerConfig())
    if parser != PARSERS[0]:
        options["http"] = "h11" if parser == PARSERS[1] else "httptools"
    uvicorn.run(bare_app(), host="127.0.0.1", port=port, log_level="warning",  # type: ignore[arg-type]
                access_log=False, **options)  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("-n", type=int, default=300, help="rounds (default 300)")
    parser.add_argument("--serve", nargs=2, type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        serve(PARSERS[args.serve[0]], args.serve[1])
        return
    if importlib.util.find_spec("httptools") is None:
        sys.exit("httptools is not installed: pip install httptools")
    observation = Observation(images=synthetic_frames(3, 360, 640), task="bench")
    processes, urls = [], {}
    try:
        for name in PARSERS:
            command = [sys.executable, __file__, "--serve", str(PARSERS.index(name))]
            process, urls[name] = start(command)  # the port is appended
            processes.append(process)
        samples: dict[str, list[float]] = {name: [] for name in PARSERS}
        with httpx.Client(timeout=60) as client:
            for i in range(args.n + WARM_UP):
                for name in PARSERS if i % 2 else PARSERS[::-1]:
                    ms, _ = round_trip(client, urls[name] + "/bare", observation, "raw", "msgpack")
                    if i >= WARM_UP:
                        samples[name].append(ms)
    finally:
        stop(processes)
    load = ", ".join(f"{value:.2f}" for value in os.getloadavg())
    when = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    print(f"bare endpoint, raw/msgpack 3x360x640; {when}, load {load}, {os.cpu_count()} CPUs;"
          f" median of {args.n} alternating rounds")  # fmt: skip
    baseline = statistics.median(samples[PARSERS[0]])
    for name in PARSERS:
        median = statistics.median(samples[name])
        print(f"{name:<16}{median:8.3f} ms{median / baseline:8.3f}")


if __name__ == "__main__":
    main()
