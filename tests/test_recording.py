"""The observation recording format: round trips, and refusal of anything else."""

from __future__ import annotations

import numpy as np
import pytest

from vla_client.observation import Observation
from vla_client.recording import (
    ObservationReader,
    ObservationWriter,
    RecordingError,
    load_action_chunks,
    load_observations,
    save_action_chunks,
)


@pytest.mark.parametrize("image_format", ["png", "raw"])
def test_round_trip(tmp_path, frames, image_format):
    path = tmp_path / "obs.vlaobs"
    observation = Observation(
        frames, state=[0.5, -1.0], task="stack", capture_times={"wrist": 12.5}
    )
    with ObservationWriter(path, image_format=image_format, robot="arm-1") as writer:
        writer.write(observation, wall_time=100.0)
        writer.write(Observation({"wrist": frames["wrist"]}), wall_time=101.0)
    with ObservationReader(path) as reader:
        assert reader.metadata == {"robot": "arm-1"}
        first, second = list(reader)
    for name, frame in frames.items():
        np.testing.assert_array_equal(first.observation.images[name], frame)
    np.testing.assert_array_equal(first.observation.state, [0.5, -1.0])
    assert first.observation.task == "stack"
    assert first.observation.capture_times == {"wrist": 12.5}
    assert (first.wall_time, second.wall_time) == (100.0, 101.0)
    assert second.observation.state is None and list(second.observation.images) == ["wrist"]


def test_truncated_file_is_reported(tmp_path, frames):
    path = tmp_path / "obs.vlaobs"
    with ObservationWriter(path) as writer:
        writer.write(Observation(frames))
    path.write_bytes(path.read_bytes()[:-10])
    with pytest.raises(RecordingError, match="truncated"):
        load_observations(path)


@pytest.mark.parametrize("content", [b"", b"hello world", b"\x89VLAOBS\n\x00\x00\x00\x01\xc0"])
def test_other_files_are_refused(tmp_path, content):
    path = tmp_path / "other"
    path.write_bytes(content)
    with pytest.raises(RecordingError, match="not a vla-client observation recording"):
        ObservationReader(path)


def test_action_chunks_round_trip_without_pickle(tmp_path):
    chunks = [np.full((4, 3), i, np.float32) for i in range(5)]
    path = tmp_path / "actions.npz"
    save_action_chunks(path, chunks)
    np.testing.assert_array_equal(load_action_chunks(path), np.stack(chunks))
    with pytest.raises(ValueError, match="one shape"):
        save_action_chunks(path, [np.zeros((4, 3)), np.zeros((5, 3))])
    np.save(tmp_path / "objects.npy", np.array([{"a": 1}], dtype=object), allow_pickle=True)
    with pytest.raises(RecordingError):
        load_action_chunks(tmp_path / "objects.npy")
