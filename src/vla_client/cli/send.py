"""``vla-client send``: send frames to a server and show what came back and where time went."""

from __future__ import annotations

import argparse
from typing import Any

import numpy as np

from vla_client.cli.common import (
    add_connection_options,
    add_encoding_options,
    frames_from_args,
    stage_percentiles,
)
from vla_client.cli.output import fail, print_json, print_table
from vla_client.client import ActionClient, ActionResult, mismatched_cameras
from vla_client.errors import VLAClientError
from vla_client.observation import Observation


def register(subparsers: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    parser = subparsers.add_parser("send", help="send observations to a server")
    add_connection_options(parser)
    add_encoding_options(parser)
    parser.add_argument("--image", action="append", default=[], metavar="NAME=PATH", help="a camera frame from an image file (repeatable)")
    parser.add_argument("--cameras", type=int, default=3, help="synthetic cameras when no --image is given")
    parser.add_argument("--height", type=int, default=360)
    parser.add_argument("--width", type=int, default=640)
    parser.add_argument("--state", default=None, help="comma-separated state vector, e.g. 0,0.1,0.2")
    parser.add_argument("--task", default="pick up the red block")
    parser.add_argument("--repeat", type=int, default=1, help="number of requests")
    parser.add_argument("--verify", action="store_true", help="check the server decoded exactly the pixels sent (lossless encodings)")
    parser.add_argument("--json", action="store_true", help="machine-readable output")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    if args.verify and args.encoding == "jpeg":
        return fail("--verify needs a lossless encoding (png, raw or pixels); jpeg is lossy")
    if args.repeat < 1:
        return fail("--repeat must be at least 1")
    try:
        state = None if args.state is None else np.array([float(x) for x in args.state.split(",")])
        client = ActionClient(
            args.url, encoding=args.encoding, wire=args.wire, timeout=args.timeout,
            api_key=args.api_key, jpeg_quality=args.jpeg_quality,
        )  # fmt: skip
        with client:
            results, mismatched = _send(client, args, state)
    except (VLAClientError, ValueError) as exc:
        return fail(str(exc))
    _report(args, results, mismatched)
    return 1 if mismatched else 0


def _send(client: ActionClient, args: argparse.Namespace, state: np.ndarray | None) -> tuple[list[ActionResult], list[str]]:
    results: list[ActionResult] = []
    mismatched: set[str] = set()
    for t in range(args.repeat):
        frames = frames_from_args(args.image, args.cameras, args.height, args.width, t=t)
        observation = Observation(frames, state=state, task=args.task)
        result = client.infer(observation, return_digest=args.verify)
        if args.verify:
            mismatched.update(mismatched_cameras(observation, result))
        results.append(result)
    return results, sorted(mismatched)


def _report(args: argparse.Namespace, results: list[ActionResult], mismatched: list[str]) -> None:
    last = results[-1]
    stages = stage_percentiles(results)
    if args.json:
        document: dict[str, Any] = {
            "url": args.url,
            "encoding": args.encoding,
            "wire": args.wire,
            "requests": len(results),
            "action_shape": list(last.actions.shape),
            "actions": last.actions,
            "bytes_sent": last.timings.bytes_sent,
            "timings_ms": {name: {"p50": p50, "p90": p90, "p99": p99} for name, p50, p90, p99 in stages},
        }
        if args.verify:
            document["lossless"] = not mismatched
            document["mismatched_cameras"] = mismatched
        print_json(document)
        return
    print(
        f"{len(results)} request(s) to {args.url}  encoding={args.encoding} wire={args.wire}  "
        f"actions {last.actions.shape[0]}x{last.actions.shape[1]}  sent {last.timings.bytes_sent / 1e6:.2f} MB"
    )
    print_table(("stage (ms)", "p50", "p90", "p99"), stages)
    if args.verify:
        print("lossless: yes" if not mismatched else f"lossless: NO, cameras differ: {', '.join(mismatched)}")
