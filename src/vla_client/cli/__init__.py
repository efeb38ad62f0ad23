"""The ``vla-client`` command: serve, send, record, view, export, bench, metadata, demo, cameras,
eval, ros2.

Each subcommand lives in its own module with a `register(subparsers)` function; the module's
docstring is the command's description in ``--help``. Heavy imports (FastAPI and uvicorn for the
server, torch, websockets, matplotlib) happen inside the command that needs them, so
``vla-client send`` starts fast and works without the ``server`` extra.

Exit status: 0 done, 1 the command failed (one line on stderr, never a traceback; ``-v`` shows
the traceback), 2 the command line is wrong (one line, nothing was done), 130 stopped by Ctrl-C.
Output cut short by a closed pipe (``vla-client send ... | head``) ends quietly.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import re
import sys
from collections.abc import Callable, Iterator, Sequence

import cv2
from pydantic import ValidationError

from vla_client.cli import bench, cameras, demo, export, metadata, record, ros2, send, serve, view
from vla_client.cli import eval as eval_command
from vla_client.cli.failures import failure_line
from vla_client.cli.output import fail
from vla_client.cli.parser import USAGE_EXIT, CommandParser, usage_line
from vla_client.errors import VLAClientError

COMMANDS = (serve, send, record, view, export, bench, metadata, demo, cameras, eval_command, ros2)
INTERRUPTED_EXIT = 130  # 128 + SIGINT, what shells report for a command stopped by Ctrl-C


def build_parser() -> argparse.ArgumentParser:
    """The argument parser with every subcommand registered."""
    parser = CommandParser(
        prog="vla-client",
        description="Send camera frames to a VLA policy server and get action chunks back.",
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="log debug details")
    subparsers = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for module in COMMANDS:
        known = set(subparsers.choices)
        module.register(subparsers)
        for name in set(subparsers.choices) - known:
            command = subparsers.choices[name]
            command.description = command.description or _description(module.__doc__ or "")
    return parser


def _description(docstring: str) -> str:
    """A command module's docstring as its help description, without the leading
    ``vla-client NAME``: that the usage line above it already shows."""
    text = re.sub(r"^\W*vla-client [\w-]+\W*: ", "", docstring.strip())
    return text[:1].upper() + text[1:]


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``vla-client`` console script."""
    try:
        args = build_parser().parse_args(argv)
    except SystemExit as exc:  # --help, or a usage error already printed: a code, not an exit
        return exc.code if isinstance(exc.code, int) else USAGE_EXIT
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.WARNING,
        format="%(levelname)s %(name)s: %(message)s",
    )
    try:
        with _opencv_quiet(not args.verbose):
            code: int = args.func(args)
        sys.stdout.flush()  # here, so a closed pipe is seen now and not at interpreter exit
    except BrokenPipeError:
        return _closed_pipe()
    except KeyboardInterrupt:  # Ctrl-C: stop as a shell tool does, without a traceback
        if sys.stderr.isatty():
            sys.stderr.write("\n")  # past the ^C the terminal echoed
        return INTERRUPTED_EXIT
    except argparse.ArgumentError as exc:
        sys.stderr.write(usage_line(f"vla-client {args.command}", str(exc)))
        return USAGE_EXIT
    except ModuleNotFoundError as exc:
        if args.verbose:
            raise
        return fail(_missing_extra(exc))
    except (VLAClientError, ValidationError, ValueError, OSError) as exc:
        # Commands report their own failures; this catches what escapes them (a server's
        # malformed metadata, say) so the user still gets one line and exit 1, not a traceback.
        if args.verbose:
            raise
        return fail(_one_line(exc, args))
    return code


OPENCV_LOG_SILENT = 0
"""OpenCV's ``LOG_LEVEL_SILENT``, the same number in every version."""


@contextlib.contextmanager
def _opencv_quiet(quiet: bool) -> Iterator[None]:
    """OpenCV's own log off while a command runs: probing a missing camera prints a dozen
    WARN and ERROR lines before the command's one-line error. ``-v`` keeps them."""
    log = _opencv_log_functions()
    if not quiet or log is None:
        yield
        return
    get_level, set_level = log
    level = get_level()
    set_level(OPENCV_LOG_SILENT)
    try:
        yield
    finally:
        set_level(level)


def _opencv_log_functions() -> tuple[Callable[[], int], Callable[[int], object]] | None:
    """OpenCV's get and set of its log level: ``cv2.utils.logging``'s in OpenCV 5, the
    top-level ``cv2.getLogLevel``/``setLogLevel`` of the 4.x wheels (which have no
    ``cv2.utils.logging``); None where a build has neither."""
    for module in (getattr(getattr(cv2, "utils", None), "logging", None), cv2):
        get_level, set_level = (
            getattr(module, "getLogLevel", None),
            getattr(module, "setLogLevel", None),
        )
        if get_level is not None and set_level is not None:
            return get_level, set_level
    return None


def _closed_pipe() -> int:
    """The reader of stdout went away: stop quietly, as Python's documentation advises, and
    point stdout at /dev/null so the interpreter's last flush does not complain either."""
    with contextlib.suppress(OSError, ValueError):  # ValueError: stdout is not a real file
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    return 1


_EXTRAS = {"fastapi": "server", "uvicorn": "server", "websockets": "websocket", "torch": "torch"}


def _missing_extra(exc: ModuleNotFoundError) -> str:
    module = (exc.name or "").split(".")[0]
    extra = _EXTRAS.get(module)
    if extra is None:
        return str(exc)
    install = f"pip install 'vla-client[{extra}]'"
    return f"this needs the '{extra}' extra ({module} is not installed): {install}"


def _one_line(exc: Exception, args: argparse.Namespace) -> str:
    if isinstance(exc, ValidationError):
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"]) or exc.title
        return f"the server sent an invalid {exc.title} document: {where}: {first['msg']}"
    return failure_line(exc, args)


if __name__ == "__main__":
    sys.exit(main())
