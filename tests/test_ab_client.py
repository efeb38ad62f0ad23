"""``benchmarks/ab_client.py``: the old-and-new client comparison runs end to end and prints
every row, its ratios computed from what it measured."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.timeout(180)
def test_smallest_run_exits_0_and_prints_both_paths_against_their_floors() -> None:
    done = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "ab_client.py"), "HEAD", "-n", "1"],
        capture_output=True, text=True, timeout=170, check=False,
        env={**os.environ, "PYTHONPATH": str(ROOT / "src")},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "load" in done.stdout and "A = HEAD" in done.stdout
    number = r"(\d+\.\d+)"
    for path in ("http", "ws"):
        wall = re.search(rf"^{path}\s+" + r"\s+".join([number] * 9) + r"\s+<= 1\.[12]$",
                         done.stdout, re.MULTILINE)  # fmt: skip
        assert wall, done.stdout
        a, b, b_over_a, plain, a_plain, b_plain, bare, a_bare, b_bare = map(float, wall.groups())
        assert min(a, b, plain, bare) > 0
        for ratio, (top, bottom) in (
            (b_over_a, (b, a)), (a_plain, (a, plain)), (b_plain, (b, plain)),
            (a_bare, (a, bare)), (b_bare, (b, bare)),
        ):  # fmt: skip
            assert ratio == pytest.approx(top / bottom, abs=0.01)
        cpu = re.search(rf"^{path}\s+" + r"\s+".join([number] * 4) + "$", done.stdout, re.M)
        assert cpu, done.stdout
        a, b, b_over_a, plain = map(float, cpu.groups())
        assert min(a, b, plain) > 0 and b_over_a == pytest.approx(b / a, abs=0.002)
