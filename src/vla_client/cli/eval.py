"""``vla-client eval``: task success in closed loop, through the real client, executor and network.

Runs ``--episodes`` seeded episodes of a simulated robot against a server: the built-in reach
task (a robot chasing a moving target, seen by a ``top`` and a ``wrist`` camera) or, with
``--env``, a Gymnasium environment with pixel observations. The robot side is the deployment
stack: `ActionClient` with the chosen encoding, wire and transport, `ChunkExecutor` with
background prefetch, a `SafetyGate` (shape and finite values, from the server's metadata) and,
with ``--watchdog``, a `Watchdog`. ``--delay-ms`` and ``--jitter-ms`` add one-way network delay
on the robot's side, both directions; ``--mode`` says how a late chunk is played (naive: from
its first row; aligned: from the row for the tick it arrives on; blended: aligned and
cross-faded). Several delays and modes give a matrix, one row each.

Without a URL it starts the built-in ``reach`` policy on a free local port. ``--time
simulated`` (the default) runs on a simulated clock that advances one period per tick and
charges each request the round trip measured before the run plus the injected delay: fast,
and the same seeds give the same outcomes every time. ``--time real`` runs on the wall clock
and sleeps the delay, as on a robot. Episodes whose server goes away are marked failed with
the reason and the run goes on (exit 1 at the end). ``--json`` prints one document, ``--plot``
draws success rate against delay (a line per mode), ``--record DIR`` writes every episode's
frames for ``vla-client view``.
"""

from __future__ import annotations

import argparse
import math

from vla_client.cli.checks import file_type
from vla_client.cli.common import (
    add_connection_options,
    add_encoding_options,
    add_fit_options,
    camera_pair,
)
from vla_client.cli.control_options import add_chunk_options, add_watchdog_options, rate_hz
from vla_client.cli.parser import non_negative_int, positive_float, positive_int
from vla_client.cli.rerun_option import add_rerun_option
from vla_client.control.names import EXECUTION_MODES as MODES
from vla_client.sim.limits import MAX_DELAY_S

TIMES = ("simulated", "real")


def register(parser: argparse.ArgumentParser) -> None:
    """The command's options, on its `parser`."""
    add_connection_options(parser, url_default=None)
    add_encoding_options(parser)
    add_fit_options(parser)
    parser.add_argument(
        "--transport", choices=("http", "websocket"), default=None,
        help="how requests travel (default: by the URL's scheme)",
    )  # fmt: skip
    run_group = parser.add_argument_group("the run")
    run_group.add_argument(
        "--delay-ms", type=delay_ms, nargs="+", default=[0.0], metavar="MS",
        help="one-way network delay added on the robot's side, both directions; several "
        "values run one after the other",
    )  # fmt: skip
    run_group.add_argument(
        "--jitter-ms", type=delay_ms, default=0.0, metavar="MS",
        help="each one-way delay varies uniformly by up to this much (never below 0)",
    )  # fmt: skip
    run_group.add_argument(
        "--mode", choices=MODES, nargs="+", default=["aligned"],
        help="how a chunk that arrives late is played; several run one after the other",
    )  # fmt: skip
    run_group.add_argument("--rate", type=rate_hz, default=10.0, metavar="HZ",
                           help="control ticks per second (0.1..1000)")  # fmt: skip
    run_group.add_argument("--episodes", type=positive_int, default=10, metavar="N",
                           help="episodes per delay and mode")  # fmt: skip
    run_group.add_argument("--seed", type=non_negative_int, default=0,
                           help="the first episode's seed; episode i has seed + i")  # fmt: skip
    add_chunk_options(run_group)
    run_group.add_argument(
        "--declare-rtc", action="store_true",
        help="with --mode rtc against GR00T's server, which announces nothing: your word that "
        "its policy applies GR00T N1.7's rtc_* options and the previous chunk",
    )  # fmt: skip
    run_group.add_argument(
        "--time", choices=TIMES, default="simulated",
        help="simulated: a clock that advances a period per tick, reproducible; real: the "
        "wall clock, as on a robot",
    )  # fmt: skip
    run_group.add_argument(
        "--round-trip-ms", type=delay_ms, default=None, metavar="MS",
        help="with --time simulated, charge this round trip instead of measuring it",
    )  # fmt: skip
    run_group.add_argument(
        "--give-up-s", type=positive_float, default=1.0, metavar="SECONDS",
        help="mark an episode failed when its requests fail with no chunk for this long",
    )  # fmt: skip
    add_watchdog_options(run_group)
    env_group = parser.add_argument_group("the robot (default: the built-in reach task)")
    env_group.add_argument("--env", metavar="ID", help="a Gymnasium environment id instead")
    env_group.add_argument(
        "--env-option", action="append", default=[], metavar="KEY=VALUE",
        help="passed to gymnasium.make (VALUE read as JSON where it parses; repeatable)",
    )  # fmt: skip
    env_group.add_argument(
        "--env-camera", type=camera_pair, action="append", default=[], metavar="KEY=NAME",
        help="send the environment's image KEY as camera NAME (repeatable)",
    )  # fmt: skip
    env_group.add_argument(
        "--env-state", action="append", default=None, metavar="KEY",
        help="observation entries that make the state (repeatable; default: every non-image)",
    )  # fmt: skip
    env_group.add_argument("--task", default=None, help="the task text (default: the env id)")
    env_group.add_argument("--max-steps", type=positive_int, default=None, metavar="N",
                           help="ticks per episode at most")  # fmt: skip
    out_group = parser.add_argument_group("output")
    out_group.add_argument("--json", action="store_true", help="one JSON document")
    out_group.add_argument(
        "--plot", type=file_type(".png"), metavar="FILE.png",
        help="success rate against delay, a line per mode",
    )  # fmt: skip
    out_group.add_argument(
        "--record", metavar="DIR",
        help="write each episode's frames to DIR/<mode>-<delay>ms-seed<N>.vlaobs (PNG, about "
        "0.1 MB a tick for the reach task's two cameras)",
    )  # fmt: skip
    out_group.add_argument(
        "--record-every", type=positive_int, default=1, metavar="N",
        help="with --record, write every Nth tick's frames only (default: every tick)",
    )  # fmt: skip
    add_rerun_option(out_group)
    parser.set_defaults(func=run)


def delay_ms(text: str) -> float:
    """An argparse type: milliseconds in 0..`MAX_DELAY_S` (a longer delay is a typo)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be milliseconds, got {text!r}") from None
    limit = MAX_DELAY_S * 1e3
    if not math.isfinite(value) or not 0 <= value <= limit:
        raise argparse.ArgumentTypeError(f"must be 0..{limit:g} ms, got {text!r}")
    return value


def run(args: argparse.Namespace) -> int:
    """Run the matrix the options describe (`vla_client.cli.eval_run` does the work)."""
    from vla_client.cli import eval_run

    return eval_run.run(args)
