"""``vla-client bench``: the matrix against a real server, the ranking, the report and the plot."""

from __future__ import annotations

import json
import runpy
import sys
from pathlib import Path

import pytest

from vla_client.cli.bench import log_ticks

ROOT = Path(__file__).resolve().parents[2]


def test_matrix_report_plot_and_docs_table(cli, server_url, tmp_path, monkeypatch):
    pytest.importorskip("matplotlib")
    report_path, plot_path = tmp_path / "bench.json", tmp_path / "bench.png"
    run = cli(
        "bench", server_url, "--encodings", "png,jpeg,raw", "--wires", "json,msgpack",
        "--transports", "http", "--repeat", "2", "--warmup", "0", "--cameras", "2",
        "--height", "48", "--width", "64", "--save", str(report_path), "--plot", str(plot_path),
    )  # fmt: skip
    assert run.code == 0, run.err
    report = json.loads(report_path.read_text())
    assert report["format"] == "vla-client.bench"
    paths = [row["path"] for row in report["results"]]
    assert sorted(paths) == sorted(
        f"{e}/{w}/http" for e in ("png", "jpeg", "raw") for w in ("json", "msgpack")
    )
    medians = [row["stages"]["total_ms"]["p50"] for row in report["results"]]
    assert medians == sorted(medians)
    sizes = {row["path"]: row["bytes_sent"] for row in report["results"]}
    assert sizes["jpeg/msgpack/http"] < sizes["raw/msgpack/http"] < sizes["raw/json/http"]
    assert all(len(row["totals_ms"]) == 2 for row in report["results"])
    assert plot_path.read_bytes().startswith(b"\x89PNG")
    ranked_lines = [line for line in run.out.splitlines() if "/http" in line]
    assert [line.split()[0] for line in ranked_lines] == paths

    table_path = tmp_path / "table.md"
    monkeypatch.setattr(sys, "argv", ["render", str(report_path), str(table_path)])
    runpy.run_path(str(ROOT / "benchmarks" / "render_encoding_table.py"), run_name="__main__")
    rows = [
        line
        for line in table_path.read_text().splitlines()
        if line.startswith("| ") and "`" in line
    ]
    assert len(rows) == 6
    assert rows[0].startswith(f"| `{paths[0].split('/')[0]}` ") and "http" in rows[0]


def test_default_starts_a_local_reference_server(cli):
    run = cli(
        "bench", "--encodings", "raw", "--wires", "msgpack", "--transports", "http",
        "--repeat", "1", "--warmup", "0", "--cameras", "1", "--height", "32", "--width", "32",
    )  # fmt: skip
    assert run.code == 0, run.err
    assert "raw/msgpack/http" in run.out and "#1" in run.out


@pytest.mark.parametrize(
    ("args", "reason"),
    [
        (("--encodings", "png,webp"), "--encodings: takes a comma-separated subset"),
        (("--wires", ""), "--wires"),
        (("--transports", "carrier-pigeon"), "--transports"),
        (("--repeat", "0"), "--repeat: must be at least 1"),
        (("--warmup", "-1"), "--warmup: must be 0 or more"),
        (("--timeout", "0"), "--timeout: must be a number of seconds above 0"),
        (("--save", "report.txt"), "--save: the file must end in .json"),
        (("--plot", "plot.gif"), "--plot: the file must end in .png or .svg or .pdf"),
    ],
)
def test_bad_options_are_usage_errors(cli, counting_server, usage_error, args, reason):
    line = usage_error(cli("bench", counting_server.url, *args))
    assert reason in line
    assert counting_server.requests == 0


@pytest.mark.parametrize(
    ("low", "high", "labels"),
    [
        (6.2, 65.0, [10, 20, 50]),  # the span one tick at 10 once labelled alone
        (3.0, 4000.0, [10, 100, 1000]),
        (0.3, 2.8, [0.5, 1, 2]),
        (12.0, 18.0, [12, 18]),  # no round number inside: the ends
        (21.0, 95.0, [30, 40, 50, 60, 70, 80, 90]),
    ],
)
def test_log_axis_labels_cover_the_span(low, high, labels):
    assert log_ticks(low, high) == pytest.approx(labels)
