"""Measure task success per delay, chunk mode and encoding, and write it into the docs.

Runs ``vla-client eval`` (simulated time, the built-in reach task and policy on a local server)
for every one-way delay x chunk mode, once per encoding, then a small real-time matrix to show
the two clocks agree; saves the reports and renders them as docs/evaluation-table.md and
docs/img/eval-success.png. The docs' evaluation figures are generated, never typed:

    PYTHONPATH=src python benchmarks/eval_matrix.py --episodes 8
    python benchmarks/eval_matrix.py --render-only     # redraw from the saved report

Real-time chunking has its own matrix (``--rtc-episodes N``; ``--encodings ""
--agreement-episodes 0`` runs it alone): every mode, rtc included, against the stochastic
flow policy (`ReachFlowPolicy`, which ``vla-client eval --mode rtc`` serves when given no URL),
with the seam metric and the median observation-to-action time per cell, written to
docs/evaluation-rtc-table.md and docs/img/eval-rtc.png.

One encoding's matrix takes about a minute on two busy cores; ``--encodings png`` runs one.
Reports of earlier encodings in the saved file are kept, so the matrix can be run in parts.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import io
import json
import os
import platform
import sys
from pathlib import Path
from typing import Any

from vla_client.cli.eval_run import PLOT_STYLES

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "benchmarks" / "results-eval.json"
TABLE = ROOT / "docs" / "evaluation-table.md"
FIGURE = ROOT / "docs" / "img" / "eval-success.png"
DELAYS_MS = ("0", "50", "100", "200")
MODES = ("naive", "aligned", "blended")
RTC_MODES = (*MODES, "rtc")
RTC_TABLE = ROOT / "docs" / "evaluation-rtc-table.md"
RTC_FIGURE = ROOT / "docs" / "img" / "eval-rtc.png"
AGREEMENT_DELAYS_MS = ("0", "100")


def eval_report(*args: str) -> dict[str, Any]:
    """One in-process ``vla-client eval ... --json`` run's document."""
    from vla_client.cli import main

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = main(["eval", *args, "--json"])
    if code != 0:
        raise SystemExit(f"vla-client eval {' '.join(args)} exited {code}")
    document: dict[str, Any] = json.loads(out.getvalue())
    return document


def measure(
    encodings: list[str], episodes: int, agreement_episodes: int, rtc_episodes: int = 0
) -> dict[str, Any]:
    """Run the matrix per encoding, the real-time agreement check and the real-time chunking
    matrix (each only when asked); the report, with what was not run kept from the saved one."""
    report: dict[str, Any] = json.loads(RESULTS.read_text()) if RESULTS.exists() else {}
    report.setdefault("matrix", {})
    if rtc_episodes:
        load_before = os.getloadavg()
        document = eval_report(
            "--episodes", str(rtc_episodes), "--delay-ms", *DELAYS_MS, "--mode", *RTC_MODES
        )
        document["load"] = [list(load_before), list(os.getloadavg())]
        document["date"] = datetime.date.today().isoformat()
        document["machine"] = _machine()
        report["rtc"] = document
        print(f"rtc: done, load {document['load']}", file=sys.stderr)
    for encoding in encodings:
        load_before = os.getloadavg()
        document = eval_report(
            "--encoding", encoding, "--episodes", str(episodes),
            "--delay-ms", *DELAYS_MS, "--mode", *MODES,
        )  # fmt: skip
        document["load"] = [list(load_before), list(os.getloadavg())]
        document["date"] = datetime.date.today().isoformat()
        report["matrix"][encoding] = document
        print(f"{encoding}: done, load {document['load']}", file=sys.stderr)
    if agreement_episodes:
        load_before = os.getloadavg()
        agreement = {}
        for clock in ("simulated", "real"):
            agreement[clock] = eval_report(
                "--time", clock, "--episodes", str(agreement_episodes),
                "--delay-ms", *AGREEMENT_DELAYS_MS, "--mode", "naive", "aligned",
            )  # fmt: skip
        agreement["load"] = [list(load_before), list(os.getloadavg())]
        report["agreement"] = agreement
    if encodings or agreement_episodes:
        report["machine"] = _machine()
    RESULTS.write_text(json.dumps(report, separators=(",", ":")) + "\n")
    return report


def _machine() -> dict[str, Any]:
    return {
        "platform": platform.platform(),
        "python": platform.python_version(),
        "cores": os.cpu_count(),
    }


