"""Every notebook in examples/notebooks runs top to bottom (each starts its own local server),
and pointed at a server that is down stops at its first call with one line, not a traceback."""

from __future__ import annotations

import os
import re
import socket
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((ROOT / "examples" / "notebooks").glob("*.ipynb"))
ANSI = re.compile(r"\x1b\[[0-9;]*m")


def test_there_are_notebooks():
    stems = {path.stem for path in NOTEBOOKS}
    assert stems >= {"quickstart", "encoding_tradeoffs", "control_loop", "own_policy"}


def _execute(
    path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> tuple[list[Any], Exception | None]:
    """Run the notebook at `path` in a fresh kernel: every code cell's outputs, and the
    `CellExecutionError` that stopped it (None when every cell ran)."""
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    pytest.importorskip("ipykernel")
    pytest.importorskip("matplotlib")
    # the kernel imports this checkout's vla_client, whatever the current directory
    monkeypatch.setenv(
        "PYTHONPATH",
        os.pathsep.join(filter(None, [str(ROOT / "src"), os.environ.get("PYTHONPATH")])),
    )
    notebook = nbformat.read(path, as_version=4)
    client = nbclient.NotebookClient(
        notebook,
        timeout=120,
        kernel_name="python3",
        resources={"metadata": {"path": str(tmp_path)}},
    )
    error = None
    try:
        client.execute()
    except nbclient.exceptions.CellExecutionError as exc:
        error = exc
    outputs = [
        output for cell in notebook.cells if cell.cell_type == "code" for output in cell.outputs
    ]
    return outputs, error


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda path: path.stem)
def test_notebook_executes(path, tmp_path, monkeypatch):
    monkeypatch.delenv("VLA_CLIENT_URL", raising=False)
    outputs, error = _execute(path, tmp_path, monkeypatch)
    assert error is None, error
    assert not [o for o in outputs if o.get("output_type") == "error"]
    assert any("image/png" in o.get("data", {}) for o in outputs)  # the plots were drawn


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda path: path.stem)
def test_a_server_that_is_down_is_one_line(path, tmp_path, monkeypatch):
    with socket.socket() as sock:  # a loopback port where nothing listens
        sock.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{sock.getsockname()[1]}"
    monkeypatch.setenv("VLA_CLIENT_URL", url)
    outputs, error = _execute(path, tmp_path, monkeypatch)
    assert error is not None  # the notebook stopped at the call that found no server
    (shown,) = [o for o in outputs if o.get("output_type") == "error"]
    lines = [line for line in ANSI.sub("", "".join(shown["traceback"])).splitlines() if line]
    assert len(lines) == 1, lines
    assert lines[0].startswith("ConnectError: cannot reach the server")


def test_each_notebook_says_how_to_run_it_and_the_headless_command_runs(tmp_path):
    """The first cell of every notebook gives the commands to run it; the headless one,
    ``jupyter execute``, runs the quickstart top to bottom here."""
    import json
    import subprocess
    import sys

    pytest.importorskip("nbclient")
    pytest.importorskip("ipykernel")
    pytest.importorskip("matplotlib")
    for path in NOTEBOOKS:
        first = "".join(json.loads(path.read_text())["cells"][0]["source"])
        assert f"`jupyter execute examples/notebooks/{path.name}`" in first, path.name
        assert '`pip install -e ".[server,notebooks]"`' in first, path.name
    jupyter = Path(sys.executable).with_name("jupyter")
    completed = subprocess.run(
        [str(jupyter), "execute", "examples/notebooks/quickstart.ipynb"],
        cwd=ROOT, capture_output=True, text=True, timeout=300, check=False,
        env={**os.environ, "PYTHONPATH": str(ROOT / "src"), "MPLBACKEND": "Agg"},
    )  # fmt: skip
    assert completed.returncode == 0, completed.stderr[-2000:]
