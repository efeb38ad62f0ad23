"""The property tests' settings, as docs/testing.md ("Property tests") describes them."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import settings

ROOT = Path(__file__).resolve().parents[1]


def test_the_suite_draws_the_same_examples_every_run_with_no_time_limit() -> None:
    if os.environ.get("VLA_HYPOTHESIS", "suite") != "suite":
        pytest.skip("VLA_HYPOTHESIS chose another profile on purpose")
    assert settings.default.derandomize is True
    assert settings.default.deadline is None


def test_vla_hypothesis_explore_draws_new_examples() -> None:
    probe = (
        "import sys; sys.path.insert(0, 'tests'); import conftest; "
        "from hypothesis import settings; "
        "print(settings.default.derandomize, settings.default.deadline)"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, check=True,
        env={**os.environ, "VLA_HYPOTHESIS": "explore"},
    )  # fmt: skip
    assert done.stdout.split() == ["False", "None"]
