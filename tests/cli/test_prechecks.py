"""Output paths and optional libraries are checked before any work: nothing reaches the server.

Each case would have run its requests first and failed only at the end before these checks.
"""

from __future__ import annotations

import sys

import pytest

SMALL = ("--height", "32", "--width", "32")
BENCH = ("--encodings", "raw", "--wires", "msgpack", "--repeat", "2", "--warmup", "0",
         "--cameras", "1", *SMALL)  # fmt: skip


def test_send_save_actions_in_a_missing_folder(cli, counting_server, error_line):
    run = cli(
        "send", counting_server.url, "--save-actions", "/nonexistent/dir/a.npz",
        "--repeat", "100", "--encoding", "pixels", *SMALL,
    )  # fmt: skip
    assert run.code == 1
    assert error_line(run.err) == (
        "vla-client: error: --save-actions /nonexistent/dir/a.npz: "
        "the folder /nonexistent/dir does not exist"
    )
    assert counting_server.requests == 0


def test_send_save_actions_onto_a_folder(cli, counting_server, error_line, tmp_path):
    folder = tmp_path / "a.npz"
    folder.mkdir()
    run = cli("send", counting_server.url, "--save-actions", str(folder), *SMALL)
    assert run.code == 1
    assert "that is a folder, not a file" in error_line(run.err)
    assert counting_server.requests == 0


@pytest.mark.parametrize("option", ["--save", "--plot"])
def test_bench_outputs_in_a_missing_folder(cli, counting_server, error_line, tmp_path, option):
    path = tmp_path / "missing" / ("report.json" if option == "--save" else "plot.png")
    run = cli("bench", counting_server.url, *BENCH, option, str(path))
    assert run.code == 1
    assert error_line(run.err).endswith(f"the folder {path.parent} does not exist")
    assert counting_server.requests == 0


def test_bench_plot_without_matplotlib(cli, counting_server, error_line, tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # what an uninstalled package reads as
    run = cli("bench", counting_server.url, *BENCH, "--plot", str(tmp_path / "plot.png"))
    assert run.code == 1
    assert error_line(run.err) == (
        "vla-client: error: --plot needs matplotlib, which is not installed: "
        "pip install matplotlib (or 'vla-client[notebooks]')"
    )
    assert counting_server.requests == 0
    assert not (tmp_path / "plot.png").exists()


def test_websockets_missing(cli, counting_server, error_line, monkeypatch):
    monkeypatch.setitem(sys.modules, "websockets", None)
    ws_url = counting_server.url.replace("http://", "ws://")
    for args in (
        ("send", ws_url + "/v1/actions/realtime", *SMALL),
        ("metadata", ws_url + "/v1/actions/realtime"),
        ("bench", counting_server.url, *BENCH, "--transports", "http,ws"),
    ):
        run = cli(*args)
        assert run.code == 1
        line = error_line(run.err)
        assert "needs websockets, which is not installed: pip install 'vla-client[websocket]'" in (
            line
        )
    assert counting_server.requests == 0


def test_cameras_grid_is_checked_before_the_cameras_open(cli, error_line, tmp_path):
    grid = tmp_path / "missing" / "grid.png"
    run = cli("cameras", "--camera", "wrist=/dev/video99", "--grid", str(grid))
    assert run.code == 1
    assert error_line(run.err).startswith(f"vla-client: error: --grid {grid}: the folder")


def test_cameras_grid_extension_is_a_usage_error(cli, usage_error):
    assert "--grid: the file must end in .png" in usage_error(cli("cameras", "--grid", "g.gif"))
