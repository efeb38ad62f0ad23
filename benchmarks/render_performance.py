"""Write docs/performance-figures.md from the saved benchmark reports: the figures of the
Performance page are generated, never typed.

    python benchmarks/render_performance.py           # from the saved reports
    python benchmarks/render_performance.py --run     # run the benchmarks first (~5 min)

`--run` runs, and saves beside this script:
- ``vla-client bench --repeat 20 --save benchmarks/results-encoding.json``: every encoding x wire
  x transport against a local reference server;
- ``benchmarks/bench_fast_paths.py --save benchmarks/results-fast-paths.json``: each fast path
  against the path before it, in one run;
- ``benchmarks/bench_import.py --save benchmarks/results-import.json``: import times against the
  revision before the lazy package faces;
- ``benchmarks/bench_control_loop.py --save benchmarks/results-control-loop.json``: how steadily
  the control loop holds 50 Hz while inferences run beside it;
- ``benchmarks/bench_floors.py -n 150 --json benchmarks/results-floors.json``: the fastest paths
  against their floors (issue 27's targets), in one run.
Each section of the page says when and how its report was measured.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
HERE = ROOT / "benchmarks"
OUT = ROOT / "docs" / "performance-figures.md"
sys.path.insert(0, str(HERE))

from render_encoding_table import render, render_fast_paths  # noqa: E402

RUNS = (
    [
        "-m",
        "vla_client.cli",
        "bench",
        "--repeat",
        "20",
        "--save",
        "benchmarks/results-encoding.json",
    ],
    ["benchmarks/bench_fast_paths.py", "--save", "benchmarks/results-fast-paths.json"],
    ["benchmarks/bench_import.py", "--save", "benchmarks/results-import.json"],
    ["benchmarks/bench_control_loop.py", "--save", "benchmarks/results-control-loop.json"],
    ["benchmarks/bench_floors.py", "-n", "150", "--json", "benchmarks/results-floors.json"],
)


def run_benchmarks() -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    for arguments in RUNS:
        print("running", " ".join(arguments), flush=True)
        subprocess.run([sys.executable, *arguments], cwd=ROOT, env=env, check=True)


def render_imports(report: dict[str, Any]) -> str:
    """The import-time table of a ``bench_import.py --save`` report."""
    if report.get("format") != "vla-client.import-times":
        raise ValueError("not a bench_import.py report")
    load = report["load"]
    lines = [
        f"Import times in fresh interpreters, median of {report['runs']} each, this tree and "
        f"revision {report['base']} (before the lazy package faces) timed alternately by "
        f"`benchmarks/bench_import.py` on {report['date']} (load average {load[0]:.2f} before, "
        f"{load[1]:.2f} after).",
        "",
        "| statement | before | now | now / before |",
        "|---|---:|---:|---:|",
    ]
    for row in report["rows"]:
        ratio = row["this_ms"] / row["base_ms"]
        lines.append(
            f"| `{row['statement']}` | {row['base_ms']:.0f} ms | {row['this_ms']:.0f} ms "
            f"| {ratio:.2f} |"
        )
    return "\n".join(lines) + "\n"


def render_control_loop(report: dict[str, Any]) -> str:
    """The control loop's timing of a ``bench_control_loop.py --save`` report."""
    if report.get("format") != "vla-client.control-loop":
        raise ValueError("not a bench_control_loop.py report")
    jitter, latency, load = report["jitter_ms"], report["observation_to_action_ms"], report["load"]
    received, sent = report["chunks"]
    return "\n".join(
        [
            f"`ControlLoop` at {report['rate_hz']:g} Hz for {report['seconds']:g} s against a "
            f"fake policy taking {report['infer_ms']:g} ms per {report['horizon']}-step chunk, "
            f"driving `SimRobot` (no network), by `benchmarks/bench_control_loop.py` on "
            f"{report['date']} (load average {load[0]:.2f} before, {load[1]:.2f} after).",
            "",
            "| measure | p50 | p90 | p99 | max |",
            "|---|---:|---:|---:|---:|",
            f"| tick start jitter | {jitter['p50']:.2f} ms | {jitter['p90']:.2f} ms "
            f"| {jitter['p99']:.2f} ms | {jitter['max']:.2f} ms |",
            f"| observation to action | {latency['p50']:.1f} ms | {latency['p90']:.1f} ms "
            f"| {latency['p99']:.1f} ms | {latency['max']:.1f} ms |",
            "",
            f"{report['ticks']} ticks in {report['wall_s']:.3f} s (ideal {report['ideal_s']:.3f} "
            f"s), {report['overruns']} overruns, {received} of {sent} chunks used.",
            "",
        ]
    )


def render_floors(report: dict[str, Any]) -> str:
    """The ratio table of a ``bench_floors.py --json`` report."""
    if "ratios" not in report or "header" not in report:
        raise ValueError("not a bench_floors.py report")
    lines = [
        f"Each fast path against its floor, measured in the same run by "
        f"`benchmarks/bench_floors.py` ({report['header']}; median of {report['rounds']} rounds, "
        "every measurement one turn a round in a shuffled order). Medians in ms; the target is "
        "the ratio's.",
        "",
        "| path | ours | floor | floor ms | ratio | target |",
        "|---|---:|---|---:|---:|---|",
    ]
    for row in report["ratios"]:
        lines.append(
            f"| {row['target'].strip()} | {row['ours_ms']:.2f} | {row['floor']} "
            f"| {row['floor_ms']:.2f} | {row['ratio']:.2f} | {row['goal']} |"
        )
    return "\n".join(lines) + "\n"


def page() -> str:
    """docs/performance-figures.md as the saved reports give it."""
    encoding = json.loads((HERE / "results-encoding.json").read_text())
    fast = json.loads((HERE / "results-fast-paths.json").read_text())
    imports = json.loads((HERE / "results-import.json").read_text())
    control = json.loads((HERE / "results-control-loop.json").read_text())
    floors = json.loads((HERE / "results-floors.json").read_text())
    return "\n".join(
        [
            "<!-- generated by benchmarks/render_performance.py; do not edit by hand -->",
            "",
            "### Every path, end to end",
            "",
            render(encoding, fast.get("date", "")).split("\n", 2)[2],
            "### The fast paths against the paths before them",
            "",
            render_fast_paths(fast),
            "### Import time",
            "",
            render_imports(imports),
            "### The control loop's rate",
            "",
            render_control_loop(control),
            "### The fastest paths against their floors",
            "",
            render_floors(floors),
        ]
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--run", action="store_true", help="run the benchmarks first")
    args = parser.parse_args()
    if args.run:
        run_benchmarks()
    OUT.write_text(page())
    print(f"wrote {OUT.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
