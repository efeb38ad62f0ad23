"""Where ``send`` and ``record`` get observations: cameras, a video, image files, a recording, or
synthetic cameras.

Every source is an iterator of `Observation`s opened as a context manager, so a command reads
``for observation in source`` whatever the frames come from, and cameras are released on any exit.
A recording given where a camera is expected is refused with the commands that read one.
"""

from __future__ import annotations

import argparse
import itertools
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import cv2
import numpy as np

from vla_client.cameras import Camera, CameraRig, VideoFileCamera, open_camera, parse_camera_args
from vla_client.cameras.scene import SyntheticScene, camera_names
from vla_client.cli.bag import add_bag_options, check_bag_args, open_bag, replay
from vla_client.cli.parser import positive_int
from vla_client.errors import CameraError, InvalidObservationError, RecordingError
from vla_client.observation import Observation
from vla_client.protocol import ActionMetadata, OpenpiLayout
from vla_client.protocol.models import MetadataInput
from vla_client.recording import is_recording, load_observations

CAMERAS_HINT = "`vla-client cameras`"


def add_source_options(parser: argparse.ArgumentParser, *, recording: bool = True) -> None:
    """The frame-source options; `recording=False` leaves out ``--obs`` (for ``record`` itself)."""
    group = parser.add_argument_group("frames (pick one kind; default: synthetic cameras)")
    group.add_argument(
        "--camera", action="append", default=[], metavar="NAME=SPEC",
        help="a live camera: device index, /dev/videoN, video file, image folder or "
        "synthetic[:SEED] (repeatable; see 'vla-client cameras')",
    )  # fmt: skip
    group.add_argument(
        "--video", action="append", default=[], metavar="[NAME=]PATH",
        help="a video file played at its own rate as a camera, from its start again when it "
        "ends (repeatable; default name 'video')",
    )  # fmt: skip
    group.add_argument(
        "--image", action="append", default=[], metavar="NAME=PATH",
        help="a camera frame from an image file (repeatable)",
    )  # fmt: skip
    if recording:
        group.add_argument(
            "--obs",
            metavar="FILE",
            help="replay the observations of a recording ('vla-client record', or a server's "
            "'serve --record'), in order",
        )
    add_bag_options(group)
    add_synthetic_options(group, server=recording)
    announced = "as many values as the server announces, else none" if recording else "none"
    parser.add_argument(
        "--state", type=state_text, default=None,
        help=f"comma-separated state vector, e.g. 0,0.1,0.2 (default: {announced})",
    )  # fmt: skip
    parser.add_argument("--task", default="pick up the red block", help="the instruction")


def add_synthetic_options(group: argparse._ActionsContainer, *, server: bool = True) -> None:
    """How many synthetic cameras and how big; unset, they follow the server's metadata
    (`server=False`: a command that talks to no server, whose defaults are fixed)."""
    cameras, size = (
        ("as many as the server announces, else 3", "the server's image size, else ")
        if server
        else ("3", "")
    )
    group.add_argument(
        "--cameras", type=positive_int, default=None,
        help="number of synthetic cameras"
        + (", named as the server names its cameras" if server else "")
        + f" (default: {cameras})",
    )  # fmt: skip
    group.add_argument(
        "--height", type=positive_int, default=None,
        help=f"synthetic frame height (default: {size}360)",
    )  # fmt: skip
    group.add_argument(
        "--width", type=positive_int, default=None,
        help=f"synthetic frame width (default: {size}640)",
    )  # fmt: skip


def source_kind(args: argparse.Namespace) -> str:
    """``obs``, ``bag``, ``cameras``, ``images`` or ``synthetic``; raises if several kinds are
    given."""
    check_bag_args(args)
    given = [
        kind
        for kind, present in (
            ("obs", getattr(args, "obs", None)),
            ("bag", args.bag),
            ("cameras", args.camera or args.video),
            ("images", args.image),
        )
        if present
    ]
    if len(given) > 1:
        raise argparse.ArgumentError(
            None, f"give frames from one kind of source, not {' and '.join(given)}"
        )
    return given[0] if given else "synthetic"


