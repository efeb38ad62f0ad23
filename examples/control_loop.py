"""Drive a simulated robot from a policy server at a fixed rate; report latency and jitter.

The loop asks the server for action chunks in the background while it plays the current one,
aligns each new chunk to the ticks that passed while it was computed, checks every action with a
safety gate sized from the server's metadata, and holds the last action if the server goes
silent. Cameras are synthetic scenes (`vla_client.scene`) and the robot is `SimRobot`, a set of
joints that integrate the velocity actions.

    python examples/control_loop.py http://127.0.0.1:8000 --rate 20 --seconds 10
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence

import numpy as np

from vla_client import ActionClient
from vla_client.control import (
    ChunkExecutor,
    ControlLoop,
    SafetyGate,
    SimRobot,
    Watchdog,
    WatchdogTrip,
)
from vla_client.control.sim import Frames
from vla_client.scene import SyntheticScene, camera_names


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("url", nargs="?", default="http://127.0.0.1:8000")
    parser.add_argument("--rate", type=float, default=20.0, help="control rate, Hz")
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--cameras", type=int, default=2)
    parser.add_argument("--size", type=int, default=224, help="square camera frames, pixels")
    parser.add_argument("--encoding", choices=["png", "jpeg", "raw"], default="jpeg")
    parser.add_argument("--wire", choices=["json", "msgpack"], default="msgpack")
    parser.add_argument("--task", default="pick up the red block")
    parser.add_argument("--blend", type=int, default=2, help="steps to cross-fade chunks over")
    parser.add_argument("--limit", type=float, default=1.0, help="clip each action to +-limit")
    parser.add_argument("--max-delta", type=float, default=0.5, help="clip per-tick change")
    parser.add_argument("--silence", type=float, default=1.0, help="watchdog timeout, seconds")
    return parser.parse_args(argv)


def camera_frames(cameras: int, size: int) -> Frames:
    """Renderers for each camera, built once: building a scene costs far more than a frame, and
    frames are taken on the control thread."""
    names = camera_names(cameras)
    scenes = {name: SyntheticScene(size, size, seed=i) for i, name in enumerate(names)}
    return lambda t: {name: scene.render(t) for name, scene in scenes.items()}


def report_trip(trip: WatchdogTrip) -> None:
    print(f"watchdog: no chunk for {trip.silent_s:.2f} s, now {trip.behaviour}")


def main(argv: Sequence[str] | None = None) -> None:
    args = parse_args(argv)
    with ActionClient(args.url, encoding=args.encoding, wire=args.wire) as client:
        metadata = client.metadata()
        horizon, action_dim = metadata.output.action_horizon, metadata.output.action_dim
        if horizon is None or action_dim is None:
            raise SystemExit(f"{args.url} does not announce its action horizon and dim")
        print(f"{args.url}: chunks of {horizon} x {action_dim} at {args.rate:g} Hz")

        robot = SimRobot(
            action_dim,
            1.0 / args.rate,
            frames=camera_frames(args.cameras, args.size),
            task=args.task,
        )
        gate = SafetyGate.from_metadata(
            metadata,
            low=-args.limit,
            high=args.limit,
            on_bounds="clip",
            max_delta=args.max_delta,
            on_delta="clip",
        )
        executor = ChunkExecutor(
            client.infer,
            prefetch_at=max(1, horizon // 2),
            blend_steps=args.blend,
            max_observation_age_s=2.0 / args.rate,
            reply_deadline_s=horizon / args.rate,
            validate=gate.check_chunk,
        )
        watchdog = Watchdog(args.silence, "hold", on_trip=report_trip)
        loop = ControlLoop(
            observe=robot.observe,
            executor=executor,
            apply_action=robot.apply,
            rate_hz=args.rate,
            gate=gate,
            watchdog=watchdog,
        )
        try:
            stats = loop.run(ticks=int(args.seconds * args.rate))
        finally:
            executor.close(timeout=2.0)

    counters = executor.stats
    print(
        f"ticks {stats.ticks}: applied {stats.applied}, idle {stats.idle}, "
        f"overruns {stats.overruns}, clipped {gate.clipped}, watchdog trips {watchdog.trips}"
    )
    print(f"tick jitter ms:          {stats.jitter_ms()}")
    print(f"inference ms:            {counters.infer_ms()}")
    print(f"observation->action ms:  {counters.observation_to_action_ms()}")
    network = [s.network_ms for s in counters.latencies if s.network_ms is not None]
    if network:
        print(f"network ms (median):     {np.median(network):.2f}")
    print(
        f"chunks {counters.chunks_received}/{counters.requests_sent} requests; "
        f"stale observations {counters.stale_observations}, "
        f"mismatched {counters.dropped_mismatched}, late {counters.dropped_late}, "
        f"errors {counters.errors}"
    )
    print(f"final joint positions: {np.round(robot.position, 3)}")


if __name__ == "__main__":
    main()
