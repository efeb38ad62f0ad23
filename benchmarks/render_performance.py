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
- ``benchmarks/bench_ros2.py --save benchmarks/results-ros2.json``: the live ROS 2 node's loop
  against the same loop fed by synthetic cameras;
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
    [
        "benchmarks/bench_ros2.py",
        "--seconds",
        "5",
        "--rounds",
        "3",
        "--save",
        "benchmarks/results-ros2.json",
    ],
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


def render_ros2(report: dict[str, Any]) -> str:
    """The live ROS 2 node against synthetic cameras, of a ``bench_ros2.py --save`` report."""
    if report.get("format") != "vla-client.ros2":
        raise ValueError("not a bench_ros2.py report")
    count, height, width = report["cameras"]
    load = report["load"]
    lines = [
        f"The same `ControlLoop` at {report['rate_hz']:g} Hz fed by `vla-client ros2`'s bridge "
        f"({count} {width}x{height} rgb8 `sensor_msgs/Image` topics at "
        f"{report['camera_rate_hz']:g} Hz and a JointState, through a Zenoh router in the "
        f"process; commands as `Float64MultiArray` to a subscriber) and by {count} synthetic "
        f"cameras read in the tick, runs alternating, {report['rounds']} x "
        f"{report['seconds']:g} s each, a fake policy of {report['infer_ms']:g} ms, by "
        f"`benchmarks/bench_ros2.py` on {report['date']} ({report['cpus']} CPUs, load average "
        f"{load[0]:.2f} before, {load[1]:.2f} after). The frame-to-request time of the node "
        "includes waiting for the loop's next tick (half a period on average); its own work is "
        "the per-tick reading.",
        "",
        "| measure | ROS 2 p50 | p99 | synthetic p50 | p99 | ratio p50 | ratio p99 |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    names = {
        "latency_ms": "frame to request",
        "observe_ms": "reading the cameras, a tick",
        "jitter_ms": "tick start jitter",
    }
    for key, name in names.items():
        ros, synthetic = report["figures"][key]["ros2"], report["figures"][key]["synthetic"]
        lines.append(
            f"| {name} | {ros['p50']:.2f} ms | {ros['p99']:.2f} ms | {synthetic['p50']:.2f} ms "
            f"| {synthetic['p99']:.2f} ms | {ros['p50'] / synthetic['p50']:.2f} "
            f"| {ros['p99'] / synthetic['p99']:.2f} |"
        )
    arrival = report["arrival_jitter_ms"]
    lines += [
        "",
        f"Commands as the subscriber received them: {report['commands_received']} for "
        f"{report['ticks']['ros2']} ticks applied, each {arrival['p50']:.2f} ms from a period "
        f"after the one before at the median, {arrival['p99']:.2f} ms at p99.",
        "",
    ]
    return "\n".join(lines)


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
    ros2 = json.loads((HERE / "results-ros2.json").read_text())
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
            "### The live ROS 2 node",
            "",
            render_ros2(ros2),
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
