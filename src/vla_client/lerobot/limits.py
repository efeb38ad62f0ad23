"""What a LeRobot dataset's repo id and rate may be, importable without numpy or LeRobot: the
export checks them (`vla_client.lerobot.dataset`) and ``vla-client export`` checks its options
against them before anything is read."""

from __future__ import annotations

import re

REPO_ID = re.compile(r"^[A-Za-z0-9][\w.-]*/[A-Za-z0-9][\w.-]*$")
"""A dataset's repo id: ``owner/name``."""
MAX_FPS = 1000
"""The fastest dataset rate `export_lerobot_dataset` writes: beyond it a header's ``fps`` is a
mistake (inf, 1e300), not a camera."""
