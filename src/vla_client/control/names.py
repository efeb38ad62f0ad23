"""The control loop's choices and defaults, importable without numpy: how chunks are played,
what the safety gate does with an action out of bounds, what the watchdog does when the server
goes silent, and how many refusals end a loop. A command line lists them in its ``--help`` and
checks a value against them without loading the loop (`chunk`, `safety` and `watchdog` take
them from here)."""

from __future__ import annotations

from typing import Literal

MAX_REFUSALS = 3
"""Requests refused in a row (4xx) that end a loop, by default: one may be the request's own
fault, three in a row are a server that will not serve this robot."""

ExecutionMode = Literal["naive", "aligned", "blended", "rtc"]
EXECUTION_MODES: tuple[ExecutionMode, ...] = ("naive", "aligned", "blended", "rtc")
"""How chunks are played: from the first row however late (naive), from the row for the tick
the chunk arrives on (aligned), aligned and cross-faded (blended), or continued by the server
(rtc: real-time chunking, when the server announces it)."""
CLIENT_MODES = EXECUTION_MODES[:3]
"""The modes every server supports: the executor alone does them."""

OnViolation = Literal["clip", "reject"]
ON_VIOLATION: tuple[OnViolation, ...] = ("clip", "reject")
"""What the safety gate does with an action outside its bounds or step limit."""

Behaviour = Literal["hold", "zero", "stop", "finish_chunk"]
BEHAVIOURS: tuple[Behaviour, ...] = ("hold", "zero", "stop", "finish_chunk")
"""What the watchdog does when the server goes silent."""
