"""Compare the server at another git revision with the working tree, side by side in one run.

    PYTHONPATH=src python benchmarks/ab_server.py HEAD~1                 # hand-off and latency
    PYTHONPATH=src python benchmarks/ab_server.py HEAD~1 --throughput    # 16 clients
    PYTHONPATH=src python benchmarks/ab_server.py HEAD --throughput --api-servers 2

On a shared machine a baseline measured minutes earlier can be 30% off; here both servers run
at once and the requests alternate between them (and a bare endpoint), so a noisy neighbour
hits both alike and the ratio B/A is trustworthy to a few percent where two separate runs of
`bench_server.py` are not. A is the revision given (exported with ``git archive``), B the
working tree (`--api-servers N`: B with N entrypoint processes). Raw/msgpack requests, 3 cameras
360x640, reference policy.

Run it once with A the same code as B before reading small ratios: such an A/A run here read
B/A 1.05-1.07 end to end and 1.03-1.05 for `ipc_ms`, an edge for A whose cause we did not find.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import httpx
from bench_server import GENERATIONS, hammer, round_trip, start, stop

from vla_client.cameras.scene import synthetic_frames
from vla_client.observation import Observation
from vla_client.protocol import encode_request

ROOT = Path(__file__).resolve().parent.parent


def export(revision: str, into: Path) -> Path:
    """The revision's ``src`` and ``benchmarks`` under `into`."""
    archive = subprocess.run(
        ["git", "-C", str(ROOT), "archive", revision, "src", "benchmarks"],
        check=True,
        capture_output=True,
    ).stdout
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive, check=True)
    return into


def serve(tree: Path, *mode: str) -> tuple[subprocess.Popen[bytes], str]:
    return start(
        [sys.executable, str(tree / "benchmarks" / "bench_server.py"), *mode],
        env_path=str(tree / "src"),
    )


def hand_off(urls: dict[str, str], observation: Observation, n: int) -> None:
    samples: dict[str, dict[str, list[float]]] = {name: {} for name in urls}
    with httpx.Client(timeout=60) as client:
        for i in range(n + 5):
            order = list(urls.items()) if i % 2 else list(reversed(urls.items()))
            for name, url in order:
                target = url + ("/bare" if name == "bare" else GENERATIONS)
                ms, timings = round_trip(client, target, observation, "raw", "msgpack")
                if i >= 5:
                    for key, value in {"end to end": ms, **timings}.items():
                        samples[name].setdefault(key, []).append(value)
    print(f"median of {n} raw/msgpack requests each (ms)")
    print(f"{'':<16}{'A':>9}{'B':>9}{'B/A':>8}")
    for key in samples["A"]:
        a, b = (statistics.median(samples[name][key]) for name in ("A", "B"))
        print(f"{key:<16}{a:9.3f}{b:9.3f}{b / a:8.3f}")
    bare = statistics.median(samples["bare"]["end to end"])
    print(f"{'bare end to end':<16}{bare:9.3f}")


def throughput(urls: dict[str, str], observation: Observation, rounds: int) -> None:
    body, content_type = encode_request(observation, encoding="raw", wire="msgpack")
    counts = dict.fromkeys(urls, 0)
    for _ in range(rounds):
        for name, url in urls.items():
            target = url + ("/bare" if name == "bare" else GENERATIONS)
            counts[name] += hammer(target, body, content_type, 16, 1.5)[0]
    rates = {name: count / (1.5 * rounds) for name, count in counts.items()}
    print(f"16 clients, {rounds} rounds of 1.5 s each (requests/s)")
    print(f"A {rates['A']:.0f}   B {rates['B']:.0f}   bare {rates['bare']:.0f}   "
          f"B/A {rates['B'] / rates['A']:.3f}   A/bare {rates['A'] / rates['bare']:.2f}   "
          f"B/bare {rates['B'] / rates['bare']:.2f}")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("revision", help="git revision to compare the working tree with")
    parser.add_argument("--throughput", action="store_true", help="16 clients instead")
    parser.add_argument("-n", type=int, default=300, help="requests per server (hand-off)")
    parser.add_argument("--rounds", type=int, default=8, help="rounds (throughput)")
    parser.add_argument("--api-servers", default="1", help="entrypoint processes of B")
    args = parser.parse_args()
    observation = Observation(images=synthetic_frames(3, 360, 640), task="bench")
    with tempfile.TemporaryDirectory() as tmp:
        trees = {"A": export(args.revision, Path(tmp)), "B": ROOT}
        processes = []
        try:
            urls = {}
            for name, tree in trees.items():
                extra = ("--api-servers", args.api_servers) if name == "B" else ()
                process, urls[name] = serve(tree, *extra, "--serve")
                processes.append(process)
            process, urls["bare"] = serve(ROOT, "--bare")
            processes.append(process)
            if args.throughput:
                throughput(urls, observation, args.rounds)
            else:
                hand_off(urls, observation, args.n)
        finally:
            stop(processes)


if __name__ == "__main__":
    main()
