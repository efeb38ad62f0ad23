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


def test_the_extras_are_read_from_pyproject_and_checked_everywhere(tool: ModuleType) -> None:
    assert tool.extra_requirements("rerun") == ["rerun-sdk>=0.23"]
    assert tool.extra_requirements("ros") == ["rosbags>=0.10"]
    assert tool.extra_requirements("ros2") == ["eclipse-zenoh>=1.10", "rosbags>=0.10.8"]
    assert tool.EXTRAS == ("rerun", "ros", "ros2")
    machines = {p.platform_machine for p in tool.EXTRA_PLATFORMS}
    assert machines == {"x86_64", "aarch64", "arm64", "AMD64"}
    assert tool.EXTRA_PYTHONS == ("3.10", "3.11", "3.12", "3.13")


def test_a_report_gives_the_wheels_and_refuses_a_source_build(tool: ModuleType) -> None:
    linux = tool.LINUX_X86_64
    report = {"install": [
        {"download_info": {"url": "https://x/rerun_sdk-0.41.0-cp311-abi3-manylinux_2_28_x86_64.whl"},
         "metadata": {"name": "rerun_sdk", "version": "0.41.0"}},
        {"download_info": {"url": "https://x/ruamel_yaml-0.19.1-py3-none-any.whl"},
         "metadata": {"name": "ruamel.yaml", "version": "0.19.1"}},
    ]}  # fmt: skip
    assert tool.wheels_in_report(report, linux, "3.12") == {
        "rerun-sdk": "0.41.0", "ruamel-yaml": "0.19.1",
    }  # fmt: skip
    report["install"].append(
        {
            "download_info": {"url": "https://x/apsw-3.54.tar.gz"},
            "metadata": {"name": "apsw", "version": "3.54"},
        }
    )
    with pytest.raises(SystemExit, match=r"not a wheel: https://x/apsw-3\.54\.tar\.gz"):
        tool.wheels_in_report(report, linux, "3.12")


def test_the_extras_table_names_each_release_or_no(tool: ModuleType) -> None:
    found = {
        ("Windows x86-64", "3.10"): {
            "rerun": {"rerun-sdk": "0.39.0"},
            "ros": {},
            "ros2": {"eclipse-zenoh": "1.10.2", "rosbags": "0.11.9"},
        }
    }
    row = tool.extra_table(found).splitlines()[-1]
    assert row == "| Windows x86-64 | 3.10 | 0.39.0 | no | 1.10.2 |"
    table = tool.EXTRA_TABLE.read_text(encoding="utf-8")
    assert '--8<-- "docs/install-wheels-extras.md"' in (ROOT / "docs" / "install.md").read_text()
    rows = [line for line in table.splitlines() if line.startswith("| ") and "---" not in line]
    assert len(rows) == 1 + len(tool.EXTRA_PLATFORMS) * len(tool.EXTRA_PYTHONS)
