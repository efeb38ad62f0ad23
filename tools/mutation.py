"""Mutation testing, one module at a time: mutmut's score per module and the mutants that live.

mutmut changes the code in small ways (``>`` to ``>=``, ``+ 1`` to ``+ 2``, a string, a
default) and runs the tests against each change; a change no test notices (a survivor) is a
bug the suite would let through, unless it changes nothing that matters (an equivalent
mutant; docs/testing.md lists the known ones and why). The modules and their settings are in
``[tool.mutmut]`` of pyproject.toml; this script runs each module on its own, with the tests
that are about it (`MODULES`), in a work folder of its own under the system's temporary
folder, at the lowest CPU priority and one test process at a time::

    python tools/mutation.py                       # the modules, in the order below
    python tools/mutation.py control/watchdog transports/retry
    python tools/mutation.py --list                # the modules and their tests

For each module it prints the counts (killed, survived, no tests, timeout), the score (killed
and timed out over all tried), every survivor with its diff, and writes the same as JSON next
to the work folders. Too slow for CI (minutes per module): run it by hand when the modules or
their tests change.
"""

from __future__ import annotations

import argparse
import fnmatch
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import tomllib

ROOT = Path(__file__).resolve().parents[1]
WORK = Path(tempfile.gettempdir()) / "vla-mutation"

MODULES: dict[str, list[str]] = {
    "transports/retry": ["tests/transports/test_retry_policy.py"],
    "control/safety": ["tests/control/test_safety.py", "tests/control/test_safety_edges.py",
                       "tests/control/test_options_are_checked.py"],
    "control/watchdog": ["tests/control/test_watchdog.py", "tests/control/test_watchdog_details.py",
                         "tests/control/test_timing_at_the_edge.py",
                         "tests/control/test_options_are_checked.py"],
    "server/limits": ["tests/server/test_limits_at_the_edge.py",
                      "tests/server/test_hostile_input.py"],
    "server/auth": ["tests/server/test_security.py"],
    "codecs/b64": ["tests/codecs/test_b64.py", "tests/codecs/test_properties.py"],
    "codecs/frames": ["tests/codecs/test_frames.py",
                      "tests/codecs/test_pixel_limit_at_the_edge.py"],
    "codecs/digest": ["tests/codecs/test_properties.py"],
    "control/chunk": ["tests/control/test_chunk.py", "tests/control/test_timing_at_the_edge.py"],
    "cameras/rig": ["tests/cameras/test_camera_rig.py"],
    "cameras/preprocess": ["tests/cameras/test_preprocess.py"],
    "codecs/msgpack_numpy": ["tests/codecs/test_msgpack_numpy.py"],
    "codecs/images": ["tests/codecs/test_images.py",
                      "tests/codecs/test_pixel_limit_at_the_edge.py"],
    "codecs/arrays": ["tests/codecs/test_arrays.py"],
    "server/worker/shm": ["tests/server/test_worker.py"],
    "protocol/response": ["tests/protocol/test_response.py",
                          "tests/transports/test_empty_chunks.py"],
    "protocol/decode": ["tests/protocol/test_fuzz.py", "tests/protocol/test_request.py"],
}  # fmt: skip
"""Module (under src/vla_client, without .py) -> the test files that are about it."""

KILLED = ("killed", "timeout")
"""Outcomes that count as caught: a test failed, or the mutant hung until it was stopped."""


@dataclass
class ModuleResult:
    module: str
    counts: dict[str, int] = field(default_factory=dict)
    survivors: dict[str, str] = field(default_factory=dict)
    seconds: float = 0.0
    error: str = ""

    @property
    def score(self) -> float | None:
        tried = sum(n for status, n in self.counts.items() if status not in ("skipped",))
        caught = sum(self.counts.get(status, 0) for status in KILLED)
        return None if not tried else caught / tried


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("modules", nargs="*", help="modules to run (default: all, in order)")
    parser.add_argument("--list", action="store_true", help="print the modules and their tests")
    parser.add_argument("--timeout-s", type=float, default=3600, help="per module (default 1 h)")
    args = parser.parse_args()
    unknown = [m for m in args.modules if m not in MODULES]
    if unknown:
        parser.error(f"unknown modules {unknown}; choose from {', '.join(MODULES)}")
    settings = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["mutmut"]
    if args.list:
        for module, tests in MODULES.items():
            print(f"{module}: {' '.join(tests)}")
        return 0
    modules = args.modules or list(MODULES)
    check_scope(settings, modules)
    results = []
    for module in modules:
        result = run_module(module, settings, args.timeout_s)
        results.append(result)
        report(result)
    WORK.mkdir(parents=True, exist_ok=True)
    summary = WORK / f"summary-{time.strftime('%Y%m%d-%H%M%S')}.json"
    summary.write_text(json.dumps([asdict(r) | {"score": r.score} for r in results], indent=2))
    print(f"\nsummary: {summary}")
    for result in results:
        score = "n/a" if result.score is None else f"{result.score:.1%}"
        print(f"  {result.module:24} {score:>7}  {result.counts}  {result.seconds:.0f} s")
    return 1 if any(r.error for r in results) else 0


