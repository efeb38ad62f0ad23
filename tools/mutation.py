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

For each module it prints the counts (killed, survived, no tests, timeout), every survivor
with its diff, and the score: mutants killed (or timed out) over those tried, less the known
equivalent ones, which are listed with the reason in docs/testing.md ("Equivalent mutants")
and read from there. Each module's result is kept under the work folder; ``--docs`` writes the
latest of each, with its date, to docs/mutation-scores.md (included in docs/testing.md)::

    python tools/mutation.py --docs

Too slow for CI (minutes per module): run it by hand when the modules or their tests change.
Mutant names carry a number per function, so after an edit of a module its listed equivalents
may need their numbers checked again: the report flags listed names that no longer survive.
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
RESULTS = WORK / "results"
TESTING_DOC = ROOT / "docs" / "testing.md"
SCORES_DOC = ROOT / "docs" / "mutation-scores.md"
_EQUIVALENT_LINE = re.compile(r"^- `(vla_client\.[^`]+)`: (.+)$")

MODULES: dict[str, list[str]] = {
    "transports/retry": [
        "tests/transports/test_retry_policy.py", "tests/transports/test_retry_warm_up.py"
    ],
    "control/safety": ["tests/control/test_safety.py", "tests/control/test_safety_edges.py",
                       "tests/control/test_safety_rate.py", "tests/control/test_safety_shapes.py",
                       "tests/control/test_options_are_checked.py"],
    "control/pacing": ["tests/control/test_stalls_and_clock_steps.py",
                       "tests/control/test_loop.py"],
    "control/watchdog": ["tests/control/test_watchdog.py", "tests/control/test_watchdog_details.py",
                         "tests/control/test_timing_at_the_edge.py",
                         "tests/control/test_options_are_checked.py"],
    "server/edge/limits": ["tests/server/test_limits.py"],
    "server/edge/auth": ["tests/server/test_auth.py"],
    "codecs/b64": ["tests/codecs/test_b64.py"],
    "codecs/frames": ["tests/codecs/test_frames.py",
                      "tests/codecs/test_pixel_limit_at_the_edge.py"],
    "codecs/digest": ["tests/codecs/test_properties.py"],
    "control/chunk": ["tests/control/test_chunk.py", "tests/control/test_chunk_modes.py",
                      "tests/control/test_chunk_replies.py",
                      "tests/control/test_timing_at_the_edge.py",
                      "tests/control/test_stalls_and_clock_steps.py",
                      "tests/control/test_rtc_executor.py", "tests/control/test_loop_options.py"],
    "cameras/rig": ["tests/cameras/test_camera_rig.py"],
    "cameras/preprocess": ["tests/cameras/test_preprocess.py"],
    "client/fit": ["tests/cameras/test_preprocess.py"],
    "codecs/msgpack_numpy": ["tests/codecs/test_msgpack_numpy.py"],
    "codecs/image_encode": ["tests/codecs/test_images.py"],
    "codecs/image_decode": ["tests/codecs/test_images.py",
                            "tests/codecs/test_pixel_limit_at_the_edge.py"],
    "codecs/parallel": ["tests/codecs/test_images.py"],
    "codecs/arrays": ["tests/codecs/test_arrays.py"],
    "server/worker/shm": ["tests/server/test_shm.py"],
    "server/wire/reply_build": ["tests/protocol/test_response.py"],
    "protocol/reply_read": ["tests/protocol/test_response.py",
                            "tests/protocol/test_reply_size_limit.py",
                            "tests/transports/test_empty_chunks.py::test_read_actions_refuses_an_empty_action_array",
                            "tests/transports/test_empty_chunks.py::test_read_actions_takes_the_smallest_chunk"],
    "server/wire/decode": ["tests/protocol/test_decode.py", "tests/protocol/test_request.py",
                           "tests/protocol/test_decode_values.py",
                           "tests/protocol/test_decode_depth.py"],
    "protocol/metadata_fields": ["tests/protocol/test_metadata_bounds.py",
                                 "tests/protocol/test_metadata_agreement.py",
                                 "tests/protocol/test_reply_size_limit.py"],
    "protocol/families/vllm_omni": ["tests/protocol/test_dialects.py"],
    "protocol/families/roboarena": ["tests/protocol/test_dialects.py"],
    "protocol/families/gr00t_rtc": ["tests/client/test_gr00t_rtc.py"],
    "cameras/ros_bag": ["tests/cameras/test_ros_bag.py", "tests/cli/test_bag.py"],
    "cameras/ros_messages": ["tests/cameras/test_ros_messages.py",
                             "tests/cameras/test_ros_bag.py", "tests/cli/test_bag.py"],
    "cameras/bag_integrity": ["tests/cameras/test_bag_integrity.py"],
    "control/clocks": ["tests/control/test_clocks.py", "tests/control/test_one_clock.py",
                       "tests/control/test_stalls_and_clock_steps.py"],
    "transports/zmq": ["tests/transports/test_zmq.py", "tests/client/test_gr00t.py"],
    "protocol/families/gr00t": ["tests/protocol/test_gr00t_messages.py",
                                "tests/client/test_gr00t.py"],
    "codecs/pixel_json": ["tests/codecs/test_pixel_json.py", "tests/codecs/test_value_lists.py",
                          "tests/protocol/test_base64_strings.py",
                          "tests/codecs/test_pixel_json_edges.py"],
    "server/worker/scheduler": ["tests/server/test_scheduler.py"],
    "client/addressing": ["tests/client/test_addressing.py", "tests/client/test_client_options.py",
                          "tests/cli/test_api_key_env.py"],
    "client/options": ["tests/client/test_client_options.py",
                       "tests/client/test_options_per_transport.py",
                       "tests/client/test_time_limits_at_the_edge.py"],
    "client/dialect": ["tests/client/test_dialect_session.py", "tests/client/test_vllm_omni.py",
                       "tests/client/test_roboarena.py", "tests/client/test_fit_per_family.py",
                       "tests/transports/test_replies_without_ids.py",
                       "tests/protocol/test_dialects.py"],
    "client/action_api": ["tests/client/test_action_api_session.py"],
    "client/request_book": ["tests/client/test_request_book.py",
                            "tests/client/test_time_limits_at_the_edge.py"],
    "client/gr00t": ["tests/client/test_gr00t.py", "tests/client/test_gr00t_rtc.py",
                     "tests/client/test_gr00t_unreachable.py"],
    "transports/drive": ["tests/transports/test_drive.py", "tests/client/test_client_path.py",
                         "tests/transports/test_retry.py"],
    "transports/http": ["tests/transports/test_http_transport.py",
                        "tests/transports/test_http_body_writes.py",
                        "tests/transports/test_http_base_path.py",
                        "tests/transports/test_errors_alike.py",
                        "tests/transports/test_connection_errors_alike.py",
                        "tests/client/test_client_path.py"],
    "transports/websocket": ["tests/transports/test_websocket_client.py",
                             "tests/transports/test_hostile_servers.py",
                             "tests/transports/test_replies_without_ids.py",
                             "tests/transports/test_websocket_redirects.py",
                             "tests/transports/test_reconnect.py"],
    "server/policies/loading": ["tests/server/test_policy_loading.py",
                                "tests/server/test_own_policies.py"],
    "server/policies/openpi": ["tests/server/test_openpi_policy.py"],
    "server/policies/reach": ["tests/server/test_policies.py"],
    "server/policies/reach_flow": ["tests/server/test_policies.py",
                                   "tests/server/test_rtc_server.py"],
    "server/policies/flow": ["tests/server/test_policies.py", "tests/server/test_rtc_server.py"],
    "server/policies/mlp": ["tests/server/test_policies.py"],
    "server/policies/reference": ["tests/server/test_reference_policy.py"],
    "server/policies/replay": ["tests/server/test_policies.py"],
    "server/policies/builtin": ["tests/server/test_policies.py",
                                "tests/server/test_policy_loading.py"],
    "server/policies/torch_cnn": ["tests/server/test_policies.py"],
    "server/engine/pipeline": ["tests/server/test_decode_routing.py",
                               "tests/server/test_serve_record.py",
                               "tests/server/test_bad_input.py", "tests/server/test_depth.py",
                               "tests/server/test_request_sizes.py"],
    "server/app": ["tests/server/test_protocols.py", "tests/transports/test_http_base_path.py",
                   "tests/server/test_log_redaction.py",
                   "tests/server/test_startup_validation.py", "tests/server/test_hot_route.py"],
    "server/worker/supervisor": ["tests/server/test_supervisor_faults.py",
                                 "tests/server/test_worker_lifecycle.py",
                                 "tests/server/test_restart.py", "tests/server/test_faults.py"],
    "server/worker/dispatch": ["tests/server/test_worker.py", "tests/server/test_faults.py",
                               "tests/server/test_shm_full.py"],
    "server/worker/process": ["tests/server/test_worker.py", "tests/server/test_worker_threads.py",
                              "tests/server/test_policy_refusals.py"],
}  # fmt: skip
"""Module (under src/vla_client, without .py) -> the test files that are about it."""