@dataclass(frozen=True)
class Source:
    """An endless iterator of observations; for ``--obs`` (``--bag``), `length` is the
    recording's (the bag's synchronised) size and `wall_times` when each of its observations
    was recorded (the leading camera's header stamps)."""

    observations: Iterator[Observation]
    length: int | None = None
    wall_times: tuple[float, ...] = ()


@dataclass(frozen=True)
class SyntheticPlan:
    """What synthetic cameras look like: their names, frame size and the state sent with them."""

    names: tuple[str, ...]
    height: int
    width: int
    state: np.ndarray | None


def synthetic_plan(
    args: argparse.Namespace,
    metadata: ActionMetadata | None = None,
    layout: OpenpiLayout | None = None,
) -> SyntheticPlan:
    """Synthetic cameras fitted to what the server announced, where the options say nothing.

    An option given wins; then an openpi `layout`'s cameras and state length; then the
    `metadata`'s image keys, image size and state length; then the layout's image size; then 3
    cameras of 360x640, no state.
    """
    spec = metadata.input if metadata is not None else None
    names = _named(args.cameras, _announced_cameras(spec, layout))
    size = _announced_size(spec, layout)
    height = args.height or (size[0] if size else 360)
    width = args.width or (size[1] if size else 640)
    state = parse_state(getattr(args, "state", None))
    state_dim = _announced_state_dim(spec, layout)
    if state is None and state_dim:
        state = np.linspace(-0.5, 0.5, state_dim)  # float64, as a robot reports its joints
    return SyntheticPlan(names, height, width, state)


def _announced_cameras(spec: MetadataInput | None, layout: OpenpiLayout | None) -> tuple[str, ...]:
    """The camera names the layout, else the server, announced (none: empty)."""
    if layout is not None and layout.cameras:
        return tuple(layout.cameras)
    if spec is not None and spec.image_keys:
        return tuple(spec.image_keys)
    return ()


def _announced_size(
    spec: MetadataInput | None, layout: OpenpiLayout | None
) -> tuple[int, ...] | None:
    """The image size the server announced, else the one openpi's example client for the
    layout sends, else None."""
    if spec is not None and spec.image_size:
        return tuple(spec.image_size)
    return layout.image_size if layout is not None else None


def _announced_state_dim(spec: MetadataInput | None, layout: OpenpiLayout | None) -> int | None:
    """The state length the layout, else the server, announced, or None."""
    state_dim = layout.state_dim if layout is not None else None
    return state_dim if state_dim is not None else (spec.state_dim if spec else None)


def _named(count: int | None, announced: tuple[str, ...]) -> tuple[str, ...]:
    """`count` synthetic cameras (None: as many as announced, else 3), named as the server
    names its cameras, as far as it names any; the rest ``wrist``, ``left``, ... (a name the
    server announced skipped)."""
    count = count or len(announced) or 3
    spare = [name for name in camera_names(count + len(announced)) if name not in announced]
    return (*announced[:count], *spare[: max(0, count - len(announced))])


@contextmanager
def open_source(args: argparse.Namespace, plan: SyntheticPlan | None = None) -> Iterator[Source]:
    """The source the options name, open; a recording loops back to its start when it runs out.

    Synthetic cameras follow `plan` (default: `synthetic_plan` of the options alone).
    """
    kind = source_kind(args)
    state = parse_state(args.state)
    if kind == "obs":
        yield _recording(args.obs)
    elif kind == "bag":
        bag = open_bag(args, state)
        yield Source(replay(bag), len(bag), bag.stamps)
    elif kind == "cameras":
        with _opened(_camera_rig(args)) as rig:
            yield Source(
                rig.capture(state=state, task=args.task).observation for _ in itertools.count()
            )
    elif kind == "images":
        frames = _image_files(args.image)
        yield Source(itertools.repeat(Observation(frames, state=state, task=args.task)))
    else:
        plan = plan or synthetic_plan(args)
        yield Source(_synthetic(plan, args.task))


