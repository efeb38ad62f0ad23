"""``benchmarks/bench_floors.py``: issue 27's ratio table runs end to end, and its profile tables
read py-spy's collapsed stacks right."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
import bench_floors  # noqa: E402

RATIO_ROWS = [
    "raw/msgpack HTTP end to end",
    "(round_trip, no SDK) to server",
    "realtime websocket raw",
    "png/json end to end",
    "raw/json server decode",
    "server preprocess_ms",
    "server ipc_ms",
]


@pytest.mark.timeout(30)
def test_smallest_run_exits_0_and_prints_every_ratio_row(tmp_path: Path) -> None:
    report = tmp_path / "floors.json"
    done = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "bench_floors.py"), "-n", "1",
         "--json", str(report)],
        capture_output=True, text=True, timeout=25, check=False,
        env={**os.environ, "PYTHONPATH": str(ROOT / "src")},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "load" in done.stdout and "Python" in done.stdout
    table = done.stdout.split("floors and parts")[0]
    for row in RATIO_ROWS:
        assert row in table, done.stdout
    document = json.loads(report.read_text())
    assert [row["target"].strip() for row in document["ratios"]] == [
        "raw/msgpack HTTP end to end", "(round_trip, no SDK) to server",
        "realtime websocket raw", "realtime websocket raw", "png/json end to end",
        "png/json end to end", "raw/json server decode", "server preprocess_ms", "server ipc_ms",
    ]  # fmt: skip
    assert all(math.isfinite(row["ratio"]) and row["ratio"] > 0 for row in document["ratios"])
    assert any(name.startswith("decode png_read") for name in document["medians_ms"])


def test_profile_tables_split_processes_and_leave_out_startup_and_the_main_loop(
    tmp_path: Path,
) -> None:
    entry = 'process 10:"python bench_server.py --serve 1"'
    worker = 'process 11:"python -m vla_client.server.worker 13"'
    loop = "<module> (bench_server.py:1);Runner.run (asyncio/runners.py:118)"
    raw = tmp_path / "profile"
    raw.write_text(
        "\n".join([
            f"{entry};{loop} 50",
            f"{entry};{loop};read_body (vla_client/server/edge/limits.py:61) 30",
            f"{entry};{loop};send (uvicorn/protocols/http/h11_impl.py:490) 20",
            f"{entry};<module> (bench_server.py:2);_find_and_load (<frozen importlib>:1) 500",
            f"{entry};{worker};worker_main (vla_client/server/worker/process.py:90) 8",
            f"{entry};{worker};infer (vla_client/server/policies/reference.py:54) 2",
        ])
        + "\n"
    )  # fmt: skip
    text = "\n".join(bench_floors.py_spy_tables(raw, 6))
    entry_part, worker_part = text.split("### worker")
    assert "### entrypoint: 100 on-CPU samples" in entry_part
    assert ": 10 on-CPU samples" in worker_part
    inclusive, own, packages = entry_part.split("Top ")[1:]
    assert "Runner.run" not in inclusive and "<module>" not in inclusive  # on every stack
    assert "| 30.0% | `read_body (vla_client/server/edge/limits.py:61)` |" in inclusive
    assert "| 50.0% | `Runner.run (asyncio/runners.py:118)` |" in own
    assert "| 30.0% | `vla_client.server` |" in packages and "| 20.0% | `uvicorn` |" in packages
    assert "_find_and_load" not in text
    assert "| 80.0% | `worker_main (vla_client/server/worker/process.py:90)` |" in worker_part
