"""vla_client.control works with any transport: it imports only the result and observation types."""

from __future__ import annotations

import ast
import pathlib
import subprocess
import sys

import vla_client.control

ALLOWED = {
    "vla_client.client.result",
    "vla_client.errors",
    "vla_client.observation",
    "vla_client.protocol",  # types only, for SafetyGate.from_metadata
    "vla_client.validation",  # option checks; imports nothing
}


def imported_modules(path: pathlib.Path) -> set[str]:
    tree = ast.parse(path.read_text())
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
        elif isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
    return names


def test_control_imports_no_transport_or_server():
    package = pathlib.Path(vla_client.control.__file__).parent
    for path in package.glob("*.py"):
        ours = {m for m in imported_modules(path) if m.startswith("vla_client")}
        outside = {m for m in ours if not m.startswith("vla_client.control")}
        assert outside <= ALLOWED, f"{path.name} imports {outside - ALLOWED}"


def test_importing_control_does_not_load_the_server():
    code = "import sys, vla_client.control; print('vla_client.server' in sys.modules)"
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    )
    assert result.stdout.strip() == "False"