def _rate(cell: dict[str, Any]) -> str:
    low, high = cell["success_interval_95"]
    return f"{100 * cell['success_rate']:.0f} % ({100 * low:.0f}-{100 * high:.0f})"


def _mean(cell: dict[str, Any], key: str) -> float:
    values = [e[key] for e in cell["episodes"] if e[key] == e[key]]  # NaN-free
    return sum(values) / len(values) if values else float("nan")


def render(report: dict[str, Any]) -> str:
    """The Markdown of the matrix and of the agreement check."""
    matrix = report["matrix"]
    first = next(iter(matrix.values()))
    machine = report["machine"]
    lines = [
        "<!-- generated by benchmarks/eval_matrix.py from benchmarks/results-eval.json; "
        "do not edit by hand -->",
        "",
        f"Measured with `vla-client eval` (simulated time, the reach task and policy on a local "
        f"server, {first['rate_hz']:g} Hz, {len(first['cells'][0]['episodes'])} seeded "
        f"episodes per cell, seeds 0 and up) on {machine['platform']}, {machine['cores']} "
        f"cores, Python {machine['python']}. Success rate with its 95 % Wilson interval; "
        "staleness is the mean number of ticks between an observation and its chunk's first "
        "use.",
        "",
    ]
    for encoding, document in matrix.items():
        load = ", ".join(f"{a[0]:.1f}" for a in document["load"])
        lines += [
            f"**{encoding}** ({document['wire']} over {document['transport']}), measured "
            f"{document['date']}, load average before/after {load}; round trip charged "
            f"{document['round_trip_ms']:.1f} ms (measured before the run).",
            "",
            "| delay (ms, one way) | mode | success | mean steps | staleness (ticks) |",
            "|---:|---|---:|---:|---:|",
        ]
        for cell in sorted(
            document["cells"], key=lambda c: (c["delay_ms"], MODES.index(c["mode"]))
        ):
            lines.append(
                f"| {cell['delay_ms']:g} | {cell['mode']} | {_rate(cell)} | "
                f"{_mean(cell, 'steps'):.0f} | {_mean(cell, 'staleness_ticks'):.1f} |"
            )
        lines.append("")
    agreement = report.get("agreement")
    if agreement:
        load = ", ".join(f"{a[0]:.1f}" for a in agreement["load"])
        sim, real = agreement["simulated"], agreement["real"]
        episodes = len(sim["cells"][0]["episodes"])
        lines += [
            f"Simulated against real time ({sim['encoding']}, {episodes} episodes per cell, load "
            f"average before/after {load}):",
            "",
            "| delay (ms, one way) | mode | simulated | real time |",
            "|---:|---|---:|---:|",
        ]
        for simulated, measured in zip(sim["cells"], real["cells"], strict=True):
            lines.append(
                f"| {simulated['delay_ms']:g} | {simulated['mode']} | {_rate(simulated)} | "
                f"{_rate(measured)} |"
            )
        lines.append("")
    return "\n".join(lines)


def render_rtc(report: dict[str, Any]) -> str:
    """The Markdown of the real-time chunking matrix."""
    document = report["rtc"]
    machine = document["machine"]
    load = ", ".join(f"{a[0]:.1f}" for a in document["load"])
    episodes = len(document["cells"][0]["episodes"])
    lines = [
        "<!-- generated by benchmarks/eval_matrix.py from benchmarks/results-eval.json; "
        "do not edit by hand -->",
        "",
        f"Measured {document['date']} with `vla-client eval --mode naive aligned blended rtc` "
        f"(simulated time, the reach task, the stochastic flow policy `reach-flow` on a local "
        f"server, {document['encoding']}/{document['wire']} over {document['transport']}, "
        f"{document['rate_hz']:g} Hz, {episodes} seeded episodes per cell, seeds 0 and up) on "
        f"{machine['platform']}, {machine['cores']} cores, load average before/after {load}; "
        f"round trip charged {document['round_trip_ms']:.1f} ms. Success rate with its 95 % "
        "Wilson interval; seams is the mean action jump where the robot switches chunks over "
        "the mean step between rows of one chunk (pooled over the cell's episodes); "
        "end-to-end is the median time from an observation's capture to its chunk's arrival "
        "(the mean of the episodes' medians, injected delay included).",
        "",
        "| delay (ms, one way) | mode | success | seams (jump / step) | end-to-end p50 (ms) |"
        " mean steps |",
        "|---:|---|---:|---:|---:|---:|",
    ]
    for cell in sorted(
        document["cells"], key=lambda c: (c["delay_ms"], RTC_MODES.index(c["mode"]))
    ):
        lines.append(
            f"| {cell['delay_ms']:g} | {cell['mode']} | {_rate(cell)} | "
            f"{cell['seams']['ratio']:.2f} | {_mean(cell, 'observation_to_action_ms'):.0f} | "
            f"{_mean(cell, 'steps'):.0f} |"
        )
    lines.append("")
    return "\n".join(lines)


