"""What ``vla-client`` imports before a command's work (issue 45 item 10): ``--help``,
``--version`` and the commands below parse their command line without numpy, OpenCV, httpx,
pydantic, the server's libraries, torch, Zenoh or Rerun, which is most of what made every
command take 0.7 s to start. How long it takes is measured by ``benchmarks/bench_cli_start.py``,
not here."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

import pytest

from vla_client import recording
from vla_client.cameras import ros_bag
from vla_client.cli import COMMANDS, bag
from vla_client.protocol import LAYOUTS
from vla_client.protocol.names import LAYOUT_NAMES, RECORDING_SUFFIX

ROOT = Path(__file__).resolve().parents[2]
HEAVY = ("numpy", "cv2", "httpx", "pydantic", "fastapi", "uvicorn", "torch", "zenoh", "rerun")
PROBE = """
import sys
from vla_client.cli import main
try:
    code = main(sys.argv[1:])
finally:
    heavy = sorted(name for name in {heavy!r} if name in sys.modules)
    print("HEAVY", heavy, file=sys.stderr)
raise SystemExit(code)
"""


def loaded(*words: str) -> list[str]:
    """The heavy libraries ``vla-client WORDS`` had imported when it ended (it exits 0)."""
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    run = subprocess.run(
        [sys.executable, "-c", PROBE.format(heavy=HEAVY), *words],
        capture_output=True, text=True, env=env, timeout=120, check=False,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr
    line = next(line for line in run.stderr.splitlines() if line.startswith("HEAVY "))
    return list(ast.literal_eval(line.removeprefix("HEAVY ")))


@pytest.mark.parametrize(
    "words",
    [
        ("--help",),
        ("--version",),
        *((name, "--help") for name in ("serve", "send", "metadata", "demo", "bench")),
        *((name, "--help") for name in ("record", "view", "export", "cameras", "eval", "ros2")),
    ],
    ids=" ".join,
)
def test_parsing_imports_no_heavy_library(words: tuple[str, ...]) -> None:
    assert loaded(*words) == []


def test_help_lists_every_command_without_importing_them() -> None:
    run = subprocess.run(
        [sys.executable, "-c", "import sys; from vla_client.cli import main; main(['--help']); "
         "print(sorted(m for m in sys.modules if m.startswith('vla_client.cli.')))"],
        capture_output=True, text=True, timeout=60, check=False,
        env={**os.environ, "PYTHONPATH": str(ROOT / "src")},
    )  # fmt: skip
    for name, line in COMMANDS.items():
        assert name in run.stdout and " ".join(line.split()[:3]) in " ".join(run.stdout.split())
    imported = ast.literal_eval(run.stdout.splitlines()[-1])
    assert not {f"vla_client.cli.{name}" for name in COMMANDS} & set(imported), imported


@pytest.mark.parametrize("name", list(COMMANDS))
def test_a_command_imports_no_other_commands_module(name: str) -> None:
    """``vla-client NAME --help`` registers the options of NAME alone: of the commands'
    modules only ``vla_client.cli.NAME`` is imported (what commands share is in modules that
    are no command's, such as ``cli.common``, ``cli.control_options`` and ``cli.output``)."""
    run = subprocess.run(
        [sys.executable, "-c", "import sys; from vla_client.cli import main; "
         f"main([{name!r}, '--help']); "
         "print(sorted(m for m in sys.modules if m.startswith('vla_client.cli.')))"],
        capture_output=True, text=True, timeout=120, check=False,
        env={**os.environ, "PYTHONPATH": str(ROOT / "src")},
    )  # fmt: skip
    assert run.returncode == 0, run.stderr
    imported = set(ast.literal_eval(run.stdout.splitlines()[-1]))
    assert {f"vla_client.cli.{other}" for other in COMMANDS} & imported == {
        f"vla_client.cli.{name}"
    }


PARSE_ONLY = """
import sys
from vla_client.cli import build_parser
args = build_parser(only=sys.argv[1]).parse_args(sys.argv[1:])
heavy = sorted(name for name in {heavy!r} if name in sys.modules)
print("HEAVY", heavy, file=sys.stderr)
"""


@pytest.mark.parametrize(
    "words",
    [
        ("record", "out.vlaobs", "--frames", "3", "--rate", "5", "--raw"),
        ("view", "in.vlaobs", "--frames", "4", "--tile-height", "120"),
        ("export", "in.vlaobs", "--lerobot", "dataset", "--repo-id", "me/data", "--fps", "30"),
        ("cameras", "--camera", "front=synthetic", "--grid", "grid.png", "--timeout", "2"),
        (
            "eval",
            "--delay-ms",
            "0",
            "50",
            "--mode",
            "aligned",
            "rtc",
            "--rate",
            "15",
            "--watchdog",
            "0.5",
            "--env-camera",
            "pixels=top",
            "--plot",
            "success.png",
        ),
        (
            "ros2",
            "--url",
            "http://127.0.0.1:8000",
            "--image",
            "/camera/image_raw=wrist",
            "--state",
            "/joint_states",
            "--command",
            "/arm/commands",
            "--command-type",
            "array",
            "--mode",
            "blended",
            "--max-refusals",
            "2",
            "--watchdog-behaviour",
            "zero",
        ),
    ],
    ids=lambda words: words[0],
)
def test_parsing_a_commands_options_imports_no_heavy_library(words: tuple[str, ...]) -> None:
    """Every option's check runs while parsing (a file's suffix, a rate's range, a repo id),
    and none of them needs a heavy library: what they check against is in light modules."""
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    run = subprocess.run(
        [sys.executable, "-c", PARSE_ONLY.format(heavy=HEAVY), *words],
        capture_output=True, text=True, env=env, timeout=120, check=False,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr
    line = next(line for line in run.stderr.splitlines() if line.startswith("HEAVY "))
    assert ast.literal_eval(line.removeprefix("HEAVY ")) == []


def test_the_names_the_command_line_keeps_are_the_librarys() -> None:
    assert tuple(LAYOUTS) == LAYOUT_NAMES
    assert bag.STATE == ros_bag.STATE
    assert recording.SUFFIX == RECORDING_SUFFIX


def test_what_a_recording_costs_a_step_is_what_the_help_says(cli, tmp_path: Path) -> None:
    """``record --help``: three synthetic 360x640 cameras take about 1.2 MB a step as PNG,
    2.1 MB raw, 0.11 MB as JPEG."""
    sizes = (((), 1.0e6, 1.4e6), (("--raw",), 2.0e6, 2.2e6), (("--jpeg",), 0.08e6, 0.15e6))
    for index, (options, low, high) in enumerate(sizes):
        path = tmp_path / f"steps{index}.vlaobs"
        run = cli("record", str(path), "--frames", "4", "--rate", "0", *options)
        assert run.code == 0, run.err
        assert low < path.stat().st_size / 4 < high, path.stat().st_size
    help_text = " ".join(cli("record", "--help").out.split())
    assert "about 1.2 MB a step as PNG, 2.1 MB raw, 0.11 MB as JPEG" in help_text


def test_what_a_rerun_file_costs_a_step_is_what_the_help_says(cli, server_url, tmp_path) -> None:
    pytest.importorskip("rerun")
    path = tmp_path / "run.rrd"
    run = cli("send", server_url, "--cameras", "2", "--height", "360", "--width", "640",
              "--repeat", "4", "--rerun", str(path))  # fmt: skip
    assert run.code == 0, run.err
    per_camera_step = path.stat().st_size / 4 / 2
    assert 0.65e6 < per_camera_step < 0.8e6, per_camera_step
    assert "about 0.7 MB a step per 360x640 camera" in " ".join(cli("send", "--help").out.split())
