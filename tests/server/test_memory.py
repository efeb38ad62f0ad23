"""The serving process keeps freed memory mapped (glibc malloc thresholds)."""

import platform
import sys

from vla_client.server.engine.memory import keep_freed_memory


def test_applies_on_glibc_linux_and_nowhere_else():
    on_glibc = sys.platform.startswith("linux") and platform.libc_ver()[0] == "glibc"
    assert keep_freed_memory() is on_glibc
    assert keep_freed_memory() is on_glibc  # idempotent: the server may start twice in a process
