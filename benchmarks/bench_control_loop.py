"""How steadily does `ControlLoop` hold its rate while inferences run in the background?

Runs the loop at 50 Hz (by default) for a few seconds against a fake policy that takes ~30 ms per
chunk, driving a `SimRobot`, and prints tick-start jitter percentiles (actual minus scheduled
start), overruns, and the executor's latency and drop counters. The tests assert no timing; this
is where the rate and jitter are measured and reported.

    PYTHONPATH=src python benchmarks/bench_control_loop.py --rate 50 --seconds 5 --infer-ms 30

``--save FILE.json`` writes the figures for the Performance page
(``benchmarks/render_performance.py``).

``--rerun`` measures what logging to Rerun costs the loop: it runs the loop ``--rounds`` times
each without and with a `RerunLog` writing an ``.rrd`` file (two 224x224 cameras sent per
request, the state and action every tick, each chunk as a plan), alternating so both see the
same load, and prints the tick jitter of each (needs the ``rerun`` extra):

    PYTHONPATH=src python benchmarks/bench_control_loop.py --rerun --rounds 3 --seconds 5
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import json
import os
import platform
import tempfile
import time
from pathlib import Path

import numpy as np

from vla_client.cameras.scene import synthetic_frames
from vla_client.client.result import ActionResult, Timings
from vla_client.control import (
    ChunkExecutor,
    ControlLoop,
    LoopStats,
    Percentiles,
    SafetyGate,
    SimRobot,
    Watchdog,
    percentiles,
)
from vla_client.observation import Observation


class FakePolicy:
    """Sleeps ~`infer_ms` (as a server and network would), then returns a chunk that steers the
    robot's state toward `goal` at a constant gain, with a fresh request id."""

    def __init__(self, horizon: int, action_dim: int, infer_ms: float, seed: int = 0) -> None:
        self.horizon = horizon
        self.infer_s = infer_ms / 1e3
        self.goal = np.linspace(-1.0, 1.0, action_dim, dtype=np.float32)
        self._rng = np.random.default_rng(seed)
        self._requests = 0

    def __call__(self, observation: Observation) -> ActionResult:
        self._requests += 1
        started = time.perf_counter()
        time.sleep(max(0.0, self._rng.normal(self.infer_s, self.infer_s * 0.1)))
        assert observation.state is not None
        velocity = 2.0 * (self.goal - observation.state)
        actions = np.repeat(velocity[None, :], self.horizon, axis=0).astype(np.float32)
        elapsed_ms = (time.perf_counter() - started) * 1e3
        timings = Timings(0.0, elapsed_ms, 0.0, 0, 0, server={"total_ms": elapsed_ms * 0.8})
        return ActionResult(actions, f"req-{self._requests}", timings, raw={})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rate", type=float, default=50.0, help="control rate, Hz")
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--infer-ms", type=float, default=30.0, help="fake inference time")
    parser.add_argument("--horizon", type=int, default=10)
    parser.add_argument("--prefetch-at", type=int, default=4)
    parser.add_argument("--blend", type=int, default=2)
    parser.add_argument("--action-dim", type=int, default=7)
    parser.add_argument("--save", metavar="FILE.json", help="write the figures as JSON")
    parser.add_argument(
        "--rerun", action="store_true", help="compare the jitter without and with a RerunLog"
    )
    parser.add_argument("--rounds", type=int, default=3, help="with --rerun: runs of each")
    args = parser.parse_args()
    if args.rerun:
        compare_rerun(args)
        return
    load_before = os.getloadavg()[0]
    robot, policy, executor, watchdog, stats, wall = run_loop(args)
    ticks = stats.ticks

    counters = executor.stats
    print(f"python {platform.python_version()} on {platform.machine()}")
    print(
        f"{stats.ticks} ticks at {args.rate:g} Hz in {wall:.3f} s "
        f"(ideal {(ticks - 1) / args.rate:.3f} s); applied {stats.applied}, idle {stats.idle}, "
        f"overruns {stats.overruns}, skipped {stats.skipped}"
    )
    print(f"tick jitter ms:          {stats.jitter_ms()}")
    print(f"inference ms:            {counters.infer_ms()}")
    print(f"observation->action ms:  {counters.observation_to_action_ms()}")
    print(
        f"chunks {counters.chunks_received}/{counters.requests_sent} requests; "
        f"stale obs {counters.stale_observations}, mismatched {counters.dropped_mismatched}, "
        f"late {counters.dropped_late}, errors {counters.errors}, "
        f"starved ticks {counters.starved_ticks}, watchdog trips {watchdog.trips}"
    )
    print(f"sim position error to goal: {np.abs(robot.position - policy.goal).max():.4f}")
    if args.save:
        report = {
            "format": "vla-client.control-loop",
            "date": datetime.date.today().isoformat(),
            "load": [load_before, os.getloadavg()[0]],
            "rate_hz": args.rate,
            "seconds": args.seconds,
            "infer_ms": args.infer_ms,
            "horizon": args.horizon,
            "ticks": stats.ticks,
            "wall_s": wall,
            "ideal_s": (ticks - 1) / args.rate,
            "overruns": stats.overruns,
            "skipped": stats.skipped,
            "jitter_ms": dataclasses.asdict(stats.jitter_ms()),
            "observation_to_action_ms": dataclasses.asdict(counters.observation_to_action_ms()),
            "chunks": [counters.chunks_received, counters.requests_sent],
        }
        Path(args.save).write_text(json.dumps(report, indent=2) + "\n")


