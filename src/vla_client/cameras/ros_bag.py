"""Observations from a ROS 2 bag (sqlite3 or MCAP), read with `rosbags`: no ROS installation.

A lab's robot logs are usually rosbag2 files: camera topics (``sensor_msgs/Image`` in rgb8, bgr8,
mono8, rgba8 or bgra8, or ``sensor_msgs/CompressedImage`` in JPEG or PNG), depth topics
(``sensor_msgs/Image`` in 16UC1 or 32FC1, which become `Observation.depth` frames, exactly) and the
joints (``sensor_msgs/JointState``). `BagSource` replays them as observations, synchronised the way
`CameraRig` synchronises live cameras: each message of the first camera topic (the reference) takes,
from every other camera topic and from the state topic, the message whose header stamp is nearest to
its own; a step where one of them is further than `max_skew_s` away is left out (and counted in
`skipped`), as the rig refuses a frame too old to go with the others. Each frame's header stamp
(seconds of ROS time) travels as its capture time (`Observation.capture_times`), so the server sees
when the frame was taken, and `stamps` gives the reference times, the pace of ``send --rate
recorded``.

A bag is read twice, and never held in memory. Building a `BagSource` reads every message of the
chosen topics once, keeping only its header stamp: each image's type, encoding and size and each
joint reading are checked there (`check_image`, `joint_positions`), so a topic that changes encoding
mid-bag to one not read, or between colour, 16UC1 and 32FC1, is refused before the first observation
leaves, and the steps are planned from the stamps. Iterating reads the bag again in storage order
and keeps only the messages a step still to come needs, handing each step out as soon as its
messages are in: memory holds a few messages per topic, whatever the bag's length (more only where a
topic's storage order strays far from its stamp order), beside an index of each message's stamp and
last step (16 bytes). The storage's own checks run first (`bag_integrity`): damaged MCAP chunks are
left out and counted (`integrity`), never read. ``rosbags`` is imported here, never by ``import
vla_client`` (the ``ros`` extra installs it).
"""

from __future__ import annotations

import bisect
import logging
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from vla_client.cameras.bag_integrity import Integrity, check_storages
from vla_client.cameras.ros_messages import (
    COMPRESSED,
    IMAGE,
    JOINTS,
    check_image,
    decode_depth,
    decode_image,
    is_depth,
    joint_positions,
    stamp_seconds,
)
from vla_client.errors import CodecError, RecordingError
from vla_client.observation import Observation
from vla_client.validation import check_positive

logger = logging.getLogger(__name__)

STATE = "state"
"""The name that marks a topic as the state (JointState positions) rather than a camera."""

_Key = tuple[str, int]
"""A message of a chosen topic: the topic and the message's place in it, in storage order."""


@dataclass(frozen=True)
class _Message:
    """One message of a chosen topic: its header stamp in seconds, the message itself and its
    type."""

    stamp: float
    message: Any
    msgtype: str


