"""``ipc://`` in a small ``/dev/shm`` (a private tmpfs, as a container's): the client's frames
that can never fit are a 413, frames that do not fit now a 503 with Retry-After (what the server
answers over HTTP for its own shared memory), and never a SIGBUS."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from small_shm import in_small_shm, require_small_shm

SCRIPT = Path(__file__).with_name("ipc_small_shm.py")
SOURCE = str(Path(__file__).resolve().parents[2] / "src")


def test_a_short_dev_shm_answers_413_and_503_as_over_http():
    require_small_shm()
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([SOURCE, os.environ.get("PYTHONPATH", "")])}
    run = subprocess.run(
        in_small_shm("8m", [sys.executable, str(SCRIPT)]),
        capture_output=True, text=True, env=env, timeout=240, check=False,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr[-3000:]
    report = json.loads(run.stdout.strip().splitlines()[-1])
    assert report["too big"]["status"] == 413 and "/dev/shm" in report["too big"]["detail"]
    assert report["short"]["status"] == 503 and report["short"]["retry_after"] == 1.0
    assert report["after"] == {"status": 200, "shape": [16, 7]}
