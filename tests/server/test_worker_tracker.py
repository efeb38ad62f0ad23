"""The worker maps the entrypoint's segments without any resource tracker knowing.

Before Python 3.13, attaching to a segment with `SharedMemory` registers it with the process's
resource tracker, which unlinks whatever it tracks when the process dies. A worker that died
between that registration and the unregistration that followed had its tracker unlink a segment
the entrypoint still used. These tests run the worker's mapping code in a subprocess.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from vla_client.server.worker.shm import SEGMENT_PREFIX, Segment

# Dies at the worst moment: right after mapping, when the old code called unregister.
KILLED_WHILE_MAPPING = """
import os, signal, sys
from multiprocessing import resource_tracker
resource_tracker.ensure_running()
print(resource_tracker._resource_tracker._pid, flush=True)
resource_tracker.unregister = lambda *args: os.kill(os.getpid(), signal.SIGKILL)
from vla_client.server.worker.shm import Attachments
Attachments().buffer(0, sys.argv[1])
os.kill(os.getpid(), signal.SIGKILL)
"""

MAPS_AND_REPORTS = """
import sys
from multiprocessing import resource_tracker
from vla_client.server.worker.shm import Attachments
buffer = Attachments().buffer(0, sys.argv[1])
print(bytes(buffer[:5]).decode(), resource_tracker._resource_tracker._pid)
"""


@pytest.fixture
def segment() -> Segment:
    segment = Segment.create(f"{SEGMENT_PREFIX}{os.getpid()}_tracker_test", 1 << 20)
    segment.buf[:5] = b"hello"
    yield segment
    segment.unlink()
    segment.close()


def run(script: str, segment: Segment) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", script, segment.name],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip


def test_a_worker_killed_while_mapping_leaves_the_segment_in_place(segment: Segment) -> None:
    completed = run(KILLED_WHILE_MAPPING, segment)
    assert completed.returncode == -9, completed.stderr
    tracker = int(completed.stdout.split()[0])
    deadline = time.monotonic() + 10  # the orphaned tracker cleans up, then exits
    while Path(f"/proc/{tracker}").exists():
        assert time.monotonic() < deadline, "the worker's resource tracker did not exit"
        time.sleep(0.05)
    assert Path(f"/dev/shm/{segment.name}").exists(), "the worker's tracker unlinked the segment"
    assert bytes(segment.buf[:5]) == b"hello"


def test_mapping_starts_no_resource_tracker(segment: Segment) -> None:
    completed = run(MAPS_AND_REPORTS, segment)
    assert completed.returncode == 0, completed.stderr
    assert completed.stdout.split() == ["hello", "None"]