class BagSource:
    """Synchronised observations from a ROS 2 bag: ``topics`` maps each topic to a camera name,
    or to ``"state"`` for the one JointState topic (`state` is sent with every step where
    no topic gives one).

    Everything is checked when it is built: the bag opens (`RecordingError` naming the path
    otherwise), every topic is in it with a message type this reads (the error lists the bag's
    topics and types), every message of those topics can be read (an image's encoding and
    size, a JointState's positions), there is at least one camera, and the cameras' messages
    synchronise into at least one step. Damaged MCAP chunks are left out, counted in
    `integrity` and logged once.
    """

    def __init__(
        self,
        path: str | Path,
        topics: Mapping[str, str],
        *,
        max_skew_s: float = 0.05,
        task: str = "",
        state: np.ndarray | None = None,
    ) -> None:
        check_positive("max_skew_s", max_skew_s, finite=True)
        cameras = [topic for topic, name in topics.items() if name != STATE]
        states = [topic for topic, name in topics.items() if name == STATE]
        if not cameras:
            raise ValueError(f"name at least one camera topic (TOPIC=NAME), got {dict(topics)}")
        if len(states) > 1:
            raise ValueError(f"one topic can be the state, got {states}")
        if states and state is not None:
            raise ValueError(f"the state comes from {states[0]}; give no state beside it")
        names = [topics[topic] for topic in cameras]
        if len(set(names)) != len(names):
            raise ValueError(f"each camera topic needs its own name, got {dict(topics)}")
        self.path = str(path)
        self.topics = dict(topics)
        self.max_skew_s = max_skew_s
        self.task = task
        self.state = state
        self._order = [*cameras, *states]
        """The topics, the reference first: the columns of `_steps`."""
        self._stamps, self.integrity = _survey(self.path, self.topics)
        """What the storage's own checks found (`bag_integrity.Integrity`)."""
        self._steps = _synchronise(self._stamps, self._order, max_skew_s)
        self._last_use = _last_uses(self._steps, self._stamps, self._order)
        self.skipped = len(self._stamps[cameras[0]]) - len(self._steps)
        """Reference frames left out: another topic had nothing within `max_skew_s`."""
        if not len(self._steps):
            raise RecordingError(
                f"bag {self.path}: no step where every topic has a message within "
                f"{max_skew_s * 1e3:g} ms of {cameras[0]}'s; raise max_skew_s (--max-skew-ms)"
            )

    @property
    def stamps(self) -> tuple[float, ...]:
        """The reference camera's header stamp (seconds) of each step, in order."""
        return tuple(self._stamps[self._order[0]][self._steps[:, 0]].tolist())

    def __len__(self) -> int:
        return len(self._steps)

    def __iter__(self) -> Iterator[Observation]:
        """The steps in order, each handed out once the bag, read again, has given all its
        messages; a message is let go once the last step that needs it is out."""
        ready: dict[_Key, _Message] = {}
        done = 0
        for (topic, place), message in _read(self.path, self.topics, Integrity(), self._needed):
            if message.stamp != self._stamps[topic][place]:
                raise RecordingError(f"bag {self.path} changed while it was read: {topic}")
            ready[topic, place] = message
            while done < len(self._steps):
                step = list(zip(self._order, self._steps[done].tolist(), strict=True))
                if not all(key in ready for key in step):
                    break
                yield self._observation({key[0]: ready[key] for key in step})
                for key in step:
                    if self._last_use[key[0]][key[1]] == done:
                        del ready[key]
                done += 1
        if done < len(self._steps):
            raise RecordingError(
                f"bag {self.path} changed while it was read: {len(self._steps) - done} step(s) "
                "lost their messages"
            )

    def _needed(self, topic: str, place: int) -> bool:
        return bool(self._last_use[topic][place] >= 0)

    def _observation(self, step: Mapping[str, _Message]) -> Observation:
        images, depth, times, state = {}, {}, {}, self.state
        try:
            for topic, found in step.items():
                name = self.topics[topic]
                if name == STATE:
                    state = joint_positions(found.message)
                    continue
                if is_depth(found.message, found.msgtype):
                    depth[name] = decode_depth(found.message, found.msgtype, topic=topic)
                else:
                    images[name] = decode_image(found.message, found.msgtype, topic=topic)
                times[name] = found.stamp
        except CodecError as exc:
            raise RecordingError(f"bag {self.path}: {exc}") from exc
        return Observation(images, state=state, task=self.task, capture_times=times, depth=depth)


def _survey(path: str, topics: Mapping[str, str]) -> tuple[dict[str, np.ndarray], Integrity]:
    """Every message of the chosen topics checked without decoding a pixel; by topic, the
    messages' header stamps in storage order; and what the storage's checks found."""
    found: dict[str, list[float]] = {topic: [] for topic in topics}
    kinds: dict[str, str] = {}  # per camera topic, what its first message is
    integrity = Integrity()
    for (topic, place), message in _read(path, topics, integrity):
        try:
            if topics[topic] == STATE:
                joint_positions(message.message)
            else:
                check_image(message.message, message.msgtype, topic=topic)
                _check_kind(kinds, topic, message)
        except CodecError as exc:
            raise RecordingError(
                f"bag {path}: {exc} (message {place + 1} of {topic}, stamped {message.stamp:.9f} s)"
            ) from exc
        found[topic].append(message.stamp)
    for topic, stamps in found.items():
        if not stamps:
            raise RecordingError(f"bag {path}: topic {topic} holds no messages")
    if integrity.damaged_chunks:
        logger.warning(
            "bag %s: %d damaged MCAP chunk(s) left out (CRC or size mismatch): %d message(s) "
            "of the chosen topics lost", path, integrity.damaged_chunks, integrity.lost_messages,
        )  # fmt: skip
    return {topic: np.array(stamps, np.float64) for topic, stamps in found.items()}, integrity


def _check_kind(kinds: dict[str, str], topic: str, message: _Message) -> None:
    """`CodecError` when `topic` turns from colour to depth, from depth to colour, or from one
    depth encoding to the other: a camera's frames keep one kind (and a depth one its dtype)."""
    kind = message.message.encoding.upper() if is_depth(message.message, message.msgtype) else ""
    first = kinds.setdefault(topic, kind)
    if kind != first:
        raise CodecError(
            f"{topic} turns from {first or 'colour'} to {kind or 'colour'}; a camera topic "
            "keeps one kind of image"
        )


