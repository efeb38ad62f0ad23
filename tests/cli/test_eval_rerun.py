"""``vla-client eval --rerun FILE.rrd``: every episode under its own prefix, on its own
(simulated) clock, read back with Rerun's reader."""

from __future__ import annotations

import json
from collections.abc import Iterator

import numpy as np
import pytest

from rrd import read_rrd
from vla_client.server import LocalServer, create_app
from vla_client.server.policies import ReachPolicy

pytest.importorskip("rerun")


@pytest.fixture(scope="module")
def reach_url() -> Iterator[str]:
    with LocalServer(create_app(ReachPolicy())) as server:
        yield server.url


def test_each_episode_is_logged_under_its_cell_and_seed(cli, reach_url, tmp_path):
    out = tmp_path / "eval.rrd"
    run = cli(
        "eval", reach_url, "--episodes", "2", "--round-trip-ms", "20", "--mode", "naive",
        "aligned", "--delay-ms", "50", "--max-steps", "15", "--json", "--rerun", str(out),
    )  # fmt: skip
    assert run.code == 0, run.err
    document = json.loads(run.out)
    rows = read_rrd(out)
    for cell in document["cells"]:
        for episode in cell["episodes"]:
            prefix = f"/{cell['mode']}-50ms-seed{episode['seed']}"
            ticks = rows[f"{prefix}/robot/state"]
            assert len(ticks) == episode["steps"] == 15
            # the simulated clock: a tick every 0.1 s exactly, from 0 in each episode
            assert [row["t"] for row in ticks] == pytest.approx(0.1 * np.arange(15), abs=1e-6)
            assert len(rows[f"{prefix}/robot/action"]) == 15 - episode["starved_ticks"]
            assert len(rows[f"{prefix}/camera/top"]) == episode["requests"]
            plans = [e for e in rows if e.startswith(f"{prefix}/plan/")]
            assert episode["chunks"] <= len(plans) <= episode["requests"]
