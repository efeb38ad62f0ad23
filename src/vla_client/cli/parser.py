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
from collections.abc import Callable
from typing import Any, NoReturn, TypeVar

USAGE_EXIT = 2
RECORDED = "recorded"
N = TypeVar("N", int, float)


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


def _checked(
    parse: Callable[[str], N], accept: Callable[[N], bool], requirement: str
) -> Callable[[str], N]:
    """An argparse type: `parse` the text, then refuse values `accept` says no to."""

    def check(text: str) -> N:
        value = parse(text)
        if not accept(value):
            raise argparse.ArgumentTypeError(f"must be {requirement}, got {text!r}")
        return value

    return check


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


# argparse types: each refuses a bad value with one line saying what the value must be
positive_float = _checked(_float, lambda value: value > 0, "a number above 0")
seconds = _checked(_float, lambda value: value > 0, "a number of seconds above 0")
non_negative_float = _checked(_float, lambda value: value >= 0, "0 or more")
positive_int = _checked(_int, lambda value: value >= 1, "at least 1")
non_negative_int = _checked(_int, lambda value: value >= 0, "0 or more")
jpeg_quality = _checked(_int, lambda value: 1 <= value <= 100, "in 1..100")


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


def _default_shown(action: argparse.Action) -> bool:
    """Options whose default says something: not flags, not None, not empty lists."""
    default = action.default
    unset = default is None or default is argparse.SUPPRESS or isinstance(default, bool)
    return bool(action.option_strings) and not unset and default != [] and action.nargs != 0
