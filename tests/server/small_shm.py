"""Run a command with a private, small ``/dev/shm``: a tmpfs of its own in a mount namespace.

A Docker container gets 64 MiB of ``/dev/shm`` unless told otherwise; this gives a process the
same without a container: ``unshare -m`` (root, or a user allowed to make namespaces) makes a
private mount namespace and a fresh tmpfs is mounted over ``/dev/shm`` inside it, seen by the
command and its children only. The network is shared, so a server started this way is reached
on 127.0.0.1 as usual, and its ``/dev/shm`` is seen from outside at ``/proc/PID/root/dev/shm``.
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
from collections.abc import Sequence

import pytest

_MOUNT = 'mount -t tmpfs -o "size=$0" tmpfs /dev/shm && exec "$@"'


def in_small_shm(size: str, command: Sequence[str]) -> list[str]:
    """`command` run with a ``/dev/shm`` of `size` (``64m``), as an argument list for Popen.

    The process started is `command` itself (each step execs the next), so its pid is the
    command's.
    """
    return ["unshare", "-m", "sh", "-c", _MOUNT, size, *command]


@functools.cache
def why_not() -> str | None:
    """Why a private ``/dev/shm`` cannot be made here, or None when it can."""
    if shutil.which("unshare") is None:
        return "no unshare command (util-linux)"
    try:
        probe = subprocess.run(
            in_small_shm("1m", ["true"]), capture_output=True, text=True, timeout=30
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"unshare -m failed: {exc}"
    if probe.returncode != 0:
        return f"unshare -m with a tmpfs is not permitted here ({probe.stderr.strip()})"
    return None


def require_small_shm() -> None:
    """Skip the calling test, saying why, where a private ``/dev/shm`` cannot be made (not
    root, or namespaces refused, as in an unprivileged container)."""
    reason = why_not()
    if reason is not None:
        pytest.skip(f"needs a private /dev/shm: {reason}")


def shm_used(pid: int) -> int:
    """Bytes in use on the ``/dev/shm`` process `pid` sees."""
    stats = os.statvfs(f"/proc/{pid}/root/dev/shm")
    return (stats.f_blocks - stats.f_bfree) * stats.f_frsize
