"""``vla-client send``: send frames to a server and show what came back and where time went.

Frames come from live cameras, a video, image files, a recording (``--obs``) or synthetic
cameras. With ``--repeat N`` it prints p50/p90/p99 per stage and the bytes each camera costs;
``--json`` prints the same as one JSON document; ``--save-actions`` keeps every action chunk.
Any failure (server down, timeout, bad reply, unreadable input) exits 1 with one line on stderr.
"""

from __future__ import annotations

import argparse
import itertools
from typing import Any

from vla_client.cli.common import (
    add_connection_options,
    add_encoding_options,
    bytes_per_camera,
    stage_percentiles,
)
from vla_client.cli.output import fail, os_error_message, print_json, print_table
from vla_client.cli.progress import Progress
from vla_client.cli.sources import Source, add_source_options, open_source
from vla_client.client import ActionClient, ActionResult, mismatched_cameras
from vla_client.errors import VLAClientError
from vla_client.observation import Observation
from vla_client.recording import save_action_chunks


def register(subparsers: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    parser = subparsers.add_parser(
        "send",
        help="send observations to a server",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_connection_options(parser)
    add_encoding_options(parser)
    add_source_options(parser)
    parser.add_argument(
        "--repeat", type=int, default=None,
        help="number of requests (default 1, or every observation of --obs once)",
    )  # fmt: skip
    parser.add_argument(
        "--verify",
        action="store_true",
        help="check the server decoded exactly the pixels sent (lossless encodings)",
    )
    parser.add_argument("--json", action="store_true", help="machine-readable output")
    parser.add_argument(
        "--save-actions",
        metavar="FILE",
        help="write every action chunk to FILE (.npz, 'actions' [N, H, D])",
    )
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    if args.verify and args.encoding == "jpeg":
        return fail("--verify needs a lossless encoding (png, raw or pixels); jpeg is lossy")
    if args.repeat is not None and args.repeat < 1:
        return fail("--repeat must be at least 1")
    try:
        client = ActionClient(
            args.url, encoding=args.encoding, wire=args.wire, timeout_s=args.timeout,
            api_key=args.api_key, jpeg_quality=args.jpeg_quality,
        )  # fmt: skip
        args.wire = client.options.wire  # what the client chose for this URL
        with client, open_source(args) as source:
            first, results, mismatched = _send(client, args, source)
        if args.save_actions:
            save_action_chunks(args.save_actions, [result.actions for result in results])
        camera_bytes = bytes_per_camera(first, args.encoding, args.wire, args.jpeg_quality)
    except (VLAClientError, ValueError) as exc:
        return fail(str(exc))
    except OSError as exc:
        return fail(os_error_message(exc))
    _report(args, results, mismatched, camera_bytes)
    return 1 if mismatched else 0


def _send(
    client: ActionClient, args: argparse.Namespace, source: Source
) -> tuple[Observation, list[ActionResult], list[str]]:
    count = args.repeat or source.length or 1
    results: list[ActionResult] = []
    mismatched: set[str] = set()
    first: Observation | None = None
    with Progress(
        count, label="send", enabled=None if count > 1 and not args.json else False
    ) as bar:
        for observation in itertools.islice(source.observations, count):
            first = first or observation
            result = client.infer(observation, return_digest=args.verify)
            if args.verify:
                mismatched.update(mismatched_cameras(observation, result))
            results.append(result)
            bar.advance()
    if first is None:
        raise VLAClientError("the frame source gave no observations")
    return first, results, sorted(mismatched)


def _report(
    args: argparse.Namespace,
    results: list[ActionResult],
    mismatched: list[str],
    camera_bytes: dict[str, int],
) -> None:
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
            "bytes_per_camera": camera_bytes,
            "timings_ms": {
                name: {"p50": p50, "p90": p90, "p99": p99} for name, p50, p90, p99 in stages
            },
        }
        if args.save_actions:
            document["saved_actions"] = args.save_actions
        if args.verify:
            document["lossless"] = not mismatched
            document["mismatched_cameras"] = mismatched
        print_json(document)
        return
    shape = "x".join(map(str, last.actions.shape))
    print(
        f"{len(results)} request(s) to {args.url}  encoding={args.encoding} wire={args.wire}  "
        f"actions {shape}  sent {last.timings.bytes_sent / 1e6:.2f} MB"
    )
    print_table(("stage (ms)", "p50", "p90", "p99"), stages)
    print()
    print_table(("camera", "bytes"), [(name, size) for name, size in camera_bytes.items()])
    if args.save_actions:
        print(f"saved {len(results)} action chunk(s) to {args.save_actions}")
    if args.verify:
        print(
            "lossless: yes"
            if not mismatched
            else f"lossless: NO, cameras differ: {', '.join(mismatched)}"
        )
