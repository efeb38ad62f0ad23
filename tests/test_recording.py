"""The observation recording format: round trips, and refusal of anything else."""

from __future__ import annotations

import numpy as np
import pytest

from vla_client.observation import Observation
from vla_client.recording import (
    ObservationReader,
    ObservationWriter,
    RecordingError,
    ServedRequest,
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


def test_what_a_server_served_round_trips(tmp_path, frames):
    path = tmp_path / "served.vlaobs"
    served = ServedRequest(
        actions=np.arange(20, dtype=np.float32).reshape(4, 5),
        parameters={"action_horizon": 4, "seed": 3},
        timings={"preprocess_ms": 1.5, "inference_ms": 7.25},
        request_id="req-1",
    )
    with ObservationWriter(path) as writer:
        writer.write(Observation(frames, state=[1.0]), wall_time=5.0, served=served)
        writer.write(Observation(frames), wall_time=6.0)
    first, second = load_observations(path)
    assert first.served is not None and second.served is None
    np.testing.assert_array_equal(first.served.actions, served.actions)
    assert first.served.actions.dtype == np.float32
    assert first.served.parameters == served.parameters
    assert first.served.timings == served.timings
    assert first.served.request_id == "req-1"


def test_wall_times_and_chosen_steps(tmp_path, frames):
    path = tmp_path / "obs.vlaobs"
    with ObservationWriter(path, image_format="raw") as writer:
        for t in range(5):
            writer.write(Observation({"wrist": frames["wrist"] + t}), wall_time=10.0 + t)
    with ObservationReader(path) as reader:
        assert reader.wall_times() == [10.0, 11.0, 12.0, 13.0, 14.0]
        chosen = list(reader.read({1, 3}))
        assert [index for index, _ in chosen] == [1, 3]
        np.testing.assert_array_equal(chosen[1][1].observation.images["wrist"], frames["wrist"] + 3)
        assert len(list(reader)) == 5  # iterating again starts from the first step
    path.write_bytes(path.read_bytes()[:-1])
    with ObservationReader(path) as reader, pytest.raises(RecordingError, match="step 4"):
        reader.wall_times()


def test_a_writer_can_refuse_to_replace_a_file(tmp_path):
    path = tmp_path / "taken.vlaobs"
    path.write_bytes(b"keep me")
    with pytest.raises(FileExistsError):
        ObservationWriter(path, exclusive=True)
    assert path.read_bytes() == b"keep me"
    with pytest.raises(ValueError, match="'png', 'raw'"):
        ObservationWriter(tmp_path / "x.vlaobs", image_format="webp")  # type: ignore[arg-type]
