"""The LeRobot tests run only where lerobot is installed: the venv `.ci/lerobot_venv.sh` builds
(LeRobot 0.4.4 pins torch<2.11; that script installs it beside torch 2.14.1 with --no-deps).
Elsewhere every module of this folder is reported skipped, with the reason, before it imports
lerobot. Nothing here downloads: HF_HUB_OFFLINE=1, and every policy is built from its config
class with random weights."""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path
from typing import Any

import pytest

os.environ["HF_HUB_OFFLINE"] = "1"  # before lerobot (and huggingface_hub) import

NOT_INSTALLED = (
    "lerobot is not installed here; .ci/lerobot_venv.sh builds the venv these tests run in"
)


def _installed() -> bool:
    # Without lerobot, `import lerobot` finds this very folder (tests/ is on sys.path) as a
    # namespace package, which has no origin; the real one is a regular package.
    spec = importlib.util.find_spec("lerobot")
    return spec is not None and spec.origin is not None


class _SkippedModule(pytest.Module):
    """A test module this venv cannot run: collected as one skip saying why."""

    def collect(self) -> Any:
        pytest.skip(NOT_INSTALLED)


if not _installed():

    def pytest_pycollect_makemodule(module_path: Path, parent: Any) -> Any:
        return _SkippedModule.from_parent(parent, path=module_path)
