"""The ``vla-client`` command: serve, send, record, bench, metadata, demo, cameras.

Each subcommand lives in its own module with a `register(subparsers)` function; heavy imports
(FastAPI and uvicorn for the server, torch, websockets, matplotlib) happen inside the command that
needs them, so ``vla-client send`` starts fast and works without the ``server`` extra.
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Sequence

from pydantic import ValidationError

from vla_client.cli import bench, cameras, demo, metadata, record, send, serve
from vla_client.cli.output import fail, os_error_message
from vla_client.errors import VLAClientError


def build_parser() -> argparse.ArgumentParser:
    """The argument parser with every subcommand registered."""
    parser = argparse.ArgumentParser(
        prog="vla-client",
        description="Send camera frames to a VLA policy server and get action chunks back.",
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="log debug details")
    subparsers = parser.add_subparsers(dest="command", required=True)
    for module in (serve, send, record, bench, metadata, demo, cameras):
        module.register(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``vla-client`` console script."""
    args = build_parser().parse_args(argv)
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.WARNING,
        format="%(levelname)s %(name)s: %(message)s",
    )
    try:
        code: int = args.func(args)
    except ModuleNotFoundError as exc:
        if args.verbose:
            raise
        return fail(_missing_extra(exc))
    except (VLAClientError, ValidationError, ValueError, OSError) as exc:
        # Commands report their own failures; this catches what escapes them (a server's
        # malformed metadata, say) so the user still gets one line and exit 1, not a traceback.
        if args.verbose:
            raise
        return fail(_one_line(exc))
    return code


_EXTRAS = {"fastapi": "server", "uvicorn": "server", "websockets": "websocket", "torch": "torch"}


def _missing_extra(exc: ModuleNotFoundError) -> str:
    module = (exc.name or "").split(".")[0]
    extra = _EXTRAS.get(module)
    if extra is None:
        return str(exc)
    install = f"pip install 'vla-client[{extra}]'"
    return f"this needs the '{extra}' extra ({module} is not installed): {install}"


def _one_line(exc: Exception) -> str:
    if isinstance(exc, ValidationError):
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"]) or exc.title
        return f"the server sent an invalid {exc.title} document: {where}: {first['msg']}"
    if isinstance(exc, OSError):
        return os_error_message(exc)
    return str(exc).splitlines()[0]


if __name__ == "__main__":
    sys.exit(main())
