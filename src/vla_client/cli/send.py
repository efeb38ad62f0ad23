"""``vla-client send``: send frames to a server and show what came back and where time went.

Frames come from live cameras, a video, image files, a recording (``--obs``) or synthetic
cameras. Requests go out as fast as the server answers, or paced: ``--rate 10`` sends 10 per
second, ``--rate recorded`` keeps the timing of the ``--obs`` recording. With ``--repeat N`` it
prints p50/p90/p99 per stage, the bytes sent and received (in total and per request) and the
bytes each camera costs; ``--json`` prints the same as one JSON document; ``--save-actions``
keeps every action chunk. Output paths and the websocket library are checked before the first
request. Any failure (server down, timeout, bad reply, unreadable input) exits 1 with one line on
stderr.
"""

from __future__ import annotations

import argparse
import itertools
import statistics
import sys
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from vla_client.cli.checks import check_output_file, file_type
from vla_client.cli.common import (
    add_connection_options,
    add_encoding_options,
    add_fit_options,
    announced_layout,
    bytes_per_camera,
    check_transport_installed,
    client_options,
    server_metadata,
    stage_percentiles,
    warn_unmatched_camera_map,
)
from vla_client.cli.failures import failure_line
from vla_client.cli.output import fail, human_bytes, print_json, print_table
from vla_client.cli.parser import RECORDED, positive_int, send_rate
from vla_client.cli.progress import Progress
from vla_client.cli.rerun_option import add_rerun_option, check_rerun, rerun_log
from vla_client.cli.server_wait import wait_for_server
from vla_client.cli.sources import (
    Source,
    add_source_options,
    open_source,
    source_kind,
    synthetic_plan,
)
from vla_client.errors import VLAClientError

if TYPE_CHECKING:  # imported where used: the options are added without them
    import numpy as np
    import numpy.typing as npt

    from vla_client.client import ActionClient, ActionResult
    from vla_client.observation import Observation
    from vla_client.viz.rerun_log import RerunLog


def register(parser: argparse.ArgumentParser) -> None:
    """The command's options, on its `parser`."""
    add_connection_options(parser)
    add_encoding_options(parser)
    add_fit_options(parser)
    add_source_options(parser)
    parser.add_argument(
        "--repeat", type=positive_int, default=None, metavar="N",
        help="number of requests (default: 1, or every observation of --obs once)",
    )  # fmt: skip
    parser.add_argument(
        "--rate", type=send_rate, default=None, metavar="recorded|HZ",
        help="pace the requests: HZ per second, or 'recorded' to keep the timing of the --obs "
        "recording (default: as fast as the server answers)",
    )  # fmt: skip
    parser.add_argument(
        "--verify",
        action="store_true",
        help="check the server decoded exactly the pixels sent (lossless encodings)",
    )
    parser.add_argument("--json", action="store_true", help="machine-readable output")
    parser.add_argument(
        "--print-actions", action="store_true",
        help="print every action chunk received, one row per step (with --json: every chunk "
        "under 'all_actions')",
    )  # fmt: skip
    parser.add_argument(
        "--save-actions",
        metavar="FILE.npz",
        type=file_type(".npz"),
        help="write every action chunk to FILE.npz ('actions', float32 [N, H, D])",
    )
    add_rerun_option(parser)
    parser.set_defaults(func=run)


@dataclass(frozen=True)
class Sent:
    """What a run of requests gave back, and how long it took from first send to last reply."""

    first: Observation
    results: list[ActionResult]
    mismatched: list[str]
    duration_s: float
    planned: int
    stopped: BaseException | None = None
    """What ended the run before `planned` requests (Ctrl-C, a failed request), if anything."""


def run(args: argparse.Namespace) -> int:
    kind = _source_kind(args)
    from vla_client.client import ActionClient
    from vla_client.recording import save_action_chunks

    try:
        if args.save_actions:
            check_output_file(args.save_actions, "--save-actions")
        check_rerun(args)
        check_transport_installed(args.url, args.layout, args.endpoint)
        client = ActionClient(args.url, **client_options(args))
        args.encoding, args.wire = client.options.encoding, client.options.wire  # as chosen
        with client:
            plan = None
            if kind == "synthetic":  # fitted to the server: asked first
                wait_for_server(args.url, args.wait_for_server)
                plan = synthetic_plan(args, server_metadata(client), announced_layout(client))
            with (
                open_source(args, plan) as source,
                rerun_log(args, period_s=plan_period(args.rate, source)) as log,
            ):
                if plan is None:  # the source opened first: a camera that does not is said at once
                    wait_for_server(args.url, args.wait_for_server)
                sent = _send(client, args, source, log)
        if args.save_actions:
            save_action_chunks(args.save_actions, [result.actions for result in sent.results])
        camera_bytes = bytes_per_camera(sent.first, args.encoding, args.wire, args.jpeg_quality)
    except (VLAClientError, ValueError, OSError) as exc:
        return fail(failure_line(exc, args))
    _report(args, sent, camera_bytes)
    return _exit_status(args, sent)