def plot_rtc(report: dict[str, Any], path: Path) -> None:
    """Success and seams against delay, a line per mode, as ``vla-client eval --plot`` draws."""
    from vla_client.cli.eval_run import Cell, plot_success
    from vla_client.sim.episode import EpisodeResult
    from vla_client.sim.seams import Seams

    document = report["rtc"]
    cells = []
    for cell in document["cells"]:
        episodes = []
        for episode in cell["episodes"]:
            fields = {k: v for k, v in episode.items() if k != "seams"}
            seams = episode["seams"]
            fields["seams"] = Seams(
                seams["seams"], seams["mean_jump"] * seams["seams"] if seams["seams"] else 0.0,
                seams["within_steps"],
                seams["mean_step"] * seams["within_steps"] if seams["within_steps"] else 0.0,
            )  # fmt: skip
            episodes.append(EpisodeResult(**fields))
        cells.append(Cell(cell["mode"], cell["delay_ms"], episodes))
    title = f"reach task, flow policy, {len(cells[0].episodes)} episodes per point, simulated time"
    plot_success(cells, str(path), title)


def plot(report: dict[str, Any], path: Path) -> None:
    """Success rate against delay, one panel per encoding, one line per mode."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    matrix = report["matrix"]
    figure, axes = plt.subplots(1, len(matrix), figsize=(5 * len(matrix), 3.6), sharey=True)
    axes = axes if len(matrix) > 1 else [axes]
    for axis, (encoding, document) in zip(axes, matrix.items(), strict=True):
        for mode in MODES:
            cells = sorted(
                (c for c in document["cells"] if c["mode"] == mode), key=lambda c: c["delay_ms"]
            )
            delays = [c["delay_ms"] for c in cells]
            marker, line = PLOT_STYLES[mode]
            axis.plot(
                delays, [100 * c["success_rate"] for c in cells], marker=marker, linestyle=line,
                label=mode,
            )  # fmt: skip
            axis.fill_between(
                delays,
                [100 * c["success_interval_95"][0] for c in cells],
                [100 * c["success_interval_95"][1] for c in cells],
                alpha=0.12,
            )
        axis.set_title(f"{encoding}, measured {document['date']}", fontsize=10)
        axis.set_xlabel("one-way network delay (ms)")
        axis.grid(alpha=0.3)
    axes[0].set_ylabel("success rate (%)")
    axes[0].set_ylim(-2, 102)
    axes[-1].legend(title="chunk execution")
    figure.tight_layout()
    figure.savefig(path, dpi=100)
    plt.close(figure)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--encodings", default="png,jpeg", help="comma-separated; empty runs none (keeps the saved)"
    )
    parser.add_argument("--episodes", type=int, default=8, help="episodes per cell")
    parser.add_argument(
        "--agreement-episodes", type=int, default=3,
        help="episodes per cell of the real-time check (0 skips it)",
    )  # fmt: skip
    parser.add_argument(
        "--rtc-episodes", type=int, default=0,
        help="episodes per cell of the real-time chunking matrix (0 keeps the saved one)",
    )  # fmt: skip
    parser.add_argument("--render-only", action="store_true", help="redraw from the report")
    args = parser.parse_args()
    if args.render_only:
        report = json.loads(RESULTS.read_text())
    else:
        encodings = [name for name in args.encodings.split(",") if name]
        report = measure(encodings, args.episodes, args.agreement_episodes, args.rtc_episodes)
    TABLE.write_text(render(report))
    plot(report, FIGURE)
    print(f"wrote {TABLE.relative_to(ROOT)} and {FIGURE.relative_to(ROOT)}")
    if "rtc" in report:
        RTC_TABLE.write_text(render_rtc(report))
        plot_rtc(report, RTC_FIGURE)
        print(f"wrote {RTC_TABLE.relative_to(ROOT)} and {RTC_FIGURE.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
