"""The ``vla-client`` command: serve, send, metadata, demo, cameras.

Each subcommand lives in its own module with a `register(subparsers)` function; heavy imports
(the server's FastAPI, cameras) happen inside the command that needs them, so ``vla-client send``
starts fast and works without the ``server`` extra.
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Sequence

from vla_client.cli import demo, metadata, send, serve


def build_parser() -> argparse.ArgumentParser:
    """The argument parser with every subcommand registered."""
    parser = argparse.ArgumentParser(
        prog="vla-client",
        description="Send camera frames to a VLA policy server and get action chunks back.",
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="log debug details")
    subparsers = parser.add_subparsers(dest="command", required=True)
    for module in (serve, send, metadata, demo):
        module.register(subparsers)
    _register_optional(subparsers)
    return parser


def _register_optional(subparsers: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    try:
        from vla_client.cli import cameras
    except ImportError:  # the cameras command is not installed in this build
        return
    cameras.register(subparsers)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``vla-client`` console script."""
    args = build_parser().parse_args(argv)
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.WARNING,
        format="%(levelname)s %(name)s: %(message)s",
    )
    code: int = args.func(args)
    return code


if __name__ == "__main__":
    sys.exit(main())