def _recording(path: str) -> Source:
    """The observations of the recording at `path`, looped, with their recorded wall times."""
    steps = load_observations(path)
    if not steps:
        raise RecordingError(f"recording {path!r} holds no observations")
    return Source(
        itertools.cycle([step.observation for step in steps]),
        len(steps),
        tuple(step.wall_time for step in steps),
    )


def _image_files(specs: list[str]) -> dict[str, np.ndarray]:
    """The ``--image [NAME=]FILE`` frames by camera name; a name given twice is refused."""
    frames: dict[str, np.ndarray] = {}
    for spec in specs:
        name, frame = _load_image_file(spec)
        if name in frames:
            raise argparse.ArgumentError(None, f"--image names camera {name!r} twice")
        frames[name] = frame
    return frames


def state_text(text: str) -> str:
    """An argparse type: a comma-separated state vector of finite numbers (kept as text, read
    by `parse_state`)."""
    try:
        parse_state(text)
    except InvalidObservationError as exc:
        raise argparse.ArgumentTypeError(str(exc).removeprefix("--state ")) from None
    return text


def parse_state(text: str | None) -> np.ndarray | None:
    """``"0,0.1,0.2"`` as a float64 vector (openpi requests send it so; the action API's are
    float32); None stays None."""
    if text is None:
        return None
    try:
        state = np.array([float(x) for x in text.split(",")], dtype=np.float64)
    except ValueError:
        state = np.array([np.nan])
    if not np.isfinite(state).all():
        raise InvalidObservationError(f"--state takes comma-separated finite numbers, got {text!r}")
    return state


def camera_for(spec: str) -> Camera:
    """`open_camera(spec)`, refusing a recording with the commands that do read one."""
    refuse_recording(spec.partition("?")[0])
    return open_camera(spec)


def refuse_recording(path: str) -> None:
    """A recording is no camera: say which commands read it (`CameraError`)."""
    if is_recording(path):
        raise CameraError(
            f"{path} is an observation recording, not a camera: replay it with "
            f"'vla-client send --obs {path}' or see its frames with 'vla-client view {path}'"
        )


def _camera_rig(args: argparse.Namespace) -> CameraRig:
    cameras = {name: camera_for(spec) for name, spec in parse_camera_args(args.camera).items()}
    for value in args.video:
        name, sep, path = value.partition("=")
        name, path = (name, path) if sep else ("video", value)
        if name in cameras:
            raise InvalidObservationError(f"camera name {name!r} given twice")
        refuse_recording(path)
        cameras[name] = VideoFileCamera(path)
    return CameraRig(cameras, timeout_s=5.0, max_age_s=1.0)


@contextmanager
def _opened(rig: CameraRig) -> Iterator[CameraRig]:
    """`rig`, open until the block ends; a camera that does not open is a `CameraError` that
    says where to see the cameras there are."""
    try:
        rig.open()
    except CameraError as exc:
        if CAMERAS_HINT in str(exc):
            raise
        raise CameraError(f"{exc}; {CAMERAS_HINT} lists the cameras this machine has") from exc
    try:
        yield rig
    finally:
        rig.close()


def _load_image_file(spec: str) -> tuple[str, np.ndarray]:
    name, sep, path = spec.partition("=")
    if not sep or not name or not path:
        raise InvalidObservationError(f"--image takes NAME=PATH, got {spec!r}")
    frame = cv2.imread(path, cv2.IMREAD_COLOR_RGB)
    if frame is None:
        raise InvalidObservationError(f"cannot read image file {path!r}")
    return name, frame


def _synthetic(plan: SyntheticPlan, task: str) -> Iterator[Observation]:
    scenes = {
        name: SyntheticScene(plan.height, plan.width, seed=i) for i, name in enumerate(plan.names)
    }
    for t in itertools.count():
        yield Observation(
            {name: scene.render(t) for name, scene in scenes.items()}, state=plan.state, task=task
        )