def check_scope(settings: dict[str, object], modules: list[str]) -> None:
    """Each module lies within pyproject's ``only_mutate`` and has its test files."""
    patterns = settings.get("only_mutate", [])
    assert isinstance(patterns, list)
    for module in modules:
        tests = MODULES[module]
        path = f"src/vla_client/{module}.py"
        if not any(fnmatch.fnmatch(path, pattern) for pattern in patterns):
            raise SystemExit(f"{path} is not in [tool.mutmut] only_mutate of pyproject.toml")
        missing = [test for test in tests if not (ROOT / test).exists()]
        if missing or not (ROOT / path).exists():
            raise SystemExit(f"{module}: missing {missing or path}")


def run_module(module: str, settings: dict[str, object], timeout_s: float) -> ModuleResult:
    """mutmut on one module, in a fresh work folder that links to this checkout."""
    result = ModuleResult(module)
    work = WORK / module.replace("/", "-")
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    (work / "src").symlink_to(ROOT / "src")
    (work / "tests").symlink_to(ROOT / "tests")
    (work / "pyproject.toml").write_text(work_pyproject(module, settings))
    # The tests must import the mutated copy mutmut makes: no PYTHONPATH to this checkout.
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    mutmut = str(Path(sys.executable).with_name("mutmut"))
    started = time.monotonic()
    print(f"\n=== {module}: mutmut run ({', '.join(MODULES[module])})", flush=True)
    try:
        run = subprocess.run(
            ["nice", "-n", "19", mutmut, "run", "--max-children", "1"],
            cwd=work, env=env, capture_output=True, text=True, timeout=timeout_s,
        )  # fmt: skip
    except subprocess.TimeoutExpired:
        result.error = f"stopped after {timeout_s:.0f} s"
    else:
        (work / "mutmut-run.log").write_text(run.stdout + run.stderr)
        if run.returncode != 0:
            result.error = f"mutmut run exited {run.returncode}: {tail(run.stdout + run.stderr)}"
    result.seconds = time.monotonic() - started
    statuses = read_statuses(work, mutmut, env)
    for name, status in statuses.items():
        result.counts[status] = result.counts.get(status, 0) + 1
        if status == "survived":
            result.survivors[name] = show(work, mutmut, env, name)
    return result


def work_pyproject(module: str, settings: dict[str, object]) -> str:
    """pyproject.toml for one module's run: its file, its tests, the shared pytest options."""
    pytest_options = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["pytest"]
    lines = [
        "[tool.mutmut]",
        f"source_paths = {json.dumps(settings.get('source_paths', ['src']))}",
        f'only_mutate = ["src/vla_client/{module}.py"]',
        f"pytest_add_cli_args_test_selection = {json.dumps(MODULES[module])}",
        f"pytest_add_cli_args = {json.dumps(settings.get('pytest_add_cli_args', []))}",
        "",
        "[tool.pytest.ini_options]",
    ]
    for key, value in pytest_options["ini_options"].items():
        lines.append(f"{key} = {json.dumps(value)}")
    return "\n".join(lines) + "\n"


def read_statuses(work: Path, mutmut: str, env: dict[str, str]) -> dict[str, str]:
    """Mutant name -> status, from ``mutmut results --all true``."""
    listed = subprocess.run(
        [mutmut, "results", "--all", "true"], cwd=work, env=env, capture_output=True, text=True
    )
    pattern = re.compile(r"^\s+(\S+): (.+)$")
    return {m[1]: m[2].strip() for m in map(pattern.match, listed.stdout.splitlines()) if m}


def show(work: Path, mutmut: str, env: dict[str, str], name: str) -> str:
    shown = subprocess.run([mutmut, "show", name], cwd=work, env=env, capture_output=True,
                           text=True)  # fmt: skip
    return shown.stdout.strip()


def report(result: ModuleResult) -> None:
    score = "n/a" if result.score is None else f"{result.score:.1%}"
    print(f"--- {result.module}: score {score}, {result.counts}, {result.seconds:.0f} s")
    if result.error:
        print(f"    error: {result.error}")
    for name, diff in result.survivors.items():
        print(f"\nsurvived: {name}\n{diff}")


def tail(text: str, lines: int = 15) -> str:
    return "\n".join(text.strip().splitlines()[-lines:])


if __name__ == "__main__":
    sys.exit(main())
