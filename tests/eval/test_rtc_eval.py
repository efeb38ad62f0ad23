"""``vla-client eval --mode rtc``: the CI smoke run, the seam metric, the refusal of a server
without RTC, and the trained flow policy's own checks (it solves the task; its training script
reproduces the shipped weights)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from vla_client.cli import main
from vla_client.control.chunk import ActionSource
from vla_client.server import LocalServer, create_app
from vla_client.server.policies.reach_flow import WEIGHTS, ReachFlowPolicy
from vla_client.sim.seams import SeamMeter, Seams


def test_seams_are_jumps_at_switches_over_steps_within_chunks() -> None:
    meter = SeamMeter()
    trail = [
        ([0.0, 0.0], "a"), ([1.0, 0.0], "a"), ([2.0, 0.0], "a"),  # two steps of 1
        ([6.0, 3.0], "b"),  # a seam of 5
        ([7.0, 3.0], "b"),  # a step of 1
        (None, None),  # no action: nothing measured across it
        ([0.0, 0.0], "c"),
    ]  # fmt: skip
    for action, request in trail:
        source = None if request is None else ActionSource(request, 0)
        meter.add(None if action is None else np.array(action), source)
    seams = meter.seams
    assert (seams.seams, seams.steps) == (1, 3)
    assert seams.mean_jump == 5.0 and seams.mean_step == 1.0 and seams.ratio == 5.0
    pooled = Seams.pooled([seams, Seams(1, 1.0, 1, 1.0)])
    assert pooled.ratio == pytest.approx(3.0 / 1.0)
    assert np.isnan(Seams().ratio)


def test_eval_mode_rtc_runs_against_the_built_in_flow_policy(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The CI smoke run: no URL, so the flow policy serves, and every mode reports its seams."""
    code = main([
        "eval", "--mode", "aligned", "rtc", "--delay-ms", "100", "--episodes", "1",
        "--max-steps", "40", "--json",
    ])  # fmt: skip
    document = json.loads(capsys.readouterr().out)
    assert code == 0
    cells = {cell["mode"]: cell for cell in document["cells"]}
    assert set(cells) == {"aligned", "rtc"}
    for cell in cells.values():
        assert cell["seams"]["seams"] >= 1 and cell["seams"]["ratio"] > 0
        assert all(episode["error"] is None for episode in cell["episodes"])


def test_eval_mode_rtc_refuses_a_server_without_it(
    reach_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["eval", reach_url, "--mode", "rtc", "--episodes", "1"]) == 2
    error = capsys.readouterr().err.strip().splitlines()[-1]
    assert "--mode rtc" in error and "announces no real-time chunking" in error
    assert "supports modes naive aligned blended" in error


def test_the_flow_policy_succeeds_at_zero_delay(capsys: pytest.CaptureFixture[str]) -> None:
    with LocalServer(create_app(ReachFlowPolicy())) as server:
        code = main(["eval", server.url, "--mode", "aligned", "--episodes", "4", "--json"])
    document = json.loads(capsys.readouterr().out)
    assert code == 0
    assert document["cells"][0]["success_rate"] == 1.0


@pytest.mark.timeout(1200)  # about 20 s on an idle CPU; minutes on a shared one
def test_the_training_script_reproduces_the_shipped_weights(tmp_path: Path) -> None:
    from vla_client.server.policies.reach_flow_train import main as train

    out = tmp_path / "weights.npz"
    assert train(["--out", str(out)]) == 0
    with np.load(out) as trained, np.load(WEIGHTS) as shipped:
        assert trained.files == shipped.files
        for name in shipped.files:
            np.testing.assert_allclose(trained[name], shipped[name], rtol=0, atol=1e-4)
