"""An independent ROS 2 peer for the live tests: zenoh-ros2-sdk on the test's Zenoh router.

zenoh-ros2-sdk is a second, separately written implementation of rmw_zenoh's conventions (key
expressions, type hashes, liveliness tokens, the attachment). The tests talk to our node through
it, so they check our reading of the conventions against someone else's, not against itself.

It is never left to find message definitions itself (it would download ROS's message packages,
and offline it computes a wrong hash for some types): every endpoint is given its definition and
its RIHS01 hash from rosbags' Jazzy typestore, the same store a real Jazzy graph's hashes match.

Everything here waits with a deadline (`wait_for`) and never sleeps-and-hopes: discovery on a
Zenoh graph takes a moment, so a publisher repeats its message until the other side has it
(`publish_until`).
"""

from __future__ import annotations

import dataclasses
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

import pytest

pytest.importorskip("zenoh")
pytest.importorskip("zenoh_ros2_sdk")

import zenoh
from rosbags.typesys import Stores, get_typestore
from zenoh_ros2_sdk import (
    ROS2Publisher,
    ROS2Subscriber,
    TopicInfo,
    ZenohSession,
    get_topic_info,
)

JAZZY = get_typestore(Stores.ROS2_JAZZY)

T = TypeVar("T")


def definition(msgtype: str) -> str:
    """The full message definition of `msgtype` (with its nested types), as ROS 2 writes it."""
    text, _ = JAZZY.generate_msgdef(msgtype, ros_version=2)
    return str(text)


def type_hash(msgtype: str) -> str:
    """`msgtype`'s RIHS01 type hash in Jazzy ("RIHS01_<64 hex digits>")."""
    return str(JAZZY.hash_rihs01(msgtype))


def dds_type(msgtype: str) -> str:
    """The DDS type name on the wire: sensor_msgs/msg/Image is sensor_msgs::msg::dds_::Image_."""
    package, kind, name = msgtype.split("/")
    return f"{package}::{kind}::dds_::{name}_"


def cdr(message: Any, msgtype: str) -> bytes:
    """`message` serialised as CDR: two messages are the same exactly when these bytes are."""
    return bytes(JAZZY.serialize_cdr(message, msgtype))


def wait_for(check: Callable[[], T], what: str, timeout: float = 5.0) -> T:
    """Poll `check` until it returns something truthy (returned), or fail after `timeout` s."""
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {timeout} s: {what}")
        time.sleep(0.02)


@dataclass
class Received:
    """What one of the peer's subscriptions has received, in order (filled on zenoh's threads)."""

    msgtype: str
    messages: list[Any] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def add(self, message: Any) -> None:
        with self.lock:
            self.messages.append(message)

    def snapshot(self) -> list[Any]:
        with self.lock:
            return list(self.messages)

    def wait(self, count: int = 1, timeout: float = 5.0) -> list[Any]:
        """The messages once at least `count` have arrived."""
        return wait_for(
            lambda: len(self.snapshot()) >= count and self.snapshot(),
            f"{count} {self.msgtype} message(s) received by the independent peer",
            timeout,
        )


@dataclass(frozen=True)
class RawSample:
    """One Zenoh sample as it was on the wire: its key expression, bytes and attachment."""

    key: str
    payload: bytes
    attachment: bytes | None
    encoding: str


@dataclass
class RawReceived:
    samples: list[RawSample] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def add(self, sample: zenoh.Sample) -> None:
        attachment = sample.attachment
        raw = RawSample(
            key=str(sample.key_expr),
            payload=sample.payload.to_bytes(),
            attachment=None if attachment is None else attachment.to_bytes(),
            encoding=str(sample.encoding),
        )
        with self.lock:
            self.samples.append(raw)

    def wait(self, count: int = 1, timeout: float = 5.0) -> list[RawSample]:
        def ready() -> list[RawSample]:
            with self.lock:
                return list(self.samples) if len(self.samples) >= count else []

        return wait_for(ready, f"{count} raw sample(s) on the wire", timeout)


