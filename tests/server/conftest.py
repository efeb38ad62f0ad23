"""Fixtures of the server tests: a policy plugin, installed the way a package installs one, and
a temporary folder of the test's own for the servers it starts."""

from __future__ import annotations

import shutil
import sys
import tempfile
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest


@pytest.fixture
def plugin(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """An installed distribution adding two policies, one of them broken, via entry points:
    on this process's ``sys.path``, and in the folder yielded for a subprocess's PYTHONPATH."""
    package = tmp_path / "acme_policies"
    package.mkdir()
    (package / "__init__.py").write_text(
        textwrap.dedent(
            '''
            from my_policies import Constant

            def make(value: float = 0.875) -> Constant:
                """Acme's arm policy."""
                return Constant(horizon=5, value=value)
            '''
        )
    )
    info = tmp_path / "acme_policies-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: acme-policies\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text(
        "[vla_client.policies]\nacme = acme_policies:make\nbroken = acme_policies.nope:make\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    yield tmp_path
    sys.modules.pop("acme_policies", None)


@pytest.fixture
def runtime_dir() -> Iterator[Path]:
    """A temporary folder of the test's own for the servers it starts (`start_serve`'s
    ``runtime_dir``): `serve` keeps its private folder there and, when it starts, removes
    the ones dead servers left there, so no other server on the machine, of this run or
    another, touches what the test looks at. Made directly under the system's temporary
    folder, not pytest's `tmp_path`: the worker's Unix socket lives in it, and a socket's
    path is limited to about 100 bytes."""
    folder = Path(tempfile.mkdtemp(prefix="vlat-"))
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)
