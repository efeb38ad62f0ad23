"""Drive a simulated robot from a policy server at a fixed rate; report latency and jitter.

Three synthetic cameras are read together by a `CameraRig` into timestamped observations; the
loop asks the server for action chunks in the background while it plays the current one, aligns
each new chunk to the ticks that passed while it was computed, checks every action with a safety
gate sized from the server's metadata, and commands zero velocity if the server goes silent. The
robot is `SimRobot`, a set of joints that integrate the velocity actions: repeating the last
action through an outage (the watchdog's ``hold``, right for position control) would keep it
moving, so the watchdog's behaviour here is ``zero``.

A server that cannot be reached, or that fails during the run, ends the example with one line
on stderr and exit code 1.

With no ``--url`` it starts a local reference server (the same app `vla-client serve` runs)
and stops it at the end:

    python examples/control_loop.py --rate 20 --seconds 5
    python examples/control_loop.py --url http://robot-gpu:8000 --transport http
"""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import ExitStack, contextmanager
from typing import NoReturn

import numpy as np

from vla_client import ActionClient, VLAClientError
from vla_client.cameras import CameraRig, SyntheticCamera
from vla_client.cameras.scene import camera_names
from vla_client.control import (
    ChunkExecutor,
    ControlLoop,
    SafetyGate,
    SimRobot,
    Watchdog,
    WatchdogTrip,
    percentiles,
)
from vla_client.observation import Observation

# Safety limits for the reference policy, whose actions are tanh(.) * cos(0.1 * h * k) for joint
# k = 1..D at chunk step h: always within [-1, 1], so the bounds never bite on normal actions.
# Within a chunk its fastest joint (k = 7) changes by up to 2 sin(0.35) = 0.69 per tick; where a
# new chunk takes over, re-planned for where the robot has moved, steps of up to 0.87 were
# measured with blending (0.95 without). A limit of 0.5 clipped most ticks; 1.0 lets every normal
# step through and still clips the reversal of a large action. For another policy, pass its own
# envelope with --limit and --max-delta.
ACTION_LIMIT = 1.0
MAX_DELTA = 1.0


class OneLineParser(argparse.ArgumentParser):
    """Bad flags get one line and exit 2, without the usage block above it."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message} (see --help)\n")


def number(minimum: float, *, above: bool = True, whole: bool = False) -> Callable[[str], float]:
    """An argparse type: a finite number over `minimum` (or at least it, when not `above`)."""
    requirement = f"{'above' if above else 'at least'} {minimum:g}"

    def check(text: str) -> float:
        try:
            value = int(text) if whole else float(text)
        except ValueError:
            kind = "a whole number" if whole else "a number"
            raise argparse.ArgumentTypeError(f"must be {kind}, got {text!r}") from None
        if not math.isfinite(value) or value < minimum or (above and value == minimum):
            raise argparse.ArgumentTypeError(f"must be {requirement}, got {text!r}")
        return value

    return check


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = OneLineParser(description=__doc__.split("\n\n")[0])
    positive, count = number(0), number(1, above=False, whole=True)
    parser.add_argument("--url", help="policy server (default: start a local reference server)")
    parser.add_argument("--transport", choices=["websocket", "http"], default="websocket")
    parser.add_argument("--rate", type=positive, default=20.0, help="control rate, Hz")
    parser.add_argument("--seconds", type=positive, default=5.0)
    parser.add_argument("--cameras", type=count, default=3)
    parser.add_argument(
        "--size", type=number(8, above=False, whole=True), default=224,
        help="square camera frames, pixels",
    )  # fmt: skip
    parser.add_argument("--fps", type=positive, default=30.0, help="camera frame rate")
    parser.add_argument("--encoding", choices=["png", "jpeg", "raw"], default="jpeg")
    parser.add_argument("--task", default="pick up the red block")
    parser.add_argument(
        "--blend", type=number(0, above=False, whole=True), default=2,
        help="steps to cross-fade chunks over",
    )  # fmt: skip
    parser.add_argument("--limit", type=positive, default=ACTION_LIMIT, help="clip to +-limit")
    parser.add_argument(
        "--max-delta", type=positive, default=MAX_DELTA, help="clip per-tick change"
    )
    parser.add_argument("--silence", type=positive, default=1.0, help="watchdog timeout, seconds")
    return parser.parse_args(argv)


@contextmanager
def policy_server(url: str | None) -> Iterator[str]:
    """`url`, or a local reference server's for as long as the block runs."""
    if url is not None:
        yield url
        return
    from vla_client.server import LocalServer, ReferencePolicy, create_app

    with LocalServer(create_app(ReferencePolicy())) as server:
        print(f"started a local reference server at {server.url}")
        yield server.url


def camera_rig(count: int, size: int, fps: float) -> CameraRig:
    cameras = {
        name: SyntheticCamera(seed=i, width=size, height=size, fps=fps)
        for i, name in enumerate(camera_names(count))
    }
    return CameraRig(cameras)


def report_trip(trip: WatchdogTrip) -> None:
    print(f"watchdog: no chunk for {trip.silent_s:.2f} s, now {trip.behaviour}")


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        return run(args)
    except VLAClientError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1


def run(args: argparse.Namespace) -> int:
    with ExitStack() as stack:
        url = stack.enter_context(policy_server(args.url))
        client = stack.enter_context(
            ActionClient(url, transport=args.transport, encoding=args.encoding, wire="msgpack")
        )
        metadata = client.metadata()
        horizon, action_dim = metadata.output.action_horizon, metadata.output.action_dim
        if horizon is None or action_dim is None:
            raise SystemExit(f"{url} does not announce its action horizon and dim")
        print(
            f"{args.transport} to {url}: chunks of {horizon} x {action_dim} at {args.rate:g} Hz, "
            f"{args.cameras} cameras {args.size}x{args.size} {args.encoding}"
        )

        rig = stack.enter_context(camera_rig(args.cameras, args.size, args.fps))
        robot = SimRobot(action_dim, 1.0 / args.rate)

        def observe() -> Observation:
            return rig.capture(state=robot.position, task=args.task).observation

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
        # SimRobot takes velocities: when the server goes silent, stop moving.
        watchdog = Watchdog(args.silence, "zero", on_trip=report_trip)
        loop = ControlLoop(
            observe=observe,
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
    samples = list(counters.latencies)
    print(
        f"ticks {stats.ticks}: applied {stats.applied}, idle {stats.idle}, "
        f"overruns {stats.overruns}, clipped {gate.clipped}, watchdog trips {watchdog.trips}, "
        f"skipped {stats.skipped}"
    )
    print(f"tick jitter ms:          {stats.jitter_ms()}")
    print(f"inference round trip ms: {counters.infer_ms()}")
    print(f"observation->action ms:  {counters.observation_to_action_ms()}")
    print(f"  frame age at send ms:  {percentiles(s.observation_age_ms for s in samples)}")
    print(f"  server ms:             {percentiles(s.server_ms for s in samples if s.server_ms)}")
    print(
        f"chunks {counters.chunks_received}/{counters.requests_sent} requests; "
        f"stale observations {counters.stale_observations}, "
        f"mismatched {counters.dropped_mismatched}, late {counters.dropped_late}, "
        f"errors {counters.errors}, malformed {counters.malformed_replies}, "
        f"starved ticks {counters.starved_ticks}"
    )
    print(f"final joint positions: {np.round(robot.position, 3)}")
    return 0 if counters.chunks_received else 1


if __name__ == "__main__":
    sys.exit(main())
