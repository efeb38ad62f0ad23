"""Record a real control loop driving the simulated arm, export it with the real
``vla-client export``, and load it back with LeRobot's own `LeRobotDataset`: every frame is the
recorded step (state and action exact, video frames within codec error), episodes and tasks as
recorded. The same for a server's ``--record`` files.

The frames come back through `LeRobotDataset.__getitem__` and LeRobot's default video decoder,
torchcodec, which needs FFmpeg's shared libraries on the system (Debian: ``apt-get install
libavcodec59 libavformat59 libavutil57 libswscale6 libavdevice59 libavfilter8``). Without them
LeRobot cannot decode its videos at all (its other backend, ``pyav``, calls
``torchvision.io.VideoReader``, which torchvision 0.29 no longer has): then each video frame is
decoded with PyAV from the file and at the time LeRobot's episode index gives, the rest of the
frame read from the dataset's table, as `__getitem__` would.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
from sim_arm import CAMERAS, HORIZON, JOINTS, SimArm, reference_app

from vla_client import ActionClient
from vla_client.cli import main
from vla_client.control import ChunkExecutor, ControlLoop
from vla_client.lerobot import LeRobotRobot
from vla_client.recording import ObservationWriter, RecordedObservation, load_observations
from vla_client.server import LocalServer
from vla_client.server.config import RecordSettings

RATE = 20
EPISODES = ("reach", "wave", "reach")
"""Three episodes' tasks: the third repeats the first, so it must reuse its task index."""
VIDEO_MEAN_ERROR = 8.0
"""What AV1 at LeRobot's settings (crf 30, 4:2:0 chroma) may change a frame by: the mean
absolute difference per value, in levels of 255. The arm's frames measure up to about 5. Each
decoded frame must also be nearer its own step's frame than any other step's of its episode,
which a frame decoded from the wrong time would not be: the arm's camera draws a blob that moves
with each reading, so frames of consecutive steps differ by more than the codec's error."""
NAMES = [f"{joint}.pos" for joint in JOINTS]


