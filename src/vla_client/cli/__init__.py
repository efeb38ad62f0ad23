"""The ``vla-client`` command: serve, send, record, view, export, bench, metadata, demo, cameras,
eval, ros2.

Each subcommand lives in its own module with a `register(parser)` function that adds its
options; the module's docstring is the command's description in ``--help``, and `COMMANDS`
names each command's module and one-line help. Only the module of the command typed is
imported (``vla-client --help`` imports none), and heavy imports (numpy, httpx, OpenCV, FastAPI
and uvicorn, torch, websockets, matplotlib) happen inside the command's work, so every command,
``--help`` included, starts fast (``benchmarks/bench_cli_start.py``), and ``vla-client send``
works without the ``server`` extra.

Exit status: 0 done, 1 the command failed (one line on stderr, never a traceback; ``-v`` shows
the traceback), 2 the command line is wrong (one line, nothing was done), 130 stopped by Ctrl-C.
Output cut short by a closed pipe (``vla-client send ... | head``) ends quietly.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import logging
import os
import re
import sys
from collections.abc import Callable, Iterator, Sequence
from types import ModuleType

from vla_client._version import __version__
from vla_client.cli.output import fail
from vla_client.cli.parser import USAGE_EXIT, CommandParser, usage_line
from vla_client.errors import VLAClientError

COMMANDS = {
    "serve": "run the reference action server",
    "send": "send observations to a server",
    "record": "record observations to a file for replay",
    "view": "contact sheet and videos of a recording",
    "export": "write a recording as a LeRobot dataset",
    "bench": "measure every encoding x wire x transport, ranked",
    "metadata": "show the server's policy metadata",
    "demo": "start a local reference server and try every encoding",
    "cameras": "list cameras and their modes, or check configured ones",
    "eval": "task success in closed loop, per encoding, delay and chunk mode",
    "ros2": "drive a ROS 2 robot: its topics in, a controller's commands out",
}
"""Each command, in ``--help``'s order, and its line there; its module is
``vla_client.cli.NAME``."""
INTERRUPTED_EXIT = 130  # 128 + SIGINT, what shells report for a command stopped by Ctrl-C
VERBOSE_HELP = (
    "log debug details; a failure shows its traceback and the server's whole detail (default: off)"
)


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The argument parser with every subcommand registered, or with the options of command
    `only` alone (the others are listed in ``--help`` but their modules are not imported)."""
    parser = CommandParser(
        prog="vla-client",
        description="Send camera frames to a VLA policy server and get action chunks back.",
    )
    parser.add_argument("-v", "--verbose", action="store_true", help=VERBOSE_HELP)
    parser.add_argument(
        "--version", action="version", version=f"vla-client {__version__}",
        help="print the version and exit",
    )  # fmt: skip
    subparsers = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name, line in COMMANDS.items():
        command = subparsers.add_parser(name, help=line)
        if only is not None and name != only:
            continue
        module = command_module(name)
        module.register(command)
        command.description = command.description or _description(module.__doc__ or "")
        # also after the command (`vla-client send URL -v`); unset, it keeps the top's
        command.add_argument(
            "-v", "--verbose", action="store_true", default=argparse.SUPPRESS, help=VERBOSE_HELP
        )
    return parser


def command_module(name: str) -> ModuleType:
    """The module of command `name` (``eval``'s is ``vla_client.cli.eval``)."""
    return importlib.import_module(f"vla_client.cli.{name}")


def typed_command(argv: Sequence[str]) -> str | None:
    """The command `argv` names: its first word that is a command's name (None: none)."""
    return next((word for word in argv if word in COMMANDS), None)


def _description(docstring: str) -> str:
    """A command module's docstring as its help description, without the leading
    ``vla-client NAME``: that the usage line above it already shows."""
    text = re.sub(r"^\W*vla-client [\w-]+\W*: ", "", docstring.strip())
    return text[:1].upper() + text[1:]


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``vla-client`` console script."""
    argv = sys.argv[1:] if argv is None else list(argv)
    command = typed_command(argv)
    try:
        args = build_parser(only=command or "").parse_args(argv)
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
    except (VLAClientError, ValueError, OSError) as exc:  # pydantic's ValidationError too
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
    ``cv2.utils.logging``); None where a build has neither. OpenCV is imported here, for a
    command about to run (not for ``--help``)."""
    import cv2

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
    from pydantic import ValidationError

    from vla_client.cli.failures import failure_line

    if isinstance(exc, ValidationError):
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"]) or exc.title
        return f"the server sent an invalid {exc.title} document: {where}: {first['msg']}"
    return failure_line(exc, args)


if __name__ == "__main__":
    sys.exit(main())
