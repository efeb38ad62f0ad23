"""The observation recording format: round trips, and refusal of anything else."""

from __future__ import annotations

import struct

import numpy as np
import pytest

from vla_client.codecs import encode_png
from vla_client.observation import Observation
from vla_client.protocol import DecodeLimits
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


@pytest.mark.parametrize("image_format", ["png", "jpeg", "raw"])
def test_depth_frames_round_trip_bit_for_bit(tmp_path, frames, image_format):
    """uint16 depth as 16-bit PNG (or raw), float32 always raw: every bit back, dtype kept."""
    rng = np.random.default_rng(3)
    millimetres = rng.integers(0, 65536, (6, 5), dtype=np.uint16)
    metres = rng.uniform(0, 9, (6, 5)).astype(np.float32)
    metres[0, 0] = np.nan
    path = tmp_path / "rgbd.vlaobs"
    observation = Observation(frames, depth={"mm": millimetres, "m": metres})
    with ObservationWriter(path, image_format=image_format) as writer:
        writer.write(observation, wall_time=1.0)
        writer.write(Observation(frames), wall_time=2.0)
    first, second = (step.observation for step in load_observations(path))
    for name, want in (("mm", millimetres), ("m", metres)):
        assert first.depth[name].dtype == want.dtype
        assert first.depth[name].tobytes() == want.tobytes()
    assert second.depth == {}


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
    with pytest.raises(ValueError, match="'png', 'jpeg', 'raw'"):
        ObservationWriter(tmp_path / "x.vlaobs", image_format="webp")  # type: ignore[arg-type]


def _crafted(path, steps: int, images: dict) -> None:
    """A recording whose steps hold `images` as given, past anything a writer would make."""
    from vla_client.codecs.msgpack_numpy import packb
    from vla_client.recording import EncodedStep

    data = packb({"images": images, "state": None, "task": "", "wall_time": 1.0})
    step = EncodedStep(struct.pack(">I", len(data)) + data, "png")
    with ObservationWriter(path) as writer:
        for _ in range(steps):
            writer.append(step)


def test_thousands_of_tiny_cameras_fail_fast_in_view(tmp_path, capsys):
    """12 steps of 3,000 1x1 PNG cameras (a few MB) once took 4 GiB in ``view``; the reader
    counts a step's cameras against the server's limit before it decodes any frame."""
    from vla_client.cli import main

    tiny = encode_png(np.zeros((1, 1, 3), np.uint8))
    path = tmp_path / "crafted.vlaobs"
    _crafted(path, 12, {f"cam{i}": tiny for i in range(3000)})
    out = tmp_path / "sheet.png"
    code = main(["view", str(path), "--out", str(out)])
    lines = capsys.readouterr().err.strip().splitlines()
    assert code == 1 and len(lines) == 1, lines
    assert "step 0 is over the limits: images: 3000 cameras, over the limit of 16" in lines[0]
    assert not out.exists()


@pytest.mark.parametrize("image_format", ["png", "raw"])
def test_a_frame_over_the_pixel_limit_is_refused_before_decoding(tmp_path, image_format):
    path = tmp_path / "run.vlaobs"
    frame = np.zeros((40, 50, 3), np.uint8)
    with ObservationWriter(path, image_format=image_format) as writer:
        writer.write(Observation({"cam": frame, "top": frame}))
    for limits, problem in [
        (DecodeLimits(max_image_pixels=40 * 50 - 1), r"step 0 is over the limits: .*2000 pixels"),
        (DecodeLimits(max_cameras=1), "2 cameras, over the limit of 1"),
    ]:
        with (
            ObservationReader(path, limits=limits) as reader,
            pytest.raises(RecordingError, match=problem),
        ):
            list(reader)
    with ObservationReader(path, limits=DecodeLimits(max_cameras=2, max_image_pixels=2000)) as r:
        (step,) = list(r)  # exactly at the limits
    np.testing.assert_array_equal(step.observation.images["cam"], frame)


def test_a_png_header_claiming_a_huge_frame_is_refused_unread(tmp_path):
    huge = bytearray(encode_png(np.zeros((1, 1, 3), np.uint8)))
    huge[16:24] = struct.pack(">II", 60000, 60000)  # IHDR width, height (CRC left wrong)
    path = tmp_path / "huge.vlaobs"
    _crafted(path, 1, {"cam": bytes(huge)})
    with ObservationReader(path) as reader, pytest.raises(RecordingError, match="60000x60000"):
        list(reader)


def test_limits_must_be_decode_limits(tmp_path):
    path = tmp_path / "run.vlaobs"
    ObservationWriter(path).close()
    with pytest.raises(ValueError, match="limits must be a DecodeLimits"):
        ObservationReader(path, limits=16)  # type: ignore[arg-type]


@pytest.mark.parametrize("option", ["exclusive", "private"])
@pytest.mark.parametrize("value", ["yes", 1, None])
def test_the_writers_switches_are_booleans(tmp_path, option: str, value: object) -> None:
    with pytest.raises(ValueError, match=rf"{option} must be True or False; got {value!r}"):
        ObservationWriter(tmp_path / "run.vlaobs", **{option: value})
    assert not (tmp_path / "run.vlaobs").exists()