def _source_kind(args: argparse.Namespace) -> str:
    """The kind of frame source the options name; `ArgumentError` for ``--verify`` of a lossy
    encoding, or ``--rate recorded`` without a recording."""
    if args.verify and args.encoding == "jpeg":
        raise argparse.ArgumentError(
            None, "--verify needs a lossless encoding (png, raw or pixels); jpeg is lossy"
        )
    kind = source_kind(args)
    if args.rate == RECORDED and kind not in ("obs", "bag"):
        raise argparse.ArgumentError(
            None, "--rate recorded needs a recording: add --obs FILE or --bag PATH"
        )
    return kind


def _exit_status(args: argparse.Namespace, sent: Sent) -> int:
    """The exit status after the report: 130 after Ctrl-C and 1 after a failed request (each
    said in a line on stderr), 1 for a camera that came back changed, else 0."""
    if isinstance(sent.stopped, KeyboardInterrupt):
        return fail(f"stopped by Ctrl-C after {len(sent.results)} of {sent.planned} requests", 130)
    if sent.stopped is not None:
        assert isinstance(sent.stopped, Exception)
        line = failure_line(sent.stopped, args)
        return fail(f"request {len(sent.results) + 1} of {sent.planned} failed: {line}")
    return 1 if sent.mismatched else 0


def _send(
    client: ActionClient, args: argparse.Namespace, source: Source, log: RerunLog | None = None
) -> Sent:
    count = args.repeat or source.length or 1
    results: list[ActionResult] = []
    mismatched: set[str] = set()
    first: Observation | None = None
    started = previous = time.monotonic()
    with Progress(
        count, label="send", enabled=None if count > 1 and not args.json else False
    ) as bar:
        observations = itertools.islice(source.observations, count)
        pacing = zip(observations, pauses(args.rate, source), strict=False)  # pauses: endless
        stopped: BaseException | None = None
        try:
            for observation, pause in pacing:
                # each request starts its pause after the previous one started, or at once
                # when the previous reply came later than that
                time.sleep(max(0.0, previous + pause - time.monotonic()))
                previous = time.monotonic()
                if first is None:
                    first = observation
                    warn_unmatched_camera_map(args, list(observation.images))
                results.append(_request(client, args, observation, previous, log, mismatched))
                bar.advance()
        except (KeyboardInterrupt, VLAClientError) as exc:
            if not results:  # nothing to report: the error alone says it
                raise
            stopped = exc  # what the requests so far measured is still worth printing
    if first is None:
        raise VLAClientError("the frame source gave no observations")
    duration_s = time.monotonic() - started
    return Sent(first, results, sorted(mismatched), duration_s, count, stopped)


def _request(
    client: ActionClient,
    args: argparse.Namespace,
    observation: Observation,
    at: float,
    log: RerunLog | None,
    mismatched: set[str],
) -> ActionResult:
    """One request for `observation`, sent at monotonic time `at`: logged where there is a
    `log`, and its cameras that came back changed added to `mismatched` with ``--verify``."""
    from vla_client.client import mismatched_cameras

    result = client.infer(observation, return_digest=args.verify)
    if log is not None:
        log.sent(at, observation, result, fit=client.fit)
        log.tick(at, observation, None)  # the state sent
    if args.verify:
        mismatched.update(mismatched_cameras(observation, result))
    return result


MAX_RECORDED_GAP_S = 10.0
"""The longest pause ``--rate recorded`` keeps: a longer gap between two recorded steps (the
recording paused, a robot clock stepped by NTP) is waited this long instead, and said once."""


def pauses(rate: float | str | None, source: Source) -> Iterator[float]:
    """Seconds between the starts of consecutive requests, the first one 0.

    None: no pause. A number: 1/rate. ``recorded``: the gaps between the recording's wall
    times (a clock that went back counts as 0, one over `MAX_RECORDED_GAP_S` as that, with a
    note on stderr naming the longest); when the recording loops, the gap back to its first
    observation is the median gap.
    """
    if rate is None:
        return itertools.repeat(0.0)
    if rate != RECORDED:
        return itertools.chain([0.0], itertools.repeat(1.0 / float(rate)))
    times = source.wall_times
    gaps = [max(0.0, later - earlier) for earlier, later in itertools.pairwise(times)]
    longest = max(gaps, default=0.0)
    if longest > MAX_RECORDED_GAP_S:
        step = gaps.index(longest)
        print(
            f"vla-client: note: the recording's steps {step} and {step + 1} are {longest:.3g} s "
            f"apart; --rate recorded waits at most {MAX_RECORDED_GAP_S:g} s between requests",
            file=sys.stderr,
        )
        gaps = [min(gap, MAX_RECORDED_GAP_S) for gap in gaps]
    back_to_start = statistics.median(gaps) if gaps else 0.0
    return itertools.chain([0.0], itertools.cycle([*gaps, back_to_start]))