def run_loop(
    args: argparse.Namespace, log: object = None, cameras: int = 0
) -> tuple[SimRobot, FakePolicy, ChunkExecutor, Watchdog, LoopStats, float]:
    """One run of the loop: `cameras` 224x224 frames a step (0: the robot's blank 16x16 one),
    logged to `log` (a `RerunLog`) when given."""
    frames = (lambda t: synthetic_frames(cameras, 224, 224, t=t)) if cameras else None
    robot = SimRobot(args.action_dim, 1.0 / args.rate, **({"frames": frames} if frames else {}))
    policy = FakePolicy(args.horizon, args.action_dim, args.infer_ms)
    gate = SafetyGate(action_dim=args.action_dim, horizon=args.horizon, low=-5, high=5)
    infer = policy if log is None else log.infer(policy)  # type: ignore[attr-defined]
    executor = ChunkExecutor(
        infer,
        prefetch_at=args.prefetch_at,
        blend_steps=args.blend,
        max_observation_age_s=0.1,
        reply_deadline_s=0.5,
        validate=gate.check_chunk,
    )
    watchdog = Watchdog(0.5, "zero")  # SimRobot takes velocities
    loop = ControlLoop(
        observe=robot.observe,
        executor=executor,
        apply_action=robot.apply,
        rate_hz=args.rate,
        gate=gate,
        watchdog=watchdog,
        log=log,  # type: ignore[arg-type]
    )
    ticks = int(args.seconds * args.rate)
    started = time.monotonic()
    stats = loop.run(ticks=ticks)
    wall = time.monotonic() - started
    executor.close(timeout=2.0)
    return robot, policy, executor, watchdog, stats, wall


def compare_rerun(args: argparse.Namespace) -> None:
    """Tick jitter without and with a `RerunLog`, runs alternating; all ticks of a mode pooled."""
    from vla_client.viz import RerunLog

    load_before = os.getloadavg()[0]
    jitter: dict[str, list[float]] = {"without": [], "with Rerun": []}
    dropped = 0
    with tempfile.TemporaryDirectory(prefix="vla-rerun-bench-") as scratch:
        for round_ in range(args.rounds):
            jitter["without"] += run_loop(args, cameras=2)[4].jitter_s
            with RerunLog(Path(scratch) / f"run{round_}.rrd") as log:
                jitter["with Rerun"] += run_loop(args, log, cameras=2)[4].jitter_s
            dropped += log.dropped
            size = (Path(scratch) / f"run{round_}.rrd").stat().st_size
    now = datetime.datetime.now(datetime.timezone.utc)
    print(
        f"{now:%Y-%m-%d %H:%M} UTC, python {platform.python_version()} on {platform.machine()}, "
        f"{os.cpu_count()} CPUs, load {load_before:.2f} -> {os.getloadavg()[0]:.2f}"
    )
    print(
        f"{args.rounds} x {args.seconds:g} s at {args.rate:g} Hz each, 2 cameras 224x224, "
        f"{args.infer_ms:g} ms inference; last .rrd {size / 1e6:.1f} MB, {dropped} dropped"
    )
    for mode, samples in jitter.items():
        summary: Percentiles = percentiles(j * 1e3 for j in samples)
        print(f"tick jitter ms, {mode:>10}: {summary}")


if __name__ == "__main__":
    main()
