"""Real-time chunking on the reach task: the guide in docs/control-loop.md, end to end.

A flow policy samples each chunk afresh, so two chunks need not agree where one takes over from
the next and the robot jumps there. With ``mode="rtc"`` the executor sends the rows of the
current chunk not yet executed with each request, and a server that does real-time chunking
continues them. The reference server does it with its ``reach-flow`` policy, made for the
built-in reach task (a robot chasing a moving ring, seen through two cameras):

    vla-client serve --policy reach-flow &
    python examples/rtc_reach.py http://127.0.0.1:8000

With no URL it serves that policy itself. It runs one episode of the task at 10 Hz under
`ControlLoop`, and prints whether the robot reached the target and the seam metric: how far
the command jumps where chunks switch, over the step within one chunk (about 1 when chunks
continue each other). ``--mode aligned`` runs the same episode without real-time chunking, to
compare. A server that does not do real-time chunking is refused before the episode starts,
naming one that does; any failure is one line on stderr and exit code 1.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterator, Sequence
from contextlib import ExitStack, contextmanager

import numpy as np

from vla_client import ActionClient, Observation, VLAClientError
from vla_client.control import ChunkExecutor, ControlLoop
from vla_client.sim.seams import SeamMeter
from vla_client.tasks.reach import ReachTask


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "url", nargs="?", help="a server whose policy does real-time chunking (default: start "
        "one serving reach-flow in this process)",
    )  # fmt: skip
    parser.add_argument("--mode", choices=["rtc", "aligned"], default="rtc")
    parser.add_argument("--seed", type=int, default=0, help="the episode (target, start, motion)")
    return parser.parse_args(argv)


@contextmanager
def policy_server(url: str | None) -> Iterator[str]:
    """`url`, or for as long as the block runs a local server of the reach-flow policy."""
    if url is not None:
        yield url
        return
    from vla_client.server import LocalServer, create_app, make_policy

    with LocalServer(create_app(make_policy("reach-flow"))) as server:
        print(f"started a local server of the reach-flow policy at {server.url}")
        yield server.url


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        return run(args)
    except VLAClientError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1


def run(args: argparse.Namespace) -> int:
    task = ReachTask()
    task.reset(args.seed)
    seams = SeamMeter()
    with ExitStack() as stack:
        url = stack.enter_context(policy_server(args.url))
        client = stack.enter_context(ActionClient(url))
        metadata = client.metadata()
        if args.mode == "rtc":  # the guide's line: refused unless the server does RTC
            executor = ChunkExecutor(client.infer, mode="rtc", server=metadata)
        else:  # asking for the next chunk halfway through this one, as rtc does
            halfway = max(1, (metadata.output.action_horizon or 2) // 2)
            executor = ChunkExecutor(client.infer, mode="aligned", prefetch_at=halfway)
        stack.callback(executor.close, timeout=2.0)

        def observe() -> Observation:
            return Observation(task.frames(), state=task.state(), task=task.task)

        def apply(action: np.ndarray) -> None:
            seams.add(action, executor.source)
            task.step(action)
            if task.done:
                loop.stop()

        loop = ControlLoop(
            observe=observe, executor=executor, apply_action=apply,
            rate_hz=task.settings.rate_hz, reset=client.reset,
        )  # fmt: skip
        stats = loop.run(ticks=task.settings.max_steps)

    counters = executor.stats
    outcome = "reached the target" if task.success else "did not reach the target"
    print(f"mode {args.mode}: {outcome} in {task.steps} steps ({task.elapsed_s:.1f} s)")
    print(
        f"chunks {counters.chunks_received}/{counters.requests_sent} requests, "
        f"{stats.ticks} ticks, errors {counters.errors}"
    )
    print(f"seam jump/step {seams.seams.ratio:.1f} over {seams.seams.seams} chunk switches")
    return 0 if counters.chunks_received else 1


if __name__ == "__main__":
    sys.exit(main())