def plan_period(rate: float | str | None, source: Source) -> float:
    """How far apart a chunk's rows are drawn in a Rerun log: a request period (``--rate``'s,
    or the recording's median gap with ``recorded``), else 0.1 s."""
    if rate == RECORDED:
        gaps = [b - a for a, b in itertools.pairwise(source.wall_times) if b > a]
        return statistics.median(gaps) if gaps else 0.1
    return 1.0 / float(rate) if rate is not None else 0.1


def _report(args: argparse.Namespace, sent: Sent, camera_bytes: dict[str, int]) -> None:
    if args.json:
        print_json(_document(args, sent, camera_bytes))
    else:
        _print_report(args, sent, camera_bytes)


def _document(args: argparse.Namespace, sent: Sent, camera_bytes: dict[str, int]) -> dict[str, Any]:
    """The ``--json`` report of the requests `sent`."""
    results = sent.results
    last = results[-1]
    stages = stage_percentiles(results)
    sent_sizes = [result.timings.bytes_sent for result in results]
    received_sizes = [result.timings.bytes_received for result in results]
    document: dict[str, Any] = {
        "url": args.url,
        "encoding": args.encoding,
        "wire": args.wire,
        "requests": len(results),
        "duration_s": sent.duration_s,
        "action_shape": list(last.actions.shape),
        "actions": last.actions,
        "bytes_sent": sum(sent_sizes),
        "bytes_received": sum(received_sizes),
        "bytes_sent_per_request": sent_sizes,
        "bytes_received_per_request": received_sizes,
        "bytes_per_camera": camera_bytes,
        "timings_ms": {
            name: {"p50": p50, "p90": p90, "p99": p99} for name, p50, p90, p99 in stages
        },
    }
    if args.save_actions:
        document["saved_actions"] = args.save_actions
    if args.print_actions:
        document["all_actions"] = [result.actions for result in results]
    if args.verify:
        document["lossless"] = not sent.mismatched
        document["mismatched_cameras"] = sent.mismatched
    if sent.stopped is not None:
        document["planned_requests"] = sent.planned
        document["stopped_by"] = _stopped_by(sent.stopped)
    return document


def _stopped_by(stopped: BaseException) -> str:
    """What ended a run early, in a few words: ``Ctrl-C``, or the first line of the error."""
    if isinstance(stopped, KeyboardInterrupt):
        return "Ctrl-C"
    return (str(stopped).splitlines() or [type(stopped).__name__])[0]


def _print_report(args: argparse.Namespace, sent: Sent, camera_bytes: dict[str, int]) -> None:
    """The readable report of the requests `sent`: what was sent, the sizes, the stages'
    times, the bytes of each camera, and what the options asked for besides."""
    results = sent.results
    shape = "x".join(map(str, results[-1].actions.shape))
    print(
        f"{len(results)} request(s) to {args.url} in {sent.duration_s:.2f} s  "
        f"encoding={args.encoding} wire={args.wire}  actions {shape}"
    )
    sent_sizes = [result.timings.bytes_sent for result in results]
    received_sizes = [result.timings.bytes_received for result in results]
    print(f"sent {_sizes(sent_sizes)}, received {_sizes(received_sizes)}")
    print_table(("stage (ms)", "p50", "p90", "p99"), stage_percentiles(results))
    print()
    print_table(("camera", "bytes"), [(name, size) for name, size in camera_bytes.items()])
    if args.print_actions:
        for number, result in enumerate(results, 1):
            print_actions(number, result.actions)
    if args.save_actions:
        print(f"saved {len(results)} action chunk(s) to {args.save_actions}")
    if args.verify:
        print(
            "lossless: yes"
            if not sent.mismatched
            else f"lossless: NO, cameras differ: {', '.join(sent.mismatched)}"
        )


def print_actions(number: int, actions: npt.NDArray[np.float32]) -> None:
    """Request `number`'s action chunk: a heading, then a row of values per step."""
    horizon, dim = actions.shape
    print(f"\nactions of request {number} ({horizon} steps x {dim} values):")
    for step, row in enumerate(actions):
        print(f"{step:>4} " + "".join(f"{float(value):>10.4f}" for value in row))


def _sizes(sizes: Sequence[int]) -> str:
    """``2.88 MB in total, 1.44 MB per request`` (a range when requests differ in size)."""
    low, high = human_bytes(min(sizes)), human_bytes(max(sizes))
    each = low if low == high else f"{low} to {high}"
    return f"{human_bytes(sum(sizes))} in total, {each} per request"
