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
        for ratio, (top, bottom), ratio_places in (
            (b_over_a, (b, a), 3), (a_plain, (a, plain), 3), (b_plain, (b, plain), 3),
            (a_bare, (a, bare), 2), (b_bare, (b, bare), 2),
        ):  # fmt: skip
            assert_ratio_of_printed(ratio, top, bottom, places=2, ratio_places=ratio_places)
        cpu = re.search(rf"^{path}\s+" + r"\s+".join([number] * 4) + "$", done.stdout, re.M)
        assert cpu, done.stdout
        a, b, b_over_a, plain = map(float, cpu.groups())
        assert min(a, b, plain) > 0
        assert_ratio_of_printed(b_over_a, b, a, places=3, ratio_places=3)


def assert_ratio_of_printed(
    ratio: float, top: float, bottom: float, places: int, ratio_places: int
) -> None:
    """The script divides the medians it measured and prints them rounded to ``places``
    decimals and the ratio to ``ratio_places``, so the printed ratio lies between the ratios
    of the extremes the rounded numbers stand for. (A fixed tolerance of 0.01 failed CI once:
    2.55 printed where the rounded medians gave 2.561.)"""
    half = 0.5 * 10.0**-places
    low = (top - half) / (bottom + half)
    high = (top + half) / (bottom - half)
    slack = 0.5 * 10.0**-ratio_places
    assert low - slack <= ratio <= high + slack, (ratio, top, bottom)
