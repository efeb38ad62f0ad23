"""How steadily does `ControlLoop` hold its rate while inferences run in the background?

Runs the loop at 50 Hz (by default) for a few seconds against a fake policy that takes ~30 ms per
chunk, driving a `SimRobot`, and prints tick-start jitter percentiles (actual minus scheduled
start), overruns, and the executor's latency and drop counters. The tests assert no timing; this
is where the rate and jitter are measured and reported.

    PYTHONPATH=src python benchmarks/bench_control_loop.py --rate 50 --seconds 5 --infer-ms 30

``--save FILE.json`` writes the figures for the Performance page
(``benchmarks/render_performance.py``).
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import json
import os
import platform
import time
from pathlib import Path

import numpy as np

from vla_client.client.result import ActionResult, Timings
from vla_client.control import ChunkExecutor, ControlLoop, SafetyGate, SimRobot, Watchdog
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
    args = parser.parse_args()
    load_before = os.getloadavg()[0]

    robot = SimRobot(args.action_dim, 1.0 / args.rate)
    policy = FakePolicy(args.horizon, args.action_dim, args.infer_ms)
    gate = SafetyGate(action_dim=args.action_dim, horizon=args.horizon, low=-5, high=5)
    executor = ChunkExecutor(
        policy,
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
    )
    ticks = int(args.seconds * args.rate)
    started = time.monotonic()
    stats = loop.run(ticks=ticks)
    wall = time.monotonic() - started
    executor.close(timeout=2.0)

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


if __name__ == "__main__":
    main()
