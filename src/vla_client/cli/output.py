"""Printing for the CLI: short aligned tables for people, JSON for programs."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import Any, TextIO

import orjson


def print_table(
    headers: Sequence[str], rows: Sequence[Sequence[Any]], *, stream: TextIO | None = None
) -> None:
    """Left-aligned first column, right-aligned numbers, two spaces between columns."""
    stream = stream or sys.stdout  # looked up per call, so redirected stdout is honoured
    cells = [[_cell(value) for value in row] for row in rows]
    widths = [max(len(str(h)), *(len(row[i]) for row in cells)) for i, h in enumerate(headers)]
    stream.write(_line([str(h) for h in headers], widths) + "\n")
    stream.write("  ".join("-" * w for w in widths) + "\n")
    for row in cells:
        stream.write(_line(row, widths) + "\n")


def human_bytes(count: float) -> str:
    """``812 B``, ``14.2 kB``, ``1.44 MB``, ``2.10 GB`` (powers of 1000)."""
    if count < 1e3:
        return f"{count:.0f} B"
    if count < 1e6:
        return f"{count / 1e3:.1f} kB"
    if count < 1e9:
        return f"{count / 1e6:.2f} MB"
    return f"{count / 1e9:.2f} GB"


def print_json(document: Any, *, stream: TextIO | None = None) -> None:
    """One JSON document on one line (numpy arrays become lists)."""
    stream = stream or sys.stdout
    stream.write(orjson.dumps(document, option=orjson.OPT_SERIALIZE_NUMPY).decode() + "\n")


def fail(message: str, code: int = 1) -> int:
    """Print a one-line reason to stderr; returns `code`, the exit status (1: the command
    failed; 2: it was asked for something that cannot be done)."""
    sys.stderr.write(f"vla-client: error: {message}\n")
    return code


def _line(values: Sequence[str], widths: Sequence[int]) -> str:
    return "  ".join(
        v.ljust(w) if i == 0 else v.rjust(w)
        for i, (v, w) in enumerate(zip(values, widths, strict=True))
    )


def _cell(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.2f}"
    return str(value)
