"""Every script in ``benchmarks/`` starts: ``--help`` exits 0. A benchmark is where the docs'
figures come from, and one that no longer imports (a name it used was renamed) fails here rather
than on the day its figures are regenerated."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPTS = sorted((ROOT / "benchmarks").glob("*.py"))
NEEDS = {
    "bench_lerobot.py": "lerobot",  # runs in the LeRobot venv (.ci/lerobot_venv.sh)
    "bench_ros2.py": "zenoh",  # the ros2 extra
}


@pytest.mark.timeout(120)
@pytest.mark.parametrize("script", SCRIPTS, ids=[script.name for script in SCRIPTS])
def test_the_benchmark_starts(script: Path) -> None:
    needed = NEEDS.get(script.name)
    if needed and importlib.util.find_spec(needed) is None:
        pytest.skip(f"needs {needed}")
    path = os.pathsep.join([str(ROOT / "src"), str(ROOT / "benchmarks")])
    done = subprocess.run(
        [sys.executable, str(script), "--help"], capture_output=True, text=True, timeout=110,
        check=False, cwd=ROOT, env={**os.environ, "PYTHONPATH": path},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
