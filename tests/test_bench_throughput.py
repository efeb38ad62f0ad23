"""``benchmarks/bench_throughput.py``: the smoke run drives real servers and prints its tables,
docs/server.md's block is the saved report rendered, and the prediction is the stated arithmetic.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
import bench_throughput  # noqa: E402
from forward_cost_policy import ForwardCostPolicy  # noqa: E402

from vla_client.cameras.scene import synthetic_frames  # noqa: E402
from vla_client.server import PolicyInput  # noqa: E402
from vla_client.server.policies.reference import reference_actions  # noqa: E402

SAVED = ROOT / "benchmarks" / "results-throughput.json"


@pytest.mark.timeout(240)
def test_quick_run_serves_every_server_and_prints_the_tables(tmp_path: Path) -> None:
    saved = tmp_path / "throughput.json"
    done = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "bench_throughput.py"), "--quick",
         "--save", str(saved)],
        capture_output=True, text=True, timeout=230, check=False,
        env={**os.environ, "PYTHONPATH": str(ROOT / "src")},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    assert "load average" in done.stdout and "CPUs" in done.stdout
    assert "| 2 |" in done.stdout, done.stdout
    assert "Prediction, not measured" in done.stdout
    report = json.loads(saved.read_text())
    assert report["format"] == bench_throughput.FORMAT
    servers = [row[side] for row in report["scaling"] for side in ("server", "bare")]
    servers += report["batching"]
    batching = [(row["api_servers"], row["max_batch"]) for row in report["batching"]]
    assert batching == list(bench_throughput.BATCHING)
    for server in servers:  # every server answered the robots, and its CPU was read
        assert server["requests"] > 0 and server["server_cpu_ms"] > 0, server
        assert 0 < server["machine_busy"] <= 1 and server["client_cores"] > 0
    for line in bench_throughput.render_measured(report):
        assert line in done.stdout


def test_the_docs_block_is_the_saved_report_rendered(tmp_path: Path) -> None:
    page = tmp_path / "server.md"
    page.write_text((ROOT / "docs" / "server.md").read_text())
    bench_throughput.write_docs(json.loads(SAVED.read_text()), page)
    assert page.read_text() == (ROOT / "docs" / "server.md").read_text(), (
        "docs/server.md's throughput block differs from benchmarks/results-throughput.json: "
        "run `python benchmarks/bench_throughput.py --write-docs`"
    )


def test_write_docs_refuses_a_page_without_the_block(tmp_path: Path) -> None:
    page = tmp_path / "server.md"
    page.write_text("# no block here\n")
    with pytest.raises(ValueError, match="no generated throughput block"):
        bench_throughput.write_docs(json.loads(SAVED.read_text()), page)
    with pytest.raises(ValueError, match=r"not a bench_throughput\.py report"):
        bench_throughput.render_measured({"format": "something else"})


def test_the_prediction_is_the_assumptions_applied_to_the_measured_costs() -> None:
    report = json.loads(SAVED.read_text())
    row = report["scaling"][-1]["server"]
    got = bench_throughput.predict(report)
    a = bench_throughput.PREDICTION
    demand = a["robots"] * a["rate_hz"]
    entry_ms = row["server_cpu_ms"] - row["worker_cpu_ms"]
    assert got["demand"] == demand
    assert got["entrypoints"] == math.ceil(demand * entry_ms / (1000 * a["busy"]))
    assert got["cores"] == pytest.approx(demand * row["server_cpu_ms"] / 1000)
    assert got["gpus_batched"] == math.ceil(demand * a["gpu_forward_ms"] / 1000 / a["gpu_batch"])
    text = "\n".join(bench_throughput.render_prediction(report))
    assert f"| `--api-servers` for {demand:.0f} requests/s | {got['entrypoints']} |" in text
    rows = [line for line in text.splitlines() if line.startswith("| ") and "---" not in line]
    assert all(line.endswith("| measured |") or "| predicted: " in line for line in rows[1:])


def test_forward_cost_policy_answers_the_reference_chunks_and_checks_its_option() -> None:
    policy = ForwardCostPolicy(forward_ms=1)
    observations = [
        PolicyInput(images=synthetic_frames(2, 24, 32, t=seed), task=f"t{seed}")
        for seed in range(3)
    ]
    chunks = policy.infer_batch(observations)
    for chunk, observation in zip(chunks, observations, strict=True):
        want = reference_actions(observation, horizon=16, action_dim=7)
        np.testing.assert_array_equal(chunk, want)
    for bad in (0, -5, math.nan, math.inf, 20_000, "50"):
        with pytest.raises(ValueError, match="forward_ms"):
            ForwardCostPolicy(forward_ms=bad)  # type: ignore[arg-type]
