"""Rerun from a robot without a screen (issue 45 item 8): ``--rerun`` alone there is refused
naming the way that works, streaming to a viewer on another machine with ``--rerun
rerun+http://HOST:9876/proxy``; ``--help`` and docs/rerun.md name it too, and the command
streams as they say."""

from __future__ import annotations

import signal
import sys
import time
from pathlib import Path

import pytest

from rrd import free_port, read_rrd, saving_viewer, signal_viewer

pytest.importorskip("rerun")
from vla_client.viz import rerun_log

ROOT = Path(__file__).resolve().parents[2]
STREAM = "--rerun rerun+http://HOST:9876/proxy"
SEND = ("--cameras", "1", "--height", "16", "--width", "16")


def test_no_display_names_streaming_to_a_viewer_elsewhere(cli, error_line, server_url, monkeypatch):
    monkeypatch.setattr(rerun_log, "VIEWER_PORT", free_port())  # no viewer listening
    monkeypatch.setattr(sys, "platform", "linux")
    monkeypatch.delenv("DISPLAY", raising=False)
    monkeypatch.delenv("WAYLAND_DISPLAY", raising=False)
    run = cli("send", server_url, *SEND, "--rerun")
    assert run.code == 1
    line = error_line(run.err)
    assert line.startswith("vla-client: error: no display to show a Rerun viewer on"), line
    assert line.endswith(
        "or stream to a viewer on a machine with a screen: run 'rerun' there and give "
        f"{STREAM} (HOST: that machine's address)"
    ), line


@pytest.mark.parametrize("command", ["send", "eval"])
def test_help_names_streaming(cli, command) -> None:
    run = cli(command, "--help")
    assert run.code == 0
    assert "--rerun rerun+http://HOST:9876/proxy" in " ".join(run.out.split())


def test_the_rerun_page_names_streaming() -> None:
    page = (ROOT / "docs" / "rerun.md").read_text()
    assert "### From a robot without a screen" in page
    assert "--rerun rerun+http://laptop.local:9876/proxy" in page


def test_send_streams_to_a_viewer_at_a_rerun_url(cli, server_url, tmp_path) -> None:
    """What the hint says works: the viewer (a real Rerun process, saving what it receives)
    gets the run."""
    port, received = free_port(), tmp_path / "received.rrd"
    with saving_viewer(port, received) as viewer:
        run = cli("send", server_url, *SEND, "--repeat", "3", "--rerun",
                  f"rerun+http://127.0.0.1:{port}/proxy")  # fmt: skip
        assert run.code == 0, run.err
        time.sleep(1)  # the viewer writes what it was sent
        signal_viewer(viewer, signal.SIGINT)
    rows = read_rrd(received, timeline="send_time") or read_rrd(received)
    assert rows, "the viewer received nothing"