def run_loop(
    adapter: LeRobotRobot, url: str, ticks: int, record: ObservationWriter | None = None
) -> None:
    with ActionClient(url, encoding="png", wire="msgpack") as client:
        executor = ChunkExecutor(client.infer, prefetch_at=HORIZON // 2)
        loop = ControlLoop(
            observe=adapter.observe, executor=executor, apply_action=adapter.apply_action,
            rate_hz=RATE, record=None if record is None else record.record,
        )  # fmt: skip
        try:
            loop.run(ticks=ticks)
        finally:
            executor.close(timeout=5.0)


def torchcodec_loads() -> bool:
    try:
        import torchcodec.decoders  # noqa: F401
    except (ImportError, OSError, RuntimeError):
        return False
    return True


TORCHCODEC = torchcodec_loads()


def load(root: Path, repo_id: str):  # type: ignore[no-untyped-def]
    from lerobot.datasets.lerobot_dataset import LeRobotDataset

    return LeRobotDataset(repo_id, root=root)


def item_at(dataset, index: int) -> dict[str, Any]:  # type: ignore[no-untyped-def]
    """Frame `index` as `dataset[index]` gives it (see the module's docstring where
    torchcodec cannot load)."""
    if TORCHCODEC or not dataset.meta.video_keys:
        return dict(dataset[index])
    import av
    import torch

    item = dict(dataset.hf_dataset[index])
    episode = dataset.meta.episodes[int(item["episode_index"])]
    for key in dataset.meta.video_keys:
        start = episode[f"videos/{key}/from_timestamp"]
        path = dataset.root / dataset.meta.get_video_file_path(int(item["episode_index"]), key)
        wanted = start + float(item["timestamp"])
        with av.open(str(path)) as container:
            decoded = {f.time: f for f in container.decode(video=0)}
        nearest = min(decoded, key=lambda time: abs(time - wanted))
        assert abs(nearest - wanted) < 0.5 / dataset.fps, (nearest, wanted)
        frame = decoded[nearest].to_ndarray(format="rgb24")
        item[key] = torch.from_numpy(frame).permute(2, 0, 1).float() / 255
    item["task"] = dataset.meta.tasks.iloc[int(item["task_index"])].name
    return item


def check_frame(
    item: dict[str, Any],
    step: RecordedObservation,
    action: np.ndarray,
    episode: list[RecordedObservation],
) -> list[float]:
    """Assert `item` (a dataset frame) holds `step`, of the steps `episode`; returns each
    camera's mean video error."""
    observation = step.observation
    assert observation.state is not None
    np.testing.assert_array_equal(item["observation.state"].numpy(), observation.state)
    np.testing.assert_array_equal(item["action"].numpy(), action)
    assert item["task"] == observation.task
    errors = []
    for name, frame in observation.images.items():
        decoded = item[f"observation.images.{name}"].numpy()  # CHW float in [0, 1]
        pixels = (decoded.transpose(1, 2, 0) * 255).round()
        assert pixels.shape == frame.shape
        error = float(np.abs(pixels - frame).mean())
        others = [np.abs(pixels - other.observation.images[name]).mean() for other in episode]
        assert error <= min(others) + 1e-9, f"camera {name}: another step's frame is nearer"
        assert error < VIDEO_MEAN_ERROR
        errors.append(error)
    return errors


def test_a_loops_recording_exports_to_a_dataset_lerobot_loads_frame_for_frame(
    arm: SimArm, server_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    adapter = LeRobotRobot(arm)
    path = tmp_path / "run.vlaobs"
    with ObservationWriter(path, fps=RATE, **adapter.recording_metadata()) as writer:
        for task in EPISODES:
            adapter.task = task
            run_loop(adapter, server_url, ticks=14, record=writer)
            writer.next_episode()
    steps = load_observations(path)
    episodes = [step.episode for step in steps]
    assert sorted(set(episodes)) == [0, 1, 2] and episodes == sorted(episodes)

    root = tmp_path / "dataset"
    code = main(["export", str(path), "--lerobot", str(root), "--repo-id", "tests/sim_arm"])
    out = capsys.readouterr().out
    assert code == 0
    assert f"exported {len(steps)} frame(s) in 3 episode(s) and 2 task(s) at 20 fps" in out
    assert "applied action" not in out  # every action was the applied one

    dataset = load(root, "tests/sim_arm")
    assert (len(dataset), dataset.num_episodes, dataset.fps) == (len(steps), 3, RATE)
    assert dataset.meta.robot_type == "vla_sim_arm"
    assert dataset.features["observation.state"]["names"] == NAMES
    assert dataset.features["action"]["names"] == NAMES
    assert set(dataset.meta.camera_keys) == {f"observation.images.{c}" for c in CAMERAS}
    assert list(dataset.meta.tasks.index) == ["reach", "wave"]
    errors = []
    first_of_episode = {e: episodes.index(e) for e in set(episodes)}
    for index, step in enumerate(steps):
        item = item_at(dataset, index)
        assert step.applied_action is not None
        same_episode = [other for other in steps if other.episode == step.episode]
        errors += check_frame(item, step, step.applied_action, same_episode)
        assert int(item["episode_index"]) == step.episode
        frame_index = index - first_of_episode[step.episode]
        assert int(item["frame_index"]) == frame_index
        assert float(item["timestamp"]) == pytest.approx(frame_index / RATE)
        assert int(item["task_index"]) == ["reach", "wave"].index(step.observation.task)
    print("mean video error per frame and camera: max", max(errors))


def test_a_servers_recording_exports_with_the_first_action_of_each_chunk(
    arm: SimArm, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A server's ``--record`` file has no applied actions and no episodes: one episode, each
    frame's action row 0 of the chunk served for it; its header has no fps, so --fps gives it."""
    folder = tmp_path / "served"
    with LocalServer(reference_app(record=RecordSettings(folder=str(folder)))) as server:
        run_loop(LeRobotRobot(arm, task="reach"), server.url, ticks=30)
    (path,) = folder.glob("*.vlaobs")
    steps = load_observations(path)
    assert len(steps) >= 2 and all(s.applied_action is None for s in steps)

    root = tmp_path / "dataset"
    code = main(["export", str(path), "--lerobot", str(root), "--fps", "20"])
    out = capsys.readouterr().out
    assert code == 0, out
    assert f"exported {len(steps)} frame(s) in 1 episode(s) and 1 task(s)" in out
    assert f"{len(steps)} frame(s) had no applied action recorded" in out

    dataset = load(root, "local/dataset")
    assert (len(dataset), dataset.num_episodes) == (len(steps), 1)
    assert dataset.features["action"]["names"] == [f"action_{i}" for i in range(len(JOINTS))]
    for index, step in enumerate(steps):
        assert step.served is not None
        check_frame(item_at(dataset, index), step, step.served.actions[0], steps)
