"""The property tests' settings, as docs/testing.md ("Property tests") describes them."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import settings

ROOT = Path(__file__).resolve().parents[1]


def environment(**changes: str | None) -> dict[str, str]:
    """This process's environment with `changes` applied (None removes the variable)."""
    env = {key: value for key, value in os.environ.items() if key not in changes}
    env.update({key: value for key, value in changes.items() if value is not None})
    return env


def test_the_suite_draws_the_same_examples_every_run_with_no_time_limit() -> None:
    if os.environ.get("VLA_HYPOTHESIS", "suite") != "suite":
        pytest.skip("VLA_HYPOTHESIS chose another profile on purpose")
    assert settings.default.derandomize is True
    assert settings.default.deadline is None


# Hypothesis loads its own "ci" profile (derandomized) where `CI` is set, as on the CI machine:
# the explore profile must draw new examples there too.
@pytest.mark.parametrize("ci", [None, "true"], ids=["local", "under-CI"])
def test_vla_hypothesis_explore_draws_new_examples(ci: str | None) -> None:
    probe = (
        "import sys; sys.path.insert(0, 'tests'); import conftest; "
        "from hypothesis import settings; "
        "print(settings.default.derandomize, settings.default.deadline)"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, check=True,
        env=environment(VLA_HYPOTHESIS="explore", CI=ci),
    )  # fmt: skip
    assert done.stdout.split() == ["False", "None"]
