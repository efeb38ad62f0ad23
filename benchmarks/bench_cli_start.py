"""How long ``vla-client`` takes to start, against another revision in one run.

    python benchmarks/bench_cli_start.py [--base REV] [--runs 10] [--save results-cli-start.json]

Each command line (``vla-client --help``, ``--version``, and ``COMMAND --help`` for every
command: the start-up a command pays before its own work) runs in fresh interpreters, this tree
and REV (its ``src`` checked out from git into a temporary folder) alternately, `--runs` times
each; the medians of the whole process's wall time and their ratio are printed. Ratios are
what to trust on a shared, noisy machine; the absolute times move with its load. A benchmark,
not a test: what a time proves depends on the machine.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench_import import checkout

ROOT = Path(__file__).resolve().parents[1]
COMMANDS = ("serve", "send", "record", "view", "export", "bench", "metadata", "demo", "cameras",
            "eval", "ros2")  # fmt: skip
LINES = (("--help",), ("--version",), *((command, "--help") for command in COMMANDS))


def time_once(src: Path, words: tuple[str, ...]) -> float | None:
    """Milliseconds ``vla-client WORDS`` takes in a fresh interpreter importing from `src`;
    None where that revision does not know the command line (exit status 2)."""
    env = {**os.environ, "PYTHONPATH": str(src)}
    started = time.perf_counter()
    result = subprocess.run(
        [sys.executable, "-m", "vla_client.cli", *words], capture_output=True, env=env, check=False
    )
    elapsed = (time.perf_counter() - started) * 1000
    return None if result.returncode != 0 else elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base", default="f279891", help="revision to compare against")
    parser.add_argument("--runs", type=int, default=10, help="fresh interpreters per cell")
    parser.add_argument("--save", metavar="FILE.json", help="write the figures as JSON")
    args = parser.parse_args()
    load_before = os.getloadavg()[0]
    rows = []
    with tempfile.TemporaryDirectory() as folder:
        base_src = checkout(args.base, Path(folder))
        print(
            f"start-up wall time, median of {args.runs} fresh interpreters; load {load_before:.2f}"
        )
        print(f"{'vla-client ...':<22} {args.base:>10} {'this tree':>10} {'ratio':>7}")
        for words in LINES:
            base, this = [], []
            for _ in range(args.runs):
                base.append(time_once(base_src, words))
                this.append(time_once(ROOT / "src", words))
            b = statistics.median(v for v in base if v is not None) if None not in base else None
            t = statistics.median(v for v in this if v is not None)
            rows.append({"command": " ".join(words), "base_ms": b, "this_ms": t})
            shown = " ".join(words)
            if b is None:
                print(f"{shown:<22} {'(none)':>10} {t:>8.0f}ms")
            else:
                print(f"{shown:<22} {b:>8.0f}ms {t:>8.0f}ms {t / b:>7.2f}")
    if args.save:
        report = {
            "format": "vla-client.cli-start-times",
            "date": datetime.date.today().isoformat(),
            "base": args.base,
            "runs": args.runs,
            "load": [load_before, os.getloadavg()[0]],
            "rows": rows,
        }
        Path(args.save).write_text(json.dumps(report, indent=2) + "\n")


if __name__ == "__main__":
    main()
