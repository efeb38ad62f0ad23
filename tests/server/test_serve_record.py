"""``vla-client serve --record DIR``: what the server received and answered, on disk, readable
by ``vla-client view`` and replayable by ``vla-client send --obs``."""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

import cv2
import numpy as np
import pytest
from serve_process import start_serve

from vla_client import ActionClient, Observation, encode_request
from vla_client.recording import load_action_chunks, load_observations
from vla_client.server import LocalServer, ReferencePolicy, ServerConfig, create_app, decode_request
from vla_client.server.config import RecordSettings
from vla_client.server.engine.pipeline import Pipeline

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
import load_test


def _observations() -> list[Observation]:
    rng = np.random.default_rng(9)
    return [
        Observation(
            {
                "wrist": rng.integers(0, 256, (24, 32, 3), np.uint8),
                "top": rng.integers(0, 256, (24, 32, 3), np.uint8),
            },
            state=np.linspace(-1, 1, 4) * step,
            task=f"step {step}",
        )
        for step in range(3)
    ]


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "vla_client.cli", *args],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip


def test_serve_record_round_trip_through_view_and_send(tmp_path: Path) -> None:
    folder = tmp_path / "records"
    port = load_test.free_port()
    server = start_serve(port, "--record", str(folder), "--record-max-mb", "64")
    sent = _observations()
    try:
        # raw msgpack frames are read straight into shared memory, reused by the next request
        with ActionClient(f"http://127.0.0.1:{port}", encoding="raw", wire="msgpack") as client:
            answers = [client.infer(observation).actions for observation in sent]
    finally:
        server.send_signal(signal.SIGTERM)  # a clean stop writes what is queued
        server.wait(30)
    (recording,) = sorted(folder.glob("*.vlaobs"))
    assert f"-{server.pid}-" in recording.name  # the entrypoint records, named by its pid
    steps = load_observations(recording)
    assert len(steps) == len(sent)
    for step, observation, actions in zip(steps, sent, answers, strict=True):
        assert step.observation.task == observation.task
        for name, frame in observation.images.items():
            np.testing.assert_array_equal(step.observation.images[name], frame)
        np.testing.assert_allclose(step.observation.state, observation.state, rtol=1e-6)
        assert step.served is not None
        np.testing.assert_array_equal(step.served.actions, actions)
        assert step.served.timings["inference_ms"] > 0 and "total_ms" in step.served.timings

    sheet = tmp_path / "sheet.png"
    viewed = _cli("view", str(recording), "--out", str(sheet))
    assert viewed.returncode == 0, viewed.stderr
    image = cv2.imread(str(sheet))
    assert image is not None and image.shape[0] > 0 and image.shape[1] > 0

    replayed = tmp_path / "replayed.npz"
    with LocalServer(create_app(ReferencePolicy(), ServerConfig(in_process=True))) as again:
        done = _cli("send", again.url, "--obs", str(recording), "--save-actions", str(replayed))
    assert done.returncode == 0, done.stderr
    np.testing.assert_allclose(load_action_chunks(replayed), np.stack(answers), rtol=1e-6)


def test_every_entrypoint_records_its_own_requests(tmp_path: Path) -> None:
    folder = tmp_path / "records"
    port = load_test.free_port()
    umask = os.umask(0o022)  # the usual one: without a mode of their own, files would be 0644
    try:
        server = start_serve(port, "--api-servers", "2", "--record", str(folder))
    finally:
        os.umask(umask)
    sent = _observations() * 4
    try:
        for observation in sent:  # a connection each, so both entrypoints get some
            with ActionClient(f"http://127.0.0.1:{port}", encoding="png") as client:
                client.infer(observation)
    finally:
        server.send_signal(signal.SIGTERM)
        server.wait(30)
    recordings = sorted(folder.glob("*.vlaobs"))
    assert recordings and not [r for r in recordings if f"-{server.pid}-" in r.name]
    assert oct(folder.stat().st_mode & 0o777) == oct(0o700)  # private: camera frames
    assert {oct(r.stat().st_mode & 0o777) for r in recordings} == {oct(0o600)}
    assert sum(len(load_observations(r)) for r in recordings) == len(sent)


def test_a_folder_that_cannot_be_written_stops_recording_not_serving(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    config = ServerConfig(in_process=True, record=RecordSettings(str(blocker / "records")))
    observation = _observations()[0]
    server = LocalServer(create_app(ReferencePolicy(), config))
    with caplog.at_level(logging.WARNING), server, ActionClient(server.url) as client:
        results = [client.infer(observation) for _ in range(3)]
    assert all(result.actions.shape == (16, 7) for result in results)
    stopped = [r for r in caplog.records if "stopped" in r.getMessage()]
    assert len(stopped) == 1 and "requests are still served" in stopped[0].getMessage()


def test_the_recorder_is_handed_copies_of_what_may_be_reused() -> None:
    """Frames and state may view a shared-memory slot that the next request overwrites while
    the recorder's thread has not written them yet: the recorder must get copies."""
    kept: list[tuple[dict[str, np.ndarray], np.ndarray | None, np.ndarray, Any]] = []

    class Keeper:  # stands in for RequestRecorder, keeping what it is handed
        def record(self, frames: Any, state: Any, task: str, parameters: Any, actions: Any,
                   timings: Any, *, request_id: str | None = None, depth: Any = None,
                   ) -> None:  # fmt: skip
            kept.append((frames, state, actions, depth))

    slot = np.full((2, 8, 8, 3), 200, np.uint8)  # two camera frames living in one buffer
    depth_slot = np.full((8, 8), 1200, np.uint16)  # and a depth frame in it too
    decoded = decode_request(*encode_request(Observation({"a": slot[0], "b": slot[1]})))
    decoded = replace(
        decoded, images={"a": slot[0], "b": slot[1]}, state=np.ones(3, np.float32),
        depth={"d": depth_slot},
    )  # fmt: skip
    actions = np.ones((2, 2), np.float32)
    Pipeline.record(Keeper(), decoded, actions, {"total_ms": 1.0})  # type: ignore[arg-type]
    slot[...] = 0
    depth_slot[...] = 0
    assert decoded.state is not None
    decoded.state[...] = 0
    actions[...] = 0
    ((frames, state, recorded_actions, depth),) = kept
    assert all(int(frame.min()) == 200 for frame in frames.values())
    assert int(depth["d"].min()) == 1200
    assert state is not None and state.tolist() == [1.0, 1.0, 1.0]
    assert recorded_actions.tolist() == [[1.0, 1.0], [1.0, 1.0]]
