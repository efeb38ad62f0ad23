"""The live node's inputs: camera and joint-state messages, read and synchronised by header stamps.

The same rule as a bag's (`vla_client.cameras.ros_bag`): the first camera topic is the
reference; its newest readable message takes, from every other camera topic and from the state
topic, the message whose header stamp is nearest to its own, and a set where one of them is
further than `max_skew_s` away is not formed (an older reference message is tried instead). Each
frame's header stamp travels as its capture time (`Observation.capture_times`). A depth camera
(`16UC1`, `32FC1`) is read as the bag reader reads it (`decode_depth`) and travels in
`Observation.depth`.

Every message is read once, when it is first seen, with the bag reader's own functions
(`vla_client.cameras.ros_messages`). One that cannot be read (an encoding not taken, data shorter
than height x step, an undecodable CompressedImage, a NaN joint position, a missing joint) is
refused: it never enters a set, and `refusals()` hands the reason, naming the topic, to the
caller, which says it on the status topic. A sample the subscription itself refused (its topic
started carrying another type) is counted there and handed on the same way.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from vla_client.cameras.ros_messages import (
    COMPRESSED,
    IMAGE,
    decode_depth,
    decode_image,
    is_depth,
    joint_positions,
    stamp_seconds,
)
from vla_client.errors import CodecError
from vla_client.observation import Observation

if TYPE_CHECKING:
    from vla_client.ros2.graph import Sample, Subscription

COMPRESSED_SUFFIX = "/compressed"
"""image_transport's convention: a camera's CompressedImage topic is its raw topic + this."""


def image_type(topic: str) -> str:
    """The message type of a camera topic: CompressedImage for one ending in ``/compressed``
    (image_transport's name for it), Image otherwise."""
    return COMPRESSED if topic.rstrip("/").endswith(COMPRESSED_SUFFIX) else IMAGE


@dataclass(frozen=True)
class Reading:
    """One synchronised set: the observation it makes, and its oldest header stamp (seconds of
    ROS time, cameras and state), which its age is measured from."""

    observation: Observation
    oldest_stamp: float
    joint_names: tuple[str, ...]
    """The state's joints in the order of its values: `--joints`, or the message's names."""
    received_at: float
    """When its newest message arrived, on the subscriptions' monotonic clock."""


@dataclass(frozen=True)
class _Read:
    """A message as read: its stamp and value (a frame, or positions with their joint names)."""

    sample: Sample
    stamp: float
    value: Any
    names: tuple[str, ...] = ()


class InputSync:
    """The newest synchronised set of `cameras` (topic -> camera name; the first is the
    reference) and `state`, read from their subscriptions (`Subscription`)."""

    def __init__(
        self,
        cameras: Mapping[str, Subscription],
        names: Mapping[str, str],
        state: Subscription,
        *,
        joints: Sequence[str] | None = None,
        max_skew_s: float = 0.05,
        task: str = "",
    ) -> None:
        if not cameras:
            raise ValueError("name at least one camera topic (--image TOPIC=NAME)")
        self._cameras = dict(cameras)
        self._names = dict(names)
        self._state = state
        self._joints = None if joints is None else tuple(joints)
        self._max_skew_s = max_skew_s
        self._task = task
        self._read: dict[str, dict[int, tuple[Sample, _Read | None]]] = {
            topic: {} for topic in [*self._cameras, state.topic]
        }
        self._refused_seen = {topic: 0 for topic in self._read}
        self._new_refusals: list[str] = []
        self.refused = 0
        """Messages refused so far, all topics: unreadable, or of another type."""
        self._reading: Reading | None = None

    def read(self) -> Reading | None:
        """The newest synchronised set (None before the first): a new one when new messages
        make one, else the last one."""
        fresh = {topic: self._take(source) for topic, source in self._sources()}
        if not any(fresh.values()):
            return self._reading
        reading = self._synchronise()
        if reading is not None and (
            self._reading is None or reading.oldest_stamp >= self._reading.oldest_stamp
        ):
            self._reading = reading
        return self._reading

    def refusals(self) -> list[str]:
        """The reasons for the messages refused since the last call, oldest first."""
        taken, self._new_refusals = self._new_refusals, []
        return taken

    def _sources(self) -> list[tuple[str, Subscription]]:
        return [*self._cameras.items(), (self._state.topic, self._state)]

    def _take(self, source: Subscription) -> bool:
        """Read the samples of `source` not read yet; whether there were any."""
        known = self._read[source.topic]
        if source.refused > self._refused_seen[source.topic]:
            self.refused += source.refused - self._refused_seen[source.topic]
            self._refused_seen[source.topic] = source.refused
            self._new_refusals.append(source.last_refusal or f"{source.topic}: a sample refused")
        samples = source.recent()
        current = {id(sample): sample for sample in samples}
        new = False
        for key, sample in current.items():
            entry = known.get(key)
            if entry is not None and entry[0] is sample:
                continue
            new = True
            read = self._decode(source, sample)
            if isinstance(read, str):
                self.refused += 1
                self._new_refusals.append(read)
            known[key] = (sample, None if isinstance(read, str) else read)
        for key in set(known) - set(current):
            del known[key]
        return new

    def _decode(self, source: Subscription, sample: Sample) -> _Read | str:
        """`sample` read, or why it is refused (a line naming the topic)."""
        message = sample.message
        try:
            stamp = stamp_seconds(message)
            if not math.isfinite(stamp):
                raise CodecError(f"header stamp {stamp!r}")
            if source is self._state:
                positions = joint_positions(message, self._joints)
                names = self._joints if self._joints is not None else tuple(message.name)
                return _Read(sample, stamp, positions, names)
            decode = decode_depth if is_depth(message, source.msgtype) else decode_image
            return _Read(sample, stamp, decode(message, source.msgtype, topic=source.topic))
        except CodecError as exc:
            text = str(exc)
            return text if source.topic in text else f"{source.topic}: {text}"
        except (AttributeError, TypeError, ValueError) as exc:  # a field missing or malformed
            return f"{source.topic}: unreadable {source.msgtype}: {exc}"

    def _readable(self, topic: str) -> list[_Read]:
        entries = [read for _, read in self._read[topic].values() if read is not None]
        return sorted(entries, key=lambda read: read.stamp)

    def _synchronise(self) -> Reading | None:
        reference, *others = self._cameras
        topics = [*others, self._state.topic]
        readable = {topic: self._readable(topic) for topic in topics}
        for anchor in reversed(self._readable(reference)):
            chosen = {reference: anchor}
            for topic in topics:
                near = min(readable[topic], key=lambda e: abs(e.stamp - anchor.stamp), default=None)
                if near is None or abs(near.stamp - anchor.stamp) > self._max_skew_s:
                    break
                chosen[topic] = near
            else:
                return self._reading_of(chosen)
        return None

    def _reading_of(self, chosen: Mapping[str, _Read]) -> Reading:
        state = chosen[self._state.topic]
        cameras = {self._names[topic]: chosen[topic] for topic in self._cameras}
        frames = {name: read.value for name, read in cameras.items()}
        observation = Observation(
            {name: frame for name, frame in frames.items() if frame.ndim == 3},
            state=state.value,
            task=self._task,
            capture_times={name: read.stamp for name, read in cameras.items()},
            depth={name: frame for name, frame in frames.items() if frame.ndim == 2},
        )
        return Reading(
            observation,
            min(read.stamp for read in chosen.values()),
            state.names,
            max(read.sample.received_at for read in chosen.values()),
        )
