""".ci/check_wheels.py walks requirements with the target's markers (not this machine's) and
reports the fast paths each target gets; here on hand-made wheels, without PyPI (CI runs the
real check)."""

from __future__ import annotations

import importlib.util
import sys
import zipfile
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from packaging.requirements import Requirement

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def tool() -> Iterator[ModuleType]:
    spec = importlib.util.spec_from_file_location("check_wheels", ROOT / ".ci" / "check_wheels.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["check_wheels"] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    yield module
    del sys.modules["check_wheels"]


def make_wheel(folder: Path, name: str, requires: list[str]) -> Path:
    path = folder / f"{name}-1.0-py3-none-any.whl"
    metadata = f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n"
    metadata += "".join(f"Requires-Dist: {line}\n" for line in requires)
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr(f"{name}-1.0.dist-info/METADATA", metadata)
    return path


@pytest.fixture
def wheels(tmp_path: Path) -> dict[str, Path]:
    specs = {
        "app": [
            "core",
            "winonly; sys_platform == 'win32'",
            "plugin[fast]",
            "old; python_version < '3.11'",
        ],
        "core": [],
        "linuxonly": [],
        "plugin": ["speedup; extra == 'fast'", "docs; extra == 'docs'"],
        "speedup": ["linuxonly; sys_platform == 'linux'"],
    }
    return {name: make_wheel(tmp_path, name, requires) for name, requires in specs.items()}


def platform(tool: ModuleType, name: str) -> Any:
    return next(p for p in tool.PLATFORMS if p.name.startswith(name))


def test_the_walk_follows_the_targets_markers_and_extras(
    tool: ModuleType, wheels: dict[str, Path]
) -> None:
    windows = platform(tool, "Windows").environment("3.12")
    needed, missing = tool.walk([Requirement("app")], wheels, windows)
    # winonly is needed on Windows and not downloaded yet; linuxonly (speedup's, on Linux) is
    # not needed there although it is among the wheels; docs is another extra's.
    assert needed == {"app", "core", "plugin", "speedup", "winonly"}
    assert missing == ["winonly"]


def test_the_walk_on_linux_with_python_3_10(tool: ModuleType, wheels: dict[str, Path]) -> None:
    linux = platform(tool, "Linux aarch64").environment("3.10")
    needed, missing = tool.walk([Requirement("app")], wheels, linux)
    assert needed == {"app", "core", "plugin", "speedup", "linuxonly", "old"}
    assert missing == ["old"]


def test_the_table_says_what_falls_back(tool: ModuleType) -> None:
    table = tool.table({("Windows x86-64", "3.12"): {"fpng", "isal", "numpy"}})
    row = table.splitlines()[-1]
    assert row == "| Windows x86-64 | 3.12 | yes | yes | no (asyncio instead) |"


def test_the_install_page_shows_the_checked_table(tool: ModuleType) -> None:
    table = tool.TABLE.read_text(encoding="utf-8")
    assert '--8<-- "docs/install-wheels.md"' in (ROOT / "docs" / "install.md").read_text()
    rows = [line for line in table.splitlines() if line.startswith("| ") and "---" not in line]
    assert len(rows) == 1 + len(tool.PLATFORMS) * len(tool.PYTHONS)
