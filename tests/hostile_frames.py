"""What the tests' websocket servers send when told to be hostile to a client whose replies carry
no request id (openpi's, vLLM-Omni's and RoboArena's): more frames than they were asked for.

- ``storm``: the first request is answered with `STORM` error frames (one per retry, say);
- ``duplicate``: every answer is sent twice;
- ``push``: after the first answer the server pushes its config frame again, unasked.

The servers (tests/vllm_omni_server.py, tests/roboarena_server.py, the openpi scripts on
tests/transports/scripted_server.py) take one of `HOSTILE` and send `frames(...)`.
"""

from __future__ import annotations

from typing import Any

HOSTILE = ("storm", "duplicate", "push")
STORM = 5


def frames(mode: str | None, index: int, answer: Any, error: Any, config: Any) -> list[Any]:
    """The frames a server in `mode` (None: a polite one) sends for its request number `index`
    (from 0, over all its connections), whose answer is `answer`; `error` is its error frame
    and `config` its config frame."""
    if mode is not None and mode not in HOSTILE:
        raise ValueError(f"hostile mode must be one of {HOSTILE}, got {mode!r}")
    if mode == "storm" and index == 0:
        return [error] * STORM
    if mode == "duplicate":
        return [answer, answer]
    if mode == "push" and index == 0:
        return [answer, config]
    return [answer]
