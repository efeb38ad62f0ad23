"""What importing vla_client costs, in fresh interpreters, against another revision in one run.

    python benchmarks/bench_import.py [--base REV] [--runs 10] [--save results-import.json]

For each statement, this tree and REV (checked out from git into a temporary folder) are timed
alternately, `--runs` fresh interpreters each, and the medians and their ratio printed. The
time is the import alone, measured inside the interpreter (`time.perf_counter` around the
statement), so interpreter start-up is not counted. Ratios are what to trust on a shared,
noisy machine; the absolute times move with its load.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import statistics
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
STATEMENTS = (
    "import vla_client",
    "from vla_client import ActionClient, Observation",
    "import vla_client.server.worker.process",
    # what the worker serving the reference policy imports (unpacking it imports its module)
    "import vla_client.server.worker.process, vla_client.server.policies.reference",
    "import vla_client.control",
)
PROBE = (
    "import time; start = time.perf_counter(); {statement}; "
    "print((time.perf_counter() - start) * 1000)"
)


def time_once(src: Path, statement: str) -> float:
    """Milliseconds `statement` takes in a fresh interpreter importing from `src`."""
    env = {**os.environ, "PYTHONPATH": str(src)}
    result = subprocess.run(
        [sys.executable, "-c", PROBE.format(statement=statement)],
        capture_output=True, text=True, env=env, check=True,
    )  # fmt: skip
    return float(result.stdout)


def checkout(revision: str, folder: Path) -> Path:
    """The ``src`` folder of `revision`, extracted into `folder`."""
    archive = folder / "tree.tar"
    subprocess.run(
        ["git", "-C", str(ROOT), "archive", "--output", str(archive), revision, "src"],
        check=True,
    )
    with tarfile.open(archive) as tar:
        tar.extractall(folder, filter="data")
    return folder / "src"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base", default="a4508a7", help="revision to compare against")
    parser.add_argument("--runs", type=int, default=10, help="fresh interpreters per cell")
    parser.add_argument("--save", metavar="FILE.json", help="write the figures as JSON")
    args = parser.parse_args()
    load_before = os.getloadavg()[0]
    rows = []
    with tempfile.TemporaryDirectory() as folder:
        base_src = checkout(args.base, Path(folder))
        print(f"import time, median of {args.runs} fresh interpreters; load {load_before:.2f}")
        print(f"{'statement':<48} {args.base:>10} {'this tree':>10} {'ratio':>7}")
        for statement in STATEMENTS:
            base, this = [], []
            for _ in range(args.runs):
                base.append(time_once(base_src, statement))
                this.append(time_once(ROOT / "src", statement))
            b, t = statistics.median(base), statistics.median(this)
            rows.append({"statement": statement, "base_ms": b, "this_ms": t})
            print(f"{statement:<48} {b:>8.1f}ms {t:>8.1f}ms {t / b:>7.2f}")
    if args.save:
        report = {
            "format": "vla-client.import-times",
            "date": datetime.date.today().isoformat(),
            "base": args.base,
            "runs": args.runs,
            "load": [load_before, os.getloadavg()[0]],
            "rows": rows,
        }
        Path(args.save).write_text(json.dumps(report, indent=2) + "\n")


if __name__ == "__main__":
    main()