def _read(
    path: str,
    topics: Mapping[str, str],
    integrity: Integrity,
    needed: Callable[[str, int], bool] | None = None,
) -> Iterator[tuple[_Key, _Message]]:
    """The chosen topics' messages in storage order, each with its place in its topic; given
    `needed`, only those it says (the others are not deserialised). `integrity` gets what
    the storage's checks found."""
    try:
        from rosbags.highlevel import AnyReader
        from rosbags.typesys import Stores, get_typestore
    except ImportError:
        raise ValueError(
            "reading a ROS bag needs rosbags, which is not installed: pip install 'vla-client[ros]'"
        ) from None
    try:
        with AnyReader([Path(path)], default_typestore=get_typestore(Stores.ROS2_HUMBLE)) as reader:
            available: dict[str, list[str]] = {}
            for connection in reader.connections:
                found = available.setdefault(connection.topic, [])
                found += [] if connection.msgtype in found else [connection.msgtype]
            _check_topics(path, topics, available)
            check_storages(reader, path, topics, integrity)
            chosen = [c for c in reader.connections if c.topic in topics]
            places = Counter[str]()
            for connection, _, raw in reader.messages(connections=chosen):
                key = (connection.topic, places[connection.topic])
                places[connection.topic] += 1
                if needed is None or needed(*key):
                    message: Any = reader.deserialize(raw, connection.msgtype)
                    yield key, _Message(stamp_seconds(message), message, connection.msgtype)
    except RecordingError:
        raise
    except Exception as exc:  # rosbags' own errors name no common base: any is "cannot read"
        raise RecordingError(f"cannot read the ROS bag {path}: {exc}") from exc


def _check_topics(
    path: str, topics: Mapping[str, str], available: Mapping[str, Sequence[str]]
) -> None:
    """Each topic is in the bag, with a type its role reads: every type it was recorded with
    (a topic may have several connections)."""
    listing = ", ".join(f"{t} ({' and '.join(m)})" for t, m in sorted(available.items()))
    for topic, name in topics.items():
        if topic not in available:
            raise RecordingError(
                f"bag {path} has no topic {topic}; its topics: {listing or 'none'}"
            )
        wanted = (JOINTS,) if name == STATE else (IMAGE, COMPRESSED)
        if any(msgtype not in wanted for msgtype in available[topic]):
            raise RecordingError(
                f"bag {path}: topic {topic} is {' and '.join(available[topic])}; "
                f"{'the state' if name == STATE else 'a camera'} takes {' or '.join(wanted)}"
            )


def _synchronise(
    stamps: Mapping[str, np.ndarray], order: Sequence[str], max_skew_s: float
) -> np.ndarray:
    """One step per message of the reference topic (``order[0]``), in stamp order, whose every
    other topic has a message within `max_skew_s` of it (the nearest one): a row per step of
    each topic's message's place in storage order, in `order`."""
    by_stamp = {topic: np.argsort(stamps[topic], kind="stable") for topic in order}
    others = order[1:]
    sorted_stamps = {topic: stamps[topic][by_stamp[topic]].tolist() for topic in others}
    steps = []
    for place in by_stamp[order[0]].tolist():
        stamp = float(stamps[order[0]][place])
        step = [place]
        for topic in others:
            nearest = _nearest(sorted_stamps[topic], stamp)
            if abs(sorted_stamps[topic][nearest] - stamp) > max_skew_s:
                break
            step.append(int(by_stamp[topic][nearest]))
        else:
            steps.append(step)
    return np.array(steps, np.int64).reshape(len(steps), len(order))


def _last_uses(
    steps: np.ndarray, stamps: Mapping[str, np.ndarray], order: Sequence[str]
) -> dict[str, np.ndarray]:
    """By topic, for each message (its place in storage order), the last step that uses it;
    -1 for a message no step uses."""
    last = {topic: np.full(len(stamps[topic]), -1, np.int64) for topic in order}
    for column, topic in enumerate(order):
        np.maximum.at(last[topic], steps[:, column], np.arange(len(steps)))
    return last


def _nearest(stamps: list[float], stamp: float) -> int:
    """The index of the stamp nearest to `stamp` in sorted `stamps` (the earlier on a tie)."""
    i = bisect.bisect_left(stamps, stamp)
    if i == 0:
        return 0
    if i == len(stamps):
        return i - 1
    return i - 1 if stamp - stamps[i - 1] <= stamps[i] - stamp else i
