"""``vla-client eval --mode rtc``: the CI smoke run, the seam metric, the refusal of a server
without RTC, and the trained flow policy's own checks (it solves the task; its training script
reproduces the shipped weights)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

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


def test_eval_mode_rtc_against_the_reference_server_names_the_policy_that_does_it(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """``vla-client serve`` (its default policy) and then ``eval URL --mode rtc``: the refusal
    says which of the reference server's policies does real-time chunking."""
    from vla_client.server import ReferencePolicy

    with LocalServer(create_app(ReferencePolicy())) as server:
        assert main(["eval", server.url, "--mode", "rtc", "--episodes", "1"]) == 2
    error = capsys.readouterr().err.strip().splitlines()[-1]
    assert error.endswith(
        "it supports modes naive aligned blended; vla-client's server does it with a policy that "
        "announces it: vla-client serve --policy reach-flow, the reach task's flow policy (see "
        "'vla-client eval --help')"
    )


def test_the_flow_policy_succeeds_at_zero_delay(capsys: pytest.CaptureFixture[str]) -> None:
    with LocalServer(create_app(ReachFlowPolicy())) as server:
        code = main(["eval", server.url, "--mode", "aligned", "--episodes", "4", "--json"])
    document = json.loads(capsys.readouterr().out)
    assert code == 0
    assert document["cells"][0]["success_rate"] == 1.0


@pytest.mark.timeout(1200)  # about 20 s on an idle CPU; minutes on a shared one
def test_the_training_script_reproduces_the_shipped_weights(tmp_path: Path) -> None:
    """Run as docs/evaluation.md says, from the checkout's tools/."""
    script = Path(__file__).resolve().parents[2] / "tools" / "train_reach_flow.py"
    out = tmp_path / "weights.npz"
    command = [sys.executable, str(script), "--out", str(out)]
    trained_run = subprocess.run(command, capture_output=True, text=True, timeout=1200)
    assert trained_run.returncode == 0, trained_run.stderr
    with np.load(out) as trained, np.load(WEIGHTS) as shipped:
        assert trained.files == shipped.files
        for name in shipped.files:
            np.testing.assert_allclose(trained[name], shipped[name], rtol=0, atol=1e-4)


def gr00t_reach_server(rtc: bool) -> Any:
    """A GR00T-protocol server shaped for the reach task: its two cameras, its one-value state
    (the episode's clock) and a 2-value action; `rtc` applies N1.7's rule (gr00t_server.py)."""
    pytest.importorskip("zmq")
    from gr00t_server import Gr00tServer

    return Gr00tServer(
        video_keys=("top", "wrist"), state_keys=("clock",), action_dims={"xy": 2}, horizon=8,
        rtc=rtc,
    )  # fmt: skip


GR00T_EVAL = ["--episodes", "1", "--max-steps", "20", "--state-split", "clock=1", "--json"]


def test_eval_mode_rtc_runs_against_gr00t_on_the_users_word(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """GR00T announces nothing: with ``--declare-rtc`` the requests after the first carry
    N1.7's options and the previous chunk, and the episode runs."""
    from gr00t_server import from_bytes

    with gr00t_reach_server(rtc=True) as server:
        code = main(["eval", server.url, "--mode", "rtc", "--declare-rtc", *GR00T_EVAL])
    document = json.loads(capsys.readouterr().out)
    assert code == 0
    assert [cell["mode"] for cell in document["cells"]] == ["rtc"]
    assert document["cells"][0]["episodes"][0]["error"] is None
    requests = [from_bytes(frame) for frame in server.frames]
    actions = [request["data"] for request in requests if request["endpoint"] == "get_action"]
    guided = [call for call in actions if "action" in call["observation"]]
    assert guided, "no request carried the previous chunk"
    for call in guided:
        assert {"rtc_overlap_steps", "rtc_frozen_steps", "rtc_ramp_rate"} <= set(call["options"])
        assert call["observation"]["action"]["xy"].shape == (1, 8, 2)


def test_eval_mode_rtc_against_gr00t_without_the_declaration_names_it(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with gr00t_reach_server(rtc=True) as server:
        code = main(["eval", server.url, "--mode", "rtc", *GR00T_EVAL])
    error = capsys.readouterr().err.strip().splitlines()[-1]
    assert code == 2
    assert "announces no real-time chunking" in error and "--declare-rtc" in error


def test_declare_rtc_is_refused_for_a_server_that_is_not_gr00ts(
    reach_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(["eval", reach_url, "--mode", "rtc", "--declare-rtc", "--episodes", "1"])
    error = capsys.readouterr().err.strip().splitlines()[-1]
    assert code == 2
    assert f"--declare-rtc: the server at {reach_url} is not GR00T's" in error
    assert "policy_family 'reach'" in error and "leave --declare-rtc out" in error


def test_declare_rtc_without_mode_rtc_is_a_usage_error(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["eval", "--mode", "aligned", "--declare-rtc", "--episodes", "1"]) == 2
    error = capsys.readouterr().err.strip().splitlines()[-1]
    assert "--declare-rtc is for --mode rtc" in error
