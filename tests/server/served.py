"""A server in either layout for the attack tests, and the check that nothing leaked after each.

``worker`` is the default layout (an entrypoint here, a worker process, shared memory between);
``in_process`` runs the policy in a thread of the entrypoint. Attack tests run against both, and
after each one `Resources.check` looks for what an abandoned path could leave behind: a file
descriptor, here or in the worker, on a segment already unlinked, or more of our segments on
/dev/shm than the pool keeps idle.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

from vla_client.server import LocalServer, ServerConfig, create_app
from vla_client.server.policy import Policy
from vla_client.server.worker import SEGMENT_PREFIX

LAYOUTS = ("worker", "in_process")


def serve(policy: Policy, layout: str, **settings: Any) -> LocalServer:
    """`policy` served in `layout`, started."""
    config = ServerConfig(in_process=layout == "in_process", **settings)
    return LocalServer(create_app(policy, config)).start()


class Resources:
    """What this process and its worker hold of our shared memory, against a baseline; with
    `server`, also the slots its requests still hold (none, once it is idle)."""

    def __init__(self, keep: int, server: LocalServer | None = None) -> None:
        self.keep = keep
        self.baseline = _segments()
        self.runner = getattr(server.app.state.pipeline, "runner", None) if server else None

    def check(self, settle_s: float = 3.0) -> None:
        """Wait up to `settle_s` for released slots to go, then fail on anything left."""
        deadline = time.monotonic() + settle_s
        while True:
            stale = _deleted_maps(os.getpid()) + [
                target for pid in _workers() for target in _deleted_maps(pid)
            ]
            extra = _segments() - self.baseline
            held = getattr(self.runner, "slots_in_use", 0)
            if (not stale and len(extra) <= self.keep and not held) or time.monotonic() > deadline:
                break
            time.sleep(0.05)
        assert held == 0, f"{held} shared-memory slots still held by finished requests"
        assert stale == [], f"descriptors on unlinked segments: {stale}"
        assert len(extra) <= self.keep, f"{len(extra)} segments on /dev/shm, pool keeps {self.keep}"


def _segments() -> set[str]:
    return {p.name for p in Path("/dev/shm").glob(f"{SEGMENT_PREFIX}*")}


def _deleted_maps(pid: int) -> list[str]:
    found = []
    try:
        descriptors = list(Path(f"/proc/{pid}/fd").iterdir())
    except OSError:  # the process is gone
        return found
    for fd in descriptors:
        try:
            target = os.readlink(fd)
        except OSError:
            continue
        if target.startswith(f"/dev/shm/{SEGMENT_PREFIX}") and target.endswith("(deleted)"):
            found.append(target)
    return found


def _workers() -> list[int]:
    pids = []
    for children in Path(f"/proc/{os.getpid()}/task").glob("*/children"):
        for pid in children.read_text().split():
            try:
                if b"vla_client.server.worker" in Path(f"/proc/{pid}/cmdline").read_bytes():
                    pids.append(int(pid))
            except OSError:
                continue
    return pids