class Peer:
    """A ROS 2 participant built on zenoh-ros2-sdk, connected to the router at `endpoint`.

    zenoh-ros2-sdk keeps one session per process; the peer opens it for its router and closes it
    on `close()` (the fixture does), so each test's peer is on that test's router.
    """

    def __init__(self, endpoint: str, domain_id: int = 0, node_name: str = "independent_peer"):
        host, port = endpoint.removeprefix("tcp/").rsplit(":", 1)
        if ZenohSession._instance is not None:  # one left open by a test that failed
            ZenohSession._instance.close()
        self.host, self.port = host, int(port)
        self.domain_id = domain_id
        self.node_name = node_name
        self.session = ZenohSession.get_instance(self.host, self.port)
        self._endpoints: list[ROS2Publisher | ROS2Subscriber] = []
        self._raw: list[Any] = []
        # The graph as rmw_zenoh's graph cache keeps it: a liveliness subscription (with the
        # tokens already there) that adds each token as it appears and drops it as it goes.
        self._tokens: set[str] = set()
        self._tokens_lock = threading.Lock()
        self._graph = self.session.liveliness.declare_subscriber(
            f"@ros2_lv/{domain_id}/**", self._on_token, history=True
        )

    def __enter__(self) -> Peer:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def _where(self) -> dict[str, Any]:
        return {
            "domain_id": self.domain_id,
            "router_ip": self.host,
            "router_port": self.port,
            "node_name": self.node_name,
        }

    def publisher(self, topic: str, msgtype: str, *, qos: str | None = None) -> ROS2Publisher:
        """A publisher of `msgtype` on `topic` (QoS: an rmw_zenoh QoS string, default the sdk's)."""
        publisher = ROS2Publisher(
            topic,
            msgtype,
            msg_definition=definition(msgtype),
            type_hash=type_hash(msgtype),
            qos=qos,
            **self._where(),
        )
        self._endpoints.append(publisher)
        return publisher

    @staticmethod
    def publish(publisher: ROS2Publisher, message: Any) -> None:
        """Publish `message` (a rosbags message object of the publisher's type)."""
        publisher.publish(**{f.name: getattr(message, f.name) for f in dataclasses.fields(message)})

    def publish_until(
        self,
        publisher: ROS2Publisher,
        message: Any,
        done: Callable[[], object],
        timeout: float = 5.0,
    ) -> None:
        """Publish `message` every 50 ms until `done()` is truthy (discovery takes a moment)."""

        def published() -> object:
            self.publish(publisher, message)
            return wait_or_none(done, 0.05)

        wait_for(published, f"{publisher.topic} delivered", timeout)

    def subscribe(self, topic: str, msgtype: str, *, qos: str | None = None) -> Received:
        """A subscription to `topic`; what arrives collects in the returned `Received`."""
        received = Received(msgtype)
        subscriber = ROS2Subscriber(
            topic,
            msgtype,
            received.add,
            msg_definition=definition(msgtype),
            type_hash=type_hash(msgtype),
            qos=qos,
            **self._where(),
        )
        self._endpoints.append(subscriber)
        return received

    def raw(self, keyexpr: str) -> RawReceived:
        """Every sample on `keyexpr` (wildcards allowed) as bytes, attachment included."""
        received = RawReceived()
        self._raw.append(self.session.session.declare_subscriber(keyexpr, received.add))
        return received

    def put_raw(self, topic: str, msgtype: str, payload: bytes, attachment: bytes | None) -> None:
        """Put `payload` on `topic`'s data key expression for `msgtype`, as a publisher would."""
        key = f"{self.domain_id}/{topic.strip('/')}/{dds_type(msgtype)}/{type_hash(msgtype)}"
        self.session.session.put(
            key, payload, encoding=zenoh.Encoding("application/cdr"), attachment=attachment
        )

    def topic_info(self, topic: str) -> TopicInfo | None:
        """`ros2 topic info -v TOPIC` as the sdk reads the graph (publishers, subscribers, QoS)."""
        return get_topic_info(
            topic, self.domain_id, self.host, self.port, timeout=1.0, verbose=True
        )

    def _on_token(self, sample: zenoh.Sample) -> None:
        with self._tokens_lock:
            if sample.kind == zenoh.SampleKind.PUT:
                self._tokens.add(str(sample.key_expr))
            else:
                self._tokens.discard(str(sample.key_expr))

    def tokens(self) -> list[str]:
        """Every liveliness token of the domain now (the graph as rmw_zenoh sees it)."""
        with self._tokens_lock:
            return sorted(self._tokens)

    def nodes(self) -> list[tuple[str, str]]:
        """`ros2 node list`: (namespace, name) of every node token, demangled."""
        found = []
        for token in self.tokens():
            parts = token.split("/")
            if len(parts) == 9 and parts[5] == "NN":
                found.append((parts[7].replace("%", "/"), parts[8].replace("%", "/")))
        return sorted(found)

    def close(self) -> None:
        for endpoint in self._endpoints:
            endpoint.close()
        for subscriber in [*self._raw, self._graph]:
            subscriber.undeclare()
        self._endpoints.clear()
        self._raw.clear()
        self.session.close()


def wait_or_none(check: Callable[[], object], timeout: float) -> object:
    """`check()`'s first truthy value within `timeout` s, else None (for retry loops)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(0.01)
    return None