ALSO_COPY = ("docs", "tools", "benchmarks", "examples")
"""Folders besides src/ and tests/ that tests read or import from."""

KILLED = ("killed", "timeout")
"""Outcomes that count as caught: a test failed, or the mutant hung until it was stopped."""


@dataclass
class ModuleResult:
    module: str
    date: str = ""
    counts: dict[str, int] = field(default_factory=dict)
    survivors: dict[str, str] = field(default_factory=dict)
    equivalent: list[str] = field(default_factory=list)
    seconds: float = 0.0
    error: str = ""

    @property
    def considered(self) -> int:
        """Mutants that count: all tried (a stopped run leaves some unchecked), less the known
        equivalent survivors."""
        return sum(self.counts.values()) - self.counts.get("not checked", 0) - len(self.equivalent)

    @property
    def killed(self) -> int:
        return sum(self.counts.get(status, 0) for status in KILLED)

    @property
    def score(self) -> float | None:
        return None if not self.considered else self.killed / self.considered


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("modules", nargs="*", help="modules to run (default: all, in order)")
    parser.add_argument("--list", action="store_true", help="print the modules and their tests")
    parser.add_argument("--docs", action="store_true", help=f"write {SCORES_DOC.name} and stop")
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
    if args.docs:
        write_docs()
        return 0
    modules = args.modules or list(MODULES)
    check_scope(settings, modules)
    equivalent = equivalents()
    results = []
    for module in modules:
        result = run_module(module, settings, args.timeout_s)
        result.equivalent = sorted(set(result.survivors) & set(equivalent))
        results.append(result)
        report(result, equivalent)
        save(result)
    print()
    for result in results:
        score = "n/a" if result.score is None else f"{result.score:.1%}"
        print(f"  {result.module:24} {score:>7}  {result.counts}  {result.seconds:.0f} s")
    return 1 if any(r.error for r in results) else 0


