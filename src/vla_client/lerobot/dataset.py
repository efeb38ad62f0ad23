"""Export a recording to a LeRobotDataset (format v3.0), written by LeRobot's own writer.

The recording is one a `ControlLoop` made (``record=writer.record``: every step holds the
action applied on its tick and its episode number) or one a server's ``--record`` made (every
step holds the chunk the policy returned for it). Each step becomes one dataset frame:

- ``observation.images.<camera>``: the step's frames (an MP4 per camera, LeRobot's default
  AV1 encoding; `videos=False` keeps them as lossless PNG images instead, as the default does
  where LeRobot could not decode the video here: `video_unreadable`);
- ``observation.state``: the step's state as float32, LeRobot's type (a float64 state is
  rounded to it); left out when the recording has none;
- ``action``: the applied action; for a server's step, which has none, row 0 of the served
  chunk: the action the policy proposed for the tick its observation was taken on (what the
  robot executed may differ: the loop aligns, blends and gates chunks; record on the robot for
  that);
- ``task``: the step's task text, or `task` for steps without one.

Feature names come from LeRobot's `hw_to_dataset_features` and each frame from its
`build_dataset_frame`, with the state's and action's value names from the recording's header
(``state_names``, ``action_names``: `LeRobotRobot.recording_metadata()` puts them there), or
``state_0, state_1, ...`` without. A new episode starts wherever a step's episode number differs
from the step before's, so a server's recording (no numbers) is one episode; episodes are
numbered from 0 in file order. The dataset's rate is `fps`, or the header's ``fps``; its
timestamps are frame index / fps, as LeRobot's own recorder makes them.

The dataset is written into a fresh folder beside `root` and moved to `root` when it is
complete, so `root` is never left half-written; a `root` that exists and is not an empty
folder is refused. LeRobot is imported when the export runs, never at import time.
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.util
import itertools
import re
import shutil
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np

from vla_client.errors import TruncatedRecordingError
from vla_client.lerobot.limits import MAX_FPS, REPO_ID
from vla_client.recording import ObservationReader, RecordedObservation
from vla_client.validation import check_positive

INSTALL = (
    "the LeRobot export needs lerobot 0.4 (and torch), which is not installed here: install "
    "CPU torch and lerobot --no-deps beside vla-client as docs/install.md#lerobot shows (the "
    "'lerobot' extra would pull CUDA torch and LeRobot's older OpenCV and rerun-sdk); "
    "in a checkout, .ci/lerobot_venv.sh DIR builds such a venv"
)


@dataclass(frozen=True)
class ExportSummary:
    """What `export_lerobot_dataset` wrote: counts, the tasks in order of first use, how many
    frames took their action from a served chunk (no applied action was recorded), how the
    frames were stored and what was dropped."""

    root: Path
    repo_id: str
    fps: int
    frames: int
    episodes: int
    tasks: tuple[str, ...]
    served_actions: int
    videos: bool = True
    """Whether the frames went in as video (else as PNG images)."""
    images_because: str | None = None
    """Why the frames are images where video was not asked for or refused: LeRobot's reader
    cannot decode video here (`video_unreadable`)."""
    dropped: str | None = None
    """What was left out of a recording cut off inside its last step."""
    no_action: int = 0
    """Steps left out because no action was taken on them (a control loop's ticks before its
    first chunk came, or while it waited for one)."""


def export_lerobot_dataset(
    recording: str | Path,
    root: str | Path,
    *,
    repo_id: str | None = None,
    fps: int | None = None,
    task: str | None = None,
    videos: bool | None = None,
) -> ExportSummary:
    """Write the recording at `recording` as a LeRobotDataset in the folder `root` (its
    missing parent folders are made).

    `repo_id` names the dataset (``owner/name``; ``local/<root's name>`` by default); `fps` is
    an integer in 1..`MAX_FPS`, required when the header has no ``fps``; `task` a non-empty
    text for steps recorded without one (a step with neither is a `ValueError`). `videos`
    stores the frames as video (True) or PNG images (False); None: video where LeRobot's
    default reader can decode it here (`video_unreadable`), images otherwise, and the
    summary's `images_because` says why. The options, `root` and the recording's header are
    checked before LeRobot is imported. Steps no action was taken on (a control loop's ticks
    before its first chunk came) are left out, and counted in the summary's `no_action`; a
    recording with no action at all (``vla-client record``'s) is refused naming what made it
    and how to get actions. A missing lerobot is then an `ImportError` naming the install
    recipe, before the rate is read. A recording that is empty, or whose steps disagree in
    cameras, frame sizes, state or action length, is a `ValueError` naming the step, and
    nothing is left behind. A recording
    cut off inside its last step (a full disk, a killed recorder) exports its whole steps; the
    summary's `dropped` says what was left out.
    """
    target = Path(root)
    repo = _checked_repo_id(repo_id, target)
    _check_export_options(fps, task, videos)
    _check_root(target)
    with ObservationReader(recording) as reader:
        dropped: list[str] = []
        idle = _Idle()
        steps = idle.skipped(_whole_steps(reader.read(), dropped))
        first = next(steps, None)
        if first is None and idle.count:
            raise _without_actions(recording, reader.metadata)
        if first is None:
            cut = f" ({dropped[0]})" if dropped else ""
            raise ValueError(f"{recording} holds no whole step: there is nothing to export{cut}")
        lerobot = _import_lerobot()
        rate = _rate(fps, reader.metadata.get("fps"))
        images_because = None
        if videos is None:
            images_because = video_unreadable()
            videos = images_because is None
        layout = _Layout.of(first[1], reader.metadata)
        made = _make_parents(target.parent)
        staging = Path(tempfile.mkdtemp(prefix=f".{target.name}-", dir=target.parent))
        try:
            summary = _write(
                lerobot, layout, itertools.chain([first], steps), staging / "dataset", repo, rate,
                task, videos, robot_type=reader.metadata.get("robot_type"),
            )  # fmt: skip
            if target.exists():
                target.rmdir()  # empty, as checked; the rename below needs it gone
            (staging / "dataset").rename(target)
        except BaseException:
            shutil.rmtree(staging, ignore_errors=True)
            for folder in made:  # deepest first: what this export made, and nothing else
                with contextlib.suppress(OSError):
                    folder.rmdir()
            raise
        shutil.rmtree(staging, ignore_errors=True)
    return ExportSummary(
        target, repo, rate, *summary, videos=videos, images_because=images_because,
        dropped=dropped[0] if dropped else None, no_action=idle.count,
    )  # fmt: skip


def _check_export_options(fps: int | None, task: str | None, videos: bool | None) -> None:
    """`ValueError` for an export's `fps`, `task` or `videos` given out of its range."""
    if fps is not None:
        check_positive("fps", fps, integer=True)
        _check_fps_bound(fps, "fps")
    if task is not None and (not isinstance(task, str) or not task):
        raise ValueError(f"task must be a non-empty string or None; got {task!r}")
    if videos is not None and not isinstance(videos, bool):
        raise ValueError(f"videos must be True, False or None; got {videos!r}")


def video_unreadable() -> str | None:
    """Why LeRobot could not decode the videos it writes, here, or None when it can.

    LeRobot 0.4 reads video with torchcodec wherever that package is installed (whether or not
    its native library loads: it needs FFmpeg's shared libraries), else with torchvision's
    ``VideoReader``, which newer torchvision releases no longer have.
    """
    if importlib.util.find_spec("torchcodec") is not None:
        try:
            importlib.import_module("torchcodec.decoders")
        except Exception as exc:  # its native library: OSError, RuntimeError
            return (
                "LeRobot reads video with torchcodec here, and torchcodec does not load "
                f"({type(exc).__name__}: it needs FFmpeg 4-8's shared libraries)"
            )
        return None
    try:
        io = importlib.import_module("torchvision.io")
    except ImportError:
        return "neither torchcodec nor torchvision is installed to read video back"
    if hasattr(io, "VideoReader"):
        return None
    return (
        "LeRobot reads video with torchcodec, or torchvision's VideoReader, and this install "
        "has neither (pip install torchcodec, with FFmpeg's shared libraries)"
    )


def _whole_steps(
    steps: Iterator[tuple[int, RecordedObservation]], dropped: list[str]
) -> Iterator[tuple[int, RecordedObservation]]:
    """`steps` up to a cut in the file: a truncated last step ends them, noted in `dropped`;
    any other damage is raised."""
    try:
        yield from steps
    except TruncatedRecordingError as exc:
        dropped.append(str(exc))


class _Idle:
    """Counts the steps no action was taken on, as it leaves them out of the steps it passes."""

    def __init__(self) -> None:
        self.count = 0

    def skipped(
        self, steps: Iterator[tuple[int, RecordedObservation]]
    ) -> Iterator[tuple[int, RecordedObservation]]:
        for index, step in steps:
            if step.applied_action is None and step.served is None:
                self.count += 1
            else:
                yield index, step


def _without_actions(recording: str | Path, metadata: dict[str, Any]) -> ValueError:
    """The refusal of a recording none of whose steps holds an action, naming what made it
    (its header's ``source``, or an older eval's keys) and the ways to a recording with them."""
    source = metadata.get("source")
    if source == "record":
        made = "'vla-client record' made it, and records observations only"
    elif source == "eval" or {"seed", "mode", "rate_hz"} <= metadata.keys():
        made = (
            "'vla-client eval --record' of vla-client 0.3 made it, whose episodes held no "
            "actions (this version's hold the action of each tick: record the run again)"
        )
    else:
        made = "it holds observations only, as 'vla-client record' makes them"
    return ValueError(
        f"{recording} holds no action: {made}. Every LeRobot frame needs the action taken on "
        "it: record a control loop (ControlLoop(record=writer.record)) or 'vla-client eval "
        "--record DIR', or replay the file to a recording server ('vla-client serve --record "
        "DIR', then 'vla-client send URL --obs FILE') and export the recording it writes in "
        "DIR, with --fps"
    )


def _make_parents(folder: Path) -> list[Path]:
    """Make `folder` and its missing parents; returns the folders made, deepest first."""
    missing = []
    for path in (folder, *folder.parents):
        if path.exists():
            break
        missing.append(path)
    folder.mkdir(parents=True, exist_ok=True)
    return missing


@dataclass(frozen=True)
class _Layout:
    """What every frame holds, read from the first step: cameras and their shapes, the state's
    and the action's value names."""

    cameras: dict[str, tuple[int, ...]]
    state_names: list[str]
    action_names: list[str]

    @classmethod
    def of(cls, step: RecordedObservation, metadata: dict[str, Any]) -> _Layout:
        observation = step.observation
        state = 0 if observation.state is None else observation.state.size
        action = _action(step, 0)
        return cls(
            {name: frame.shape for name, frame in observation.images.items()},
            _names(metadata.get("state_names"), state, "state"),
            _names(metadata.get("action_names"), action.size, "action"),
        )

    def features(self, lerobot: Any, videos: bool) -> dict[str, dict[str, Any]]:
        """The dataset's features, named by LeRobot's `hw_to_dataset_features`."""
        to_features = lerobot.hw_to_dataset_features
        observed: dict[str, Any] = dict.fromkeys(self.state_names, float)
        observed.update(self.cameras)
        return {
            **to_features(observed, "observation", use_video=videos),
            **to_features(dict.fromkeys(self.action_names, float), "action"),
        }

    def check(self, step: RecordedObservation, index: int, action: np.ndarray) -> None:
        """`ValueError` naming the step when it does not fit the first step's layout."""
        observation = step.observation
        cameras = {name: frame.shape for name, frame in observation.images.items()}
        state = 0 if observation.state is None else observation.state.size
        found = (cameras, state, action.size)
        expected = (self.cameras, len(self.state_names), len(self.action_names))
        if found != expected:
            raise ValueError(
                f"step {index} has cameras {cameras}, {state} state and {action.size} action "
                f"values; the first step has {self.cameras}, {len(self.state_names)} and "
                f"{len(self.action_names)}: a dataset's frames all have one layout"
            )


def _write(
    lerobot: Any,
    layout: _Layout,
    steps: Iterator[tuple[int, RecordedObservation]],
    root: Path,
    repo_id: str,
    fps: int,
    default_task: str | None,
    videos: bool,
    *,
    robot_type: object,
) -> tuple[int, int, tuple[str, ...], int]:
    """Add every step as a frame, saving an episode at each boundary; returns the counts."""
    dataset = lerobot.LeRobotDataset.create(
        repo_id, fps, layout.features(lerobot, videos), root=root,
        robot_type=robot_type if isinstance(robot_type, str) and robot_type else None,
        use_videos=videos,
    )  # fmt: skip
    frames = episodes = served = 0
    tasks: dict[str, None] = {}
    episode: object = None
    try:
        for index, step in steps:
            action = _action(step, index)
            layout.check(step, index, action)
            if frames and step.episode != episode:
                dataset.save_episode()
                episodes += 1
            episode = step.episode
            text = step.observation.task or default_task
            if not text:
                raise ValueError(f"step {index} has no task: give one for such steps (--task)")
            dataset.add_frame(_frame(lerobot, dataset.features, layout, step, action, text))
            tasks.setdefault(text)
            frames += 1
            served += step.applied_action is None
        dataset.save_episode()
    finally:
        dataset.finalize()
    return frames, episodes + 1, tuple(tasks), served


def _frame(
    lerobot: Any,
    features: dict[str, Any],
    layout: _Layout,
    step: RecordedObservation,
    action: np.ndarray,
    task: str,
) -> dict[str, Any]:
    """One dataset frame, built by LeRobot's `build_dataset_frame` from named values."""
    observation = step.observation
    observed: dict[str, Any] = dict(observation.images)
    if observation.state is not None:
        observed.update(zip(layout.state_names, observation.state.tolist(), strict=True))
    values = dict(zip(layout.action_names, action.tolist(), strict=True))
    return {
        **lerobot.build_dataset_frame(features, observed, "observation"),
        **lerobot.build_dataset_frame(features, values, "action"),
        "task": task,
    }


def _action(step: RecordedObservation, index: int) -> np.ndarray:
    """The step's applied action, or row 0 of the chunk a server served for it."""
    if step.applied_action is not None:
        return step.applied_action
    chunk = None if step.served is None else step.served.actions
    if chunk is not None and chunk.ndim == 2 and len(chunk):
        first: np.ndarray = chunk[0]
        return first
    raise ValueError(
        f"step {index} has no action: neither one applied (a control loop's recording) nor a "
        "chunk served (a server's)"
    )


def _names(given: object, size: int, what: str) -> list[str]:
    """The header's names for the `size` values of the state or action, or generic ones."""
    if size == 1:
        # LeRobot 0.4 makes a (1,) feature a scalar column, then writes it with float() of a
        # 1-value array, which numpy 2.4 refuses: say so before anything is written.
        raise ValueError(
            f"the recording's {what} has 1 value: LeRobot 0.4 cannot write a 1-value {what} "
            "vector (it makes it a scalar column and fails under numpy >= 2.4)"
        )
    if given is None:
        return [f"{what}_{i}" for i in range(size)]
    names = list(given) if isinstance(given, list | tuple) else None
    if names is None or not _distinct_names(names, size):
        raise ValueError(
            f"the recording's {what}_names must be {size} distinct names without '/' (one per "
            f"{what} value); got {given!r}"
        )
    return names


def _distinct_names(names: list[object], size: int) -> bool:
    """Whether `names` are `size` distinct non-empty texts without ``/``."""
    if len(names) != size or len(set(names)) != size:
        return False
    return all(isinstance(n, str) and n and "/" not in n for n in names)


def _rate(fps: int | None, recorded: object) -> int:
    if fps is not None:
        return fps
    if recorded is None:
        raise ValueError("the recording's header has no fps: give the dataset's rate (--fps)")
    if isinstance(recorded, bool) or not isinstance(recorded, int | float) or recorded <= 0:
        raise ValueError(f"the recording's fps {recorded!r} is not a rate: give --fps")
    _check_fps_bound(recorded, "the recording's fps")
    if recorded != int(recorded):
        raise ValueError(f"the recording's fps {recorded!r} is not a whole number: give --fps")
    return int(recorded)


def _check_fps_bound(fps: float, what: str) -> None:
    if not fps <= MAX_FPS:  # inf too
        raise ValueError(
            f"{what} {fps!r} is not a rate of 1 to {MAX_FPS} frames a second: give --fps"
        )


def _checked_repo_id(repo_id: str | None, root: Path) -> str:
    if repo_id is None:
        name = re.sub(r"[^\w.-]", "_", root.resolve().name).lstrip("._-") or "dataset"
        return f"local/{name}"
    if not isinstance(repo_id, str) or not REPO_ID.match(repo_id):
        raise ValueError(
            f"repo_id must be 'owner/name' (letters, digits, '_', '-', '.'); got {repo_id!r}"
        )
    return repo_id


def _check_root(root: Path) -> None:
    """`root` can become the dataset: new or an empty folder, in a folder that is one or can
    be made."""
    if root.exists() and (not root.is_dir() or any(root.iterdir())):
        what = "a folder that is not empty" if root.is_dir() else "not a folder"
        raise ValueError(f"{root} is {what}: the dataset goes into a new or empty folder")
    existing = next(path for path in root.resolve().parents if path.exists())
    if not existing.is_dir():
        raise ValueError(f"{root}: {existing} is not a folder")


def _import_lerobot() -> Any:
    """LeRobot's dataset writer and feature helpers, or an `ImportError` saying how to get
    them."""
    try:
        datasets = importlib.import_module("lerobot.datasets.lerobot_dataset")
        utils = importlib.import_module("lerobot.datasets.utils")
    except ImportError as exc:
        raise ImportError(f"{INSTALL} ({exc})") from None
    return SimpleNamespace(
        LeRobotDataset=datasets.LeRobotDataset,
        hw_to_dataset_features=utils.hw_to_dataset_features,
        build_dataset_frame=utils.build_dataset_frame,
    )
