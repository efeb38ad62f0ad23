"""Printing for the CLI: short aligned tables for people, JSON for programs."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import Any, TextIO

import orjson


def print_table(
    headers: Sequence[str], rows: Sequence[Sequence[Any]], *, stream: TextIO = sys.stdout
) -> None:
    """Left-aligned first column, right-aligned numbers, two spaces between columns."""
    cells = [[_cell(value) for value in row] for row in rows]
    widths = [max(len(str(h)), *(len(row[i]) for row in cells)) for i, h in enumerate(headers)]
    line = "  ".join(
        str(h).ljust(w) if i == 0 else str(h).rjust(w) for i, (h, w) in enumerate(zip(headers, widths, strict=True))
    )
    stream.write(line + "\n" + "  ".join("-" * w for w in widths) + "\n")
    for row in cells:
        stream.write(
            "  ".join(
                v.ljust(w) if i == 0 else v.rjust(w) for i, (v, w) in enumerate(zip(row, widths, strict=True))
            )
            + "\n"
        )


def print_json(document: Any, *, stream: TextIO = sys.stdout) -> None:
    """One JSON document on one line (numpy arrays become lists)."""
    stream.write(orjson.dumps(document, option=orjson.OPT_SERIALIZE_NUMPY).decode() + "\n")


def fail(message: str) -> int:
    """Print a one-line reason to stderr; the exit code for a failed command."""
    sys.stderr.write(f"vla-client: error: {message}\n")
    return 1


def _cell(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.2f}"
    return str(value)