def equivalents() -> dict[str, str]:
    """Mutant name -> why it changes nothing, from docs/testing.md's list."""
    lines = TESTING_DOC.read_text().splitlines() if TESTING_DOC.exists() else []
    return {m[1]: m[2] for m in map(_EQUIVALENT_LINE.match, lines) if m}


def save(result: ModuleResult) -> None:
    RESULTS.mkdir(parents=True, exist_ok=True)
    path = RESULTS / f"{result.module.replace('/', '-')}.json"
    path.write_text(json.dumps(asdict(result), indent=2))


def write_docs() -> None:
    """docs/mutation-scores.md from the latest result of each module, in `MODULES` order. A
    module with no result here (run on another machine, or before the temporary folder was
    emptied), or whose last run failed, keeps its row from the page as it stands."""
    saved = {}
    listed = equivalents()  # as docs/testing.md has them now, listed after a run too
    for path in RESULTS.glob("*.json") if RESULTS.exists() else []:
        data = json.loads(path.read_text())
        result = ModuleResult(**data)
        result.equivalent = sorted(set(result.survivors) & set(listed))
        saved[result.module] = result
    kept = published_rows()
    rows = [
        "<!-- generated by tools/mutation.py --docs; do not edit -->",
        "",
        "| module | date | mutants | killed | equivalent | survived | no tests | not run | score |",
        "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for module in MODULES:
        r = saved.get(module)
        if r is None or (r.error and module in kept):
            if module in kept:
                rows.append(kept[module])
            continue
        survived = r.counts.get("survived", 0) - len(r.equivalent)
        score = "n/a" if r.score is None else f"{r.score:.1%}"
        rows.append(
            f"| {module} | {r.date} | {sum(r.counts.values())} | {r.killed} | "
            f"{len(r.equivalent)} | {survived} | {r.counts.get('no tests', 0)} | "
            f"{r.counts.get('not checked', 0)} | {score} |"
        )
    missing = [m for m in MODULES if m not in saved and m not in kept]
    if missing:
        rows += ["", f"Not run yet: {', '.join(missing)}."]
    SCORES_DOC.write_text("\n".join(rows) + "\n")
    print(f"wrote {SCORES_DOC.relative_to(ROOT)} ({len(rows) - 4} modules)")


def published_rows() -> dict[str, str]:
    """Module -> its row in docs/mutation-scores.md as it stands."""
    text = SCORES_DOC.read_text() if SCORES_DOC.exists() else ""
    return {
        line.split("|")[1].strip(): line
        for line in text.splitlines()
        if line.startswith("| ") and line.split("|")[1].strip() in MODULES
    }


def check_scope(settings: dict[str, object], modules: list[str]) -> None:
    """Each module lies within pyproject's ``only_mutate`` and has its test files."""
    patterns = settings.get("only_mutate", [])
    assert isinstance(patterns, list)
    for module in modules:
        tests = MODULES[module]
        path = f"src/vla_client/{module}.py"
        if not any(fnmatch.fnmatch(path, pattern) for pattern in patterns):
            raise SystemExit(f"{path} is not in [tool.mutmut] only_mutate of pyproject.toml")
        missing = [test for test in tests if not (ROOT / test.split("::")[0]).exists()]
        if missing or not (ROOT / path).exists():
            raise SystemExit(f"{module}: missing {missing or path}")


def run_module(module: str, settings: dict[str, object], timeout_s: float) -> ModuleResult:
    """mutmut on one module, in a fresh work folder that links to this checkout."""
    result = ModuleResult(module, date=time.strftime("%Y-%m-%d"))
    work = WORK / module.replace("/", "-")
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    (work / "src").symlink_to(ROOT / "src")
    (work / "tests").symlink_to(ROOT / "tests")
    for folder in ALSO_COPY:  # the docs' snippets, the tools and benchmarks tests drive
        (work / folder).symlink_to(ROOT / folder)
    (work / "pyproject.toml").write_text(work_pyproject(module, settings))
    # The tests, and the servers and CLIs they start in other processes, must import the
    # mutated copy mutmut makes in mutants/src. The folder exists before Python starts, so
    # the import system does not remember it as missing.
    (work / "mutants" / "src").mkdir(parents=True)
    env = {**os.environ, "PYTHONPATH": str(work / "mutants" / "src")}
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
        f"also_copy = {json.dumps(list(ALSO_COPY))}",
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


def report(result: ModuleResult, equivalent: dict[str, str]) -> None:
    score = "n/a" if result.score is None else f"{result.score:.1%}"
    print(f"--- {result.module}: score {score} of {result.considered} non-equivalent mutants, "
          f"{result.counts}, {result.seconds:.0f} s")  # fmt: skip
    if result.error:
        print(f"    error: {result.error}")
    for name, diff in result.survivors.items():
        if name in result.equivalent:
            print(f"\nequivalent: {name} ({equivalent[name]})")
        else:
            print(f"\nsurvived: {name}\n{diff}")
    prefix = f"vla_client.{result.module.replace('/', '.')}."
    stale = [n for n in equivalent if n.startswith(prefix) and n not in result.survivors]
    for name in stale:
        print(f"\nlisted as equivalent but not a survivor now (check docs/testing.md): {name}")


def tail(text: str, lines: int = 15) -> str:
    return "\n".join(text.strip().splitlines()[-lines:])


if __name__ == "__main__":
    sys.exit(main())