def test_a_loops_applied_action_and_episode_round_trip_beside_old_style_steps(tmp_path, frames):
    """The two fields a control loop adds are optional: a step without them (every file
    before them) reads None for both, in the same version-1 file."""
    path = tmp_path / "loop.vlaobs"
    observation = Observation(frames, state=[1.0, 2.0])
    with ObservationWriter(path) as writer:
        writer.write(observation)  # as before: no action, no episode
        writer.write(observation, applied_action=np.array([0.5, -1.25]), episode=0)
        writer.next_episode()
        writer.record(observation, np.float32([3.0, 4.0]))
    with ObservationReader(path) as reader:
        assert reader.header["version"] == 1
        old, first, second = list(reader)
    assert (old.applied_action, old.episode) == (None, None)
    assert first.applied_action is not None and first.applied_action.dtype == np.float32
    np.testing.assert_array_equal(first.applied_action, [0.5, -1.25])
    assert (first.episode, second.episode) == (0, 1)
    np.testing.assert_array_equal(second.applied_action, [3.0, 4.0])


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (
            {"applied_action": np.zeros((2, 2))},
            r"1-D numeric vector; got float64 of shape \[2, 2\]",
        ),
        ({"applied_action": np.zeros(0)}, "non-empty 1-D numeric vector"),
        ({"applied_action": np.array(["a"])}, "numeric vector"),
        ({"applied_action": np.array([1.0, np.nan])}, "NaN or infinity"),
        ({"episode": -1}, "episode must be an integer >= 0; got -1"),
        ({"episode": 1.5}, "episode must be an integer >= 0; got 1.5"),
        ({"episode": True}, "episode must be an integer >= 0; got True"),
    ],
)
def test_a_bad_applied_action_or_episode_is_refused_and_nothing_written(
    tmp_path, frames, options, message
):
    path = tmp_path / "loop.vlaobs"
    with ObservationWriter(path) as writer:
        with pytest.raises(ValueError, match=message):
            writer.write(Observation(frames), **options)
        assert writer.count == 0
    assert load_observations(path) == []


def test_a_step_with_a_malformed_episode_is_refused_when_read(tmp_path, frames):
    from vla_client.codecs.msgpack_numpy import packb

    path = tmp_path / "crafted.vlaobs"
    with ObservationWriter(path, image_format="raw"):
        pass
    step = {"images": {"wrist": frames["wrist"]}, "wall_time": 1.0, "episode": "one"}
    data = packb(step)
    path.write_bytes(path.read_bytes() + struct.pack(">I", len(data)) + data)
    with pytest.raises(RecordingError, match="step 0 has episode 'one'"):
        load_observations(path)


@pytest.mark.parametrize("wall_time", [float("nan"), float("inf"), -float("inf"), "soon", True])
def test_a_time_that_is_no_clock_is_refused_when_written(tmp_path, frames, wall_time):
    with ObservationWriter(tmp_path / "run.vlaobs") as writer:
        with pytest.raises(ValueError, match="wall_time must be a"):
            writer.write(Observation(frames), wall_time=wall_time)
        assert writer.count == 0


@pytest.mark.parametrize("wall_time", [float("nan"), float("inf")])
def test_a_time_that_is_no_clock_is_refused_when_read(tmp_path, frames, wall_time):
    """A crafted file (or one from an older writer) with a non-finite time: replaying it would
    sleep forever or overflow, so reading refuses it, naming the step."""
    from vla_client.codecs.msgpack_numpy import packb
    from vla_client.recording import EncodedStep

    path = tmp_path / "crafted.vlaobs"
    data = packb({"images": {"wrist": encode_png(frames["wrist"])}, "wall_time": wall_time})
    with ObservationWriter(path) as writer:
        writer.write(Observation(frames), wall_time=1.0)
        writer.append(EncodedStep(struct.pack(">I", len(data)) + data, "png"))
    with ObservationReader(path) as reader:
        with pytest.raises(RecordingError, match="step 1's wall_time must be a finite number"):
            reader.wall_times()
        with pytest.raises(RecordingError, match="step 1's wall_time must be a finite number"):
            list(reader)


def test_a_cut_inside_a_step_is_a_truncated_recording_error(tmp_path, frames):
    from vla_client.errors import TruncatedRecordingError

    path = tmp_path / "cut.vlaobs"
    with ObservationWriter(path) as writer:
        for t in range(3):
            writer.write(Observation(frames), wall_time=float(t))
    path.write_bytes(path.read_bytes()[:-5])
    steps = []
    with ObservationReader(path) as reader, pytest.raises(TruncatedRecordingError, match="step 2"):
        for index, _ in reader.read():
            steps.append(index)
    assert steps == [0, 1]


def test_jpeg_frames_are_smaller_and_close_and_read_back_as_frames(tmp_path, frames):
    """``image_format="jpeg"``: lossy colour frames (close, not equal), several times smaller
    than PNG, read back as RGB frames like any other recording's."""
    sizes = {}
    for image_format in ("png", "jpeg"):
        path = tmp_path / f"{image_format}.vlaobs"
        with ObservationWriter(path, image_format=image_format) as writer:
            writer.write(Observation(frames, state=[1.0]), wall_time=1.0)
        sizes[image_format] = path.stat().st_size
        with ObservationReader(path) as reader:
            (step,) = list(reader)
        for name, frame in frames.items():
            read = step.observation.images[name]
            assert read.shape == frame.shape and read.dtype == np.uint8
            difference = np.abs(read.astype(np.int16) - frame.astype(np.int16)).mean()
            assert difference == 0 if image_format == "png" else 0 < difference < 8, difference
    assert sizes["jpeg"] * 3 < sizes["png"], sizes
