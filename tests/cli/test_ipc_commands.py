"""``vla-client bench`` and ``eval`` take an ``ipc://PATH`` URL (send and metadata run as
written in docs/server.md, 'Same host: ipc://')."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from vla_client.server import LocalServer, ReferencePolicy, ServerConfig, create_app


@pytest.fixture(scope="module")
def ipc_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A reference server in its worker layout whose actions suit the reach task, on a socket."""
    path = tmp_path_factory.mktemp("ipc") / "s.sock"
    config = ServerConfig(port=0, ipc_path=str(path))
    with LocalServer(create_app(ReferencePolicy(action_dim=2), config)):
        yield f"ipc://{path}"


def test_bench_measures_the_one_ipc_path(cli, ipc_url):
    run = cli("bench", ipc_url, "--repeat", "2")
    assert run.code == 0, run.err
    rows = [line.split() for line in run.out.splitlines() if line.startswith("raw/")]
    assert [row[0] for row in rows] == ["raw/msgpack/ipc"]
    assert "failed" not in run.out


def test_eval_runs_its_episodes_over_ipc(cli, ipc_url):
    run = cli("eval", ipc_url, "--episodes", "1", "--max-steps", "20")
    assert run.code == 0, run.err
    assert "episode" in run.out.lower()
