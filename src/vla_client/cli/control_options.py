"""Command-line options of the control loop's parts, shared by the commands that run one
(``eval``, ``ros2``): the control rate, how chunks are fetched, the watchdog, the safety
gate."""

from __future__ import annotations

import argparse
import math
from typing import Any

from vla_client.cli.parser import non_negative_int, positive_float, positive_int
from vla_client.control.names import BEHAVIOURS, ON_VIOLATION
from vla_client.sim.limits import RATE_RANGE_HZ


def rate_hz(text: str) -> float:
    """An argparse type: a control rate in `RATE_RANGE_HZ` (1e300 or 1e-300 Hz is a typo)."""
    low, high = RATE_RANGE_HZ
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a rate in Hz, got {text!r}") from None
    if not low <= value <= high:  # NaN too
        raise argparse.ArgumentTypeError(f"must be {low:g}..{high:g} Hz, got {text!r}")
    return value


def add_chunk_options(group: argparse._ArgumentGroup) -> None:
    """``--prefetch-at`` and ``--blend-steps``: when the next chunk is asked for, and how many
    steps a new one is cross-faded over."""
    group.add_argument(
        "--prefetch-at", type=non_negative_int, default=None, metavar="N",
        help="ask for the next chunk when N actions are left, below the server's action horizon "
        "(default: half of it)",
    )  # fmt: skip
    group.add_argument("--blend-steps", type=positive_int, default=3, metavar="N",
                       help="steps cross-faded in --mode blended")  # fmt: skip


def add_watchdog_options(group: argparse._ArgumentGroup) -> None:
    """``--watchdog SECONDS`` and ``--watchdog-behaviour``."""
    group.add_argument(
        "--watchdog", type=positive_float, default=None, metavar="SECONDS",
        help="a Watchdog with this timeout between the executor and the robot",
    )  # fmt: skip
    group.add_argument("--watchdog-behaviour", choices=BEHAVIOURS, default="hold",
                       help="what the watchdog does when it trips")  # fmt: skip


def add_gate_options(parser: argparse.ArgumentParser) -> None:
    """The `SafetyGate`'s bounds, step and rate limits, and what a violation does."""
    group = parser.add_argument_group("the safety gate (shape and finite values always)")
    group.add_argument(
        "--low",
        type=limit,
        default=None,
        metavar="X[,X...]",
        help="lowest value of each action dimension (one for all, or one each)",
    )
    group.add_argument("--high", type=limit, default=None, metavar="X[,X...]",
                       help="highest value of each action dimension")  # fmt: skip
    group.add_argument(
        "--on-bounds",
        choices=ON_VIOLATION,
        default="reject",
        help="an action outside --low/--high: clip it, or stop (reject)",
    )
    group.add_argument(
        "--max-delta",
        type=limit,
        default=None,
        metavar="X[,X...]",
        help="largest change of each dimension from one action to the next",
    )
    group.add_argument("--max-rate", type=limit, default=None, metavar="X[,X...]",
                       help="largest change of each dimension per second")  # fmt: skip
    group.add_argument(
        "--on-delta",
        choices=ON_VIOLATION,
        default="reject",
        help="a step over --max-delta/--max-rate: clip it, or stop (reject)",
    )


def gate_options(args: argparse.Namespace) -> dict[str, Any]:
    """The `SafetyGate` keyword arguments `add_gate_options`'s options give."""
    names = ("low", "high", "on_bounds", "max_delta", "max_rate", "on_delta")
    return {name: getattr(args, name) for name in names}


def limit(text: str) -> float | tuple[float, ...]:
    """An argparse type: one finite number, or one per action dimension separated by commas."""
    values = []
    for part in text.split(","):
        try:
            value = float(part)
        except ValueError:
            value = math.nan
        if not math.isfinite(value):
            raise argparse.ArgumentTypeError(
                f"takes a finite number or numbers separated by commas, as in 1.5 or "
                f"-1,-1,-0.5; got {text!r}"
            )
        values.append(value)
    return values[0] if len(values) == 1 else tuple(values)
