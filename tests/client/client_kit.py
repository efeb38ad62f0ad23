"""What the client tests share: closing a client of either kind, matching an error's whole
message, and a layout function for openpi's endpoint."""

from __future__ import annotations

import asyncio
import re
from typing import Any


def closed(client: Any) -> None:
    """Close `client`, an `ActionClient` or an `AsyncActionClient` (outside any event loop)."""
    result = client.close()
    if asyncio.iscoroutine(result):
        asyncio.run(result)


def exactly(message: str) -> str:
    """A `pytest.raises` match for the whole of `message`."""
    return f"^{re.escape(message)}$"


def to_droid(observation: Any) -> dict[str, Any]:
    """A layout function: the robot's own mapping of an observation to openpi's keys."""
    return {"prompt": observation.task}
