"""``vla-client view FILE --rerun OUT.rrd``: a server's and a loop's recordings as Rerun files,
read back with Rerun's reader."""

from __future__ import annotations

import numpy as np
import pytest

from rrd import read_rrd
from vla_client.cameras.scene import synthetic_frames
from vla_client.observation import Observation
from vla_client.recording import ObservationWriter, ServedRequest

pytest.importorskip("rerun")

TIMES = [1000.0, 1000.1, 1000.2, 1000.35]


def test_a_server_recording_becomes_frames_state_plans_and_server_latency(cli, tmp_path):
    recording, out = tmp_path / "served.vlaobs", tmp_path / "served.rrd"
    rng = np.random.default_rng(3)
    chunks = [rng.standard_normal((5, 3)).astype(np.float32) for _ in TIMES]
    with ObservationWriter(recording) as writer:
        for t, (wall_time, chunk) in enumerate(zip(TIMES, chunks, strict=True)):
            observation = Observation(synthetic_frames(2, 24, 32, t=t), state=[t, 0.5, 1.0])
            served = ServedRequest(chunk, timings={"preprocess_ms": 1.0 + t, "inference_ms": 2.0})
            writer.write(observation, wall_time=wall_time, served=served)
    run = cli("view", str(recording), "--rerun", str(out))
    assert run.code == 0, run.err
    assert f"wrote {out}: 4 step(s)" in run.out
    rows = read_rrd(out)
    assert len(rows["/camera/wrist"]) == len(rows["/camera/left"]) == 4
    assert [row["Scalars:scalars"][0] for row in rows["/robot/state"]] == [0, 1, 2, 3]
    assert [row["t"] for row in rows["/robot/state"]] == pytest.approx([0, 0.1, 0.2, 0.35])
    for n, chunk in enumerate(chunks):
        plan = rows[f"/plan/{n}"]
        assert [row["Scalars:scalars"] for row in plan] == chunk.astype(np.float64).tolist()
        # rows one median step (0.1 s) apart, from the step's time
        assert [row["t"] for row in plan] == pytest.approx(TIMES[n] - TIMES[0] + 0.1 * np.arange(5))
    preprocess = [row["Scalars:scalars"][0] for row in rows["/latency/server_preprocess"]]
    assert preprocess == [1.0, 2.0, 3.0, 4.0]
    assert "/robot/action" not in rows


def test_a_loop_recording_becomes_the_applied_actions(cli, tmp_path):
    recording, out = tmp_path / "loop.vlaobs", tmp_path / "loop.rrd"
    actions = [np.array([0.1 * t, -0.2, 0.3], np.float32) for t in range(len(TIMES))]
    with ObservationWriter(recording) as writer:
        for t, wall_time in enumerate(TIMES):
            observation = Observation(synthetic_frames(1, 24, 32, t=t), state=[t, 0.0])
            writer.write(observation, wall_time=wall_time, applied_action=actions[t], episode=0)
    run = cli("view", str(recording), "--rerun", str(out))
    assert run.code == 0, run.err
    rows = read_rrd(out)
    logged = [row["Scalars:scalars"] for row in rows["/robot/action"]]
    assert logged == [a.astype(np.float64).tolist() for a in actions]
    assert not any(entity.startswith("/plan/") for entity in rows)


def test_view_rerun_refuses_other_suffixes_and_non_recordings(cli, tmp_path, usage_error):
    assert "the file must end in .rrd" in usage_error(cli("view", "x.vlaobs", "--rerun", "x.png"))
    bogus = tmp_path / "bogus.vlaobs"
    bogus.write_bytes(b"not a recording")
    run = cli("view", str(bogus), "--rerun", str(tmp_path / "out.rrd"))
    assert run.code == 1 and "recording" in run.err
