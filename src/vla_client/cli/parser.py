"""How the command line is read: one-line usage errors, plain help with defaults, checked values.

A usage error (an unknown option, a value of the wrong kind, options that contradict each other)
prints one line on stderr and exits 2 before anything runs; errors while running exit 1. Help
text comes from the commands' docstrings, so reStructuredText markup is turned into plain text,
and every option with a default says what it is.
"""

from __future__ import annotations

import argparse
import copy
import math
import re
import sys
from typing import Any, NoReturn

USAGE_EXIT = 2
RECORDED = "recorded"


class CommandParser(argparse.ArgumentParser):
    """An `ArgumentParser` whose errors are one line, and whose help is `HelpFormatter`'s."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs["formatter_class"] = HelpFormatter
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> NoReturn:
        sys.stderr.write(usage_line(self.prog, message))
        sys.exit(USAGE_EXIT)


def usage_line(prog: str, message: str) -> str:
    """``vla-client: error: MESSAGE (see 'vla-client send --help')`` and a newline."""
    return f"vla-client: error: {message} (see '{prog} --help')\n"


class HelpFormatter(argparse.RawDescriptionHelpFormatter):
    """Descriptions keep their paragraphs; markup becomes plain text; defaults are shown."""

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        return super()._fill_text(plain(text), width, indent)

    def _format_action(self, action: argparse.Action) -> str:
        if not action.help and _default_shown(action):
            action = copy.copy(action)
            action.help = "default: %(default)s"
        return super()._format_action(action)

    def _get_help_string(self, action: argparse.Action) -> str:
        text = plain(action.help or "")
        if _default_shown(action) and "default" not in text:
            text = f"{text} (default: %(default)s)" if text else "default: %(default)s"
        return text


def plain(text: str) -> str:
    """reStructuredText literals and references as plain text: ````x```` -> 'x', ```x``` -> x."""
    text = re.sub(r"``([^`]+)``", r"'\1'", text)
    return re.sub(r"`([^`]+)`", r"\1", text)


def positive_float(text: str) -> float:
    """An argparse type: a finite number above 0."""
    value = _float(text)
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be a number above 0, got {text!r}")
    return value


def seconds(text: str) -> float:
    """An argparse type: a time limit, a finite number of seconds above 0."""
    value = _float(text)
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be a number of seconds above 0, got {text!r}")
    return value


def non_negative_float(text: str) -> float:
    """An argparse type: a finite number, 0 or more."""
    value = _float(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be 0 or more, got {text!r}")
    return value


def positive_int(text: str) -> int:
    """An argparse type: a whole number, 1 or more."""
    value = _int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {text!r}")
    return value


def non_negative_int(text: str) -> int:
    """An argparse type: a whole number, 0 or more."""
    value = _int(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be 0 or more, got {text!r}")
    return value


def jpeg_quality(text: str) -> int:
    """An argparse type: a JPEG quality, 1 to 100."""
    value = _int(text)
    if not 1 <= value <= 100:
        raise argparse.ArgumentTypeError(f"must be in 1..100, got {text!r}")
    return value


def send_rate(text: str) -> float | str:
    """An argparse type: ``recorded`` (keep a recording's timing) or requests per second > 0."""
    if text == RECORDED:
        return RECORDED
    try:
        return positive_float(text)
    except argparse.ArgumentTypeError:
        raise argparse.ArgumentTypeError(
            f"takes '{RECORDED}' or a number of requests per second above 0, got {text!r}"
        ) from None


def _float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a number, got {text!r}") from None
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"must be a finite number, got {text!r}")
    return value


def _int(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a whole number, got {text!r}") from None


def _default_shown(action: argparse.Action) -> bool:
    """Options whose default says something: not flags, not None, not empty lists."""
    default = action.default
    unset = default is None or default is argparse.SUPPRESS or isinstance(default, bool)
    return bool(action.option_strings) and not unset and default != [] and action.nargs != 0
