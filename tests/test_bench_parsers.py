"""``benchmarks/bench_parsers.py``: the h11/httptools comparison runs end to end where httptools
is installed, and says how to install it where it is not (it is no dependency of the project)."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "benchmarks" / "bench_parsers.py"


@pytest.mark.timeout(60)
def test_a_small_run_prints_a_ratio_per_parser() -> None:
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "-n", "2"], capture_output=True, text=True, timeout=55,
        check=False, env={**os.environ, "PYTHONPATH": str(ROOT / "src")},
    )  # fmt: skip
    if importlib.util.find_spec("httptools") is None:
        assert done.returncode != 0 and "pip install httptools" in done.stderr
        return
    assert done.returncode == 0, done.stderr
    rows = [line.split() for line in done.stdout.splitlines() if " ms " in line]
    assert [row[0] for row in rows] == ["server's", "uvicorn's", "httptools"]
    assert float(rows[0][-1]) == 1.0 and all(float(row[-1]) > 0 for row in rows)
