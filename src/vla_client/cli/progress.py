"""A one-line progress bar on stderr, shown only when stderr is a terminal.

Repeated sends take seconds to minutes; a bar says the command is alive without spoiling
output that is piped or parsed (stdout stays clean, and a non-terminal stderr gets nothing).
"""

from __future__ import annotations

import sys
import time
from types import TracebackType
from typing import TextIO

_WIDTH = 30


class Progress:
    """``[#####.....] 12/40  3.1/s`` redrawn in place; `enabled=None` means "if a terminal"."""

    def __init__(
        self,
        total: int,
        *,
        label: str = "",
        stream: TextIO | None = None,
        enabled: bool | None = None,
    ) -> None:
        stream = stream or sys.stderr
        self.total = max(total, 1)
        self.label = label
        self.stream = stream
        self.enabled = stream.isatty() if enabled is None else enabled
        self.done = 0
        self._start = time.monotonic()

    def advance(self, steps: int = 1) -> None:
        """Count `steps` more as done and redraw."""
        self.done += steps
        if self.enabled:
            self.stream.write("\r" + self.render())
            self.stream.flush()

    def render(self) -> str:
        """The bar as text, without the carriage return."""
        filled = round(_WIDTH * min(self.done, self.total) / self.total)
        rate = self.done / max(time.monotonic() - self._start, 1e-9)
        prefix = f"{self.label} " if self.label else ""
        bar = "#" * filled + "." * (_WIDTH - filled)
        return f"{prefix}[{bar}] {self.done}/{self.total}  {rate:.1f}/s"

    def close(self) -> None:
        """End the bar's line so later output starts clean."""
        if self.enabled and self.done:
            self.stream.write("\n")
            self.stream.flush()

    def __enter__(self) -> Progress:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()
