"""A ROS 2 node on an rmw_zenoh graph: one Zenoh session, its liveliness tokens, its endpoints.

`Node` opens a Zenoh session in peer mode connected to the router (rmw_zenohd's
``tcp/localhost:7447`` by default), as every rmw_zenoh context does, and declares the node's
liveliness token; `advertise` and `subscribe` add endpoints with theirs, so ``ros2 node list``
and ``ros2 topic info -v`` show the node with its types, hashes and QoS. `close()` undeclares
every token and closes the session: the node leaves the graph. It is safe to call twice and
from a signal handler (it takes no lock that the node's readers hold).

Samples arrive on Zenoh's threads. A `Subscription` keeps the newest ``qos.depth`` of them as an
immutable tuple that a callback replaces; the caller reads it (`latest`, `recent`) whenever it
likes, and no code of the caller ever runs on Zenoh's threads. A subscription listens to its
topic under every type name (a wildcard on the type part), so that a publisher of another type,
or of another version of the type (another hash), is seen and refused, never handed on: so are
payloads that are not CDR of the type and malformed attachments (`refused`, `last_refusal`).
"""

from __future__ import annotations

import hashlib
import itertools
import re
import threading
import time
from dataclasses import dataclass
from typing import Any

import zenoh
import zenoh.ext

from vla_client.errors import ConnectError
from vla_client.ros2 import names
from vla_client.ros2.attachment import Attachment
from vla_client.ros2.qos import RELIABLE, SENSOR_DATA, QoS

__all__ = ["RELIABLE", "SENSOR_DATA", "Node", "Publisher", "QoS", "Sample", "Subscription"]

DEFAULT_ROUTER = "tcp/localhost:7447"
MAX_DOMAIN_ID = 232  # ROS_DOMAIN_ID's range (REP 2005 / the DDS port arithmetic)
_ENDPOINT = re.compile(r"^(tcp|udp|tls|quic|ws)/(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9_.-]+):(\d{1,5})$")


@dataclass(frozen=True)
class Sample:
    """One message taken from the graph."""

    message: Any  # the rosbags message object (deserialised CDR)
    received_at: float  # time.monotonic() when it arrived
    source_time_ns: int | None  # the publisher's clock (ns since the epoch), from the attachment
    sequence: int | None  # the publisher's sequence number, from the attachment


def _router_endpoint(router: str) -> str:
    match = _ENDPOINT.match(router) if isinstance(router, str) else None
    if match is None or not 0 < int(match.group(3)) < 65536:
        raise ValueError(
            f"router {router!r}: write a Zenoh endpoint such as {DEFAULT_ROUTER!r} "
            "(tcp/HOST:PORT, where rmw_zenohd listens)"
        )
    return router


def _domain(domain_id: int) -> int:
    if isinstance(domain_id, bool) or not isinstance(domain_id, int):
        raise ValueError(f"domain id {domain_id!r}: use a whole number 0-{MAX_DOMAIN_ID}")
    if not 0 <= domain_id <= MAX_DOMAIN_ID:
        raise ValueError(f"domain id {domain_id}: use 0-{MAX_DOMAIN_ID} (as ROS_DOMAIN_ID)")
    return domain_id


def _session_config(router: str, timeout_s: float) -> zenoh.Config:
    """rmw_zenoh's session defaults that matter here: a peer that connects to the router, listens
    on loopback for peers on this host, never scouts by multicast, and stamps its samples."""
    config: zenoh.Config = zenoh.Config()
    config.insert_json5("mode", '"peer"')
    config.insert_json5("connect/endpoints", f'["{router}"]')
    config.insert_json5("connect/timeout_ms", str(round(timeout_s * 1000)))
    config.insert_json5("connect/exit_on_failure", "true")
    config.insert_json5("listen/endpoints", '["tcp/localhost:0"]')
    config.insert_json5("scouting/multicast/enabled", "false")
    # rmw_zenoh stamps every sample (a transient-local publisher's cache needs it).
    config.insert_json5("timestamping/enabled", "true")
    return config


class Node:
    """A ROS 2 node on an rmw_zenoh graph; a context manager whose exit leaves the graph.

    `router` is the Zenoh router's endpoint; the node refuses to start (ConnectError) when none
    answers within `timeout_s`. `domain_id` is ROS_DOMAIN_ID's number.
    """

    def __init__(
        self,
        name: str,
        *,
        namespace: str = "",
        domain_id: int = 0,
        router: str = DEFAULT_ROUTER,
        timeout_s: float = 5.0,
    ) -> None:
        self.name = names.node_name(name)
        self.namespace = names.namespace(namespace)
        self.domain_id = _domain(domain_id)
        self.router = _router_endpoint(router)
        number = isinstance(timeout_s, int | float) and not isinstance(timeout_s, bool)
        if not number or not 0 < timeout_s < float("inf"):
            raise ValueError(f"timeout_s {timeout_s!r}: use a number of seconds > 0")
        try:
            self._session = zenoh.open(_session_config(self.router, timeout_s))
        except zenoh.ZError as error:
            raise ConnectError(
                f"no Zenoh router answered at {self.router} ({error}): start one "
                "(`ros2 run rmw_zenoh_cpp rmw_zenohd`) or name its endpoint",
                sent=False,
            ) from error
        self.zid = str(self._session.info.zid())
        # rmw_zenoh numbers the node and its entities from one counter per session.
        self._ids = itertools.count()
        self._node_id = next(self._ids)
        self._closed = False
        self._endpoints: list[Publisher | Subscription] = []
        self._token = self._session.liveliness().declare_token(
            names.node_token(self.domain_id, self.zid, self._node_id, self.namespace, self.name)
        )

    @property
    def closed(self) -> bool:
        return self._closed

    def __enter__(self) -> Node:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def _token_for(
        self, kind: names.EndpointKind, topic: str, msgtype: str, qos: QoS
    ) -> tuple[str, zenoh.LivelinessToken]:
        key = names.endpoint_token(
            kind,
            domain_id=self.domain_id,
            zid=self.zid,
            node_id=self._node_id,
            entity_id=next(self._ids),
            node_namespace=self.namespace,
            node=self.name,
            topic=topic,
            name=msgtype,
            qos=qos,
        )
        return key, self._session.liveliness().declare_token(key)

    def _check_open(self) -> None:
        if self._closed:
            raise RuntimeError(f"node {self.name!r} is closed (it has left the graph)")

    def advertise(self, topic: str, msgtype: str, *, qos: QoS = RELIABLE) -> Publisher:
        """A publisher of `msgtype` messages on `topic`, on the graph from now on."""
        publisher = Publisher(self, *self._endpoint(topic, msgtype, qos))
        self._endpoints.append(publisher)
        return publisher

    def subscribe(self, topic: str, msgtype: str, *, qos: QoS = SENSOR_DATA) -> Subscription:
        """A subscription to `topic`'s `msgtype` messages; it keeps the newest ``qos.depth``."""
        subscription = Subscription(self, *self._endpoint(topic, msgtype, qos))
        self._endpoints.append(subscription)
        return subscription

    def _endpoint(self, topic: str, msgtype: str, qos: QoS) -> tuple[str, str, QoS]:
        """A new endpoint's checked options: its fully qualified topic, its type, its QoS."""
        self._check_open()
        if not isinstance(qos, QoS):
            raise ValueError(f"qos {qos!r}: use a vla_client.ros2.graph.QoS")
        return names.topic_name(topic, self.namespace), names.msgtype(msgtype), qos

    def close(self) -> None:
        """Leave the graph: undeclare every token and endpoint, close the session. Idempotent."""
        if self._closed:
            return
        self._closed = True
        for endpoint in self._endpoints:
            endpoint._undeclare()
        self._token.undeclare()
        self._session.close()


class Publisher:
    """Publishes one message type on one topic (made by `Node.advertise`)."""

    def __init__(self, node: Node, topic: str, msgtype: str, qos: QoS) -> None:
        self.topic, self.msgtype, self.qos = topic, msgtype, qos
        self._node = node
        self._key = names.data_keyexpr(node.domain_id, topic, msgtype)
        self._token_key, self._token = node._token_for("MP", topic, msgtype, qos)
        # rmw_zenoh derives an entity's GID from a hash of its token; any 16 stable bytes do.
        self.gid = hashlib.sha256(self._token_key.encode()).digest()[:16]
        self._sequence = itertools.count(1)
        self._lock = threading.Lock()
        reliable = qos.reliability == "reliable"
        reliability = zenoh.Reliability.RELIABLE if reliable else zenoh.Reliability.BEST_EFFORT
        options: dict[str, Any] = {
            "reliability": reliability,
            "congestion_control": zenoh.CongestionControl.DROP,
        }
        self._publisher: zenoh.Publisher | zenoh.ext.AdvancedPublisher
        if qos.durability == "transient_local":  # late subscribers get the last `depth` samples
            self._publisher = zenoh.ext.declare_advanced_publisher(
                node._session,
                self._key,
                cache=zenoh.ext.CacheConfig(qos.depth),
                publisher_detection=True,
                **options,
            )
        else:
            self._publisher = node._session.declare_publisher(self._key, **options)

    def publish(self, message: Any) -> None:
        """Send `message`, a rosbags message object of this publisher's type."""
        self._node._check_open()
        kind = getattr(message, "__msgtype__", None)
        if kind != self.msgtype:
            raise ValueError(
                f"{self.topic} carries {self.msgtype}; this message is {kind or type(message)}"
            )
        try:
            payload = bytes(names.typestore().serialize_cdr(message, self.msgtype))
        except Exception as error:  # rosbags raises what the field's packing raises
            raise ValueError(
                f"{self.topic}: this {self.msgtype} cannot be serialised: {error}"
            ) from error
        with self._lock:  # one sequence number per sample, in the order they are put
            attachment = Attachment(next(self._sequence), time.time_ns(), self.gid)
            try:
                self._publisher.put(payload, attachment=attachment.encode())
            except zenoh.ZError:
                self._node._check_open()  # closed meanwhile (by a signal handler, say)
                raise

    def _undeclare(self) -> None:
        self._token.undeclare()
        self._publisher.undeclare()


class Subscription:
    """The newest samples of one topic's one message type (made by `Node.subscribe`).

    Nothing of the caller runs on Zenoh's threads: read `latest()` or `recent()` when you like.
    """

    def __init__(self, node: Node, topic: str, msgtype: str, qos: QoS) -> None:
        self.topic, self.msgtype, self.qos = topic, msgtype, qos
        self._key = names.data_keyexpr(node.domain_id, topic, msgtype)
        self._type_part, self._hash_part = self._key.rsplit("/", 2)[1:]
        self._recent: tuple[Sample, ...] = ()
        self._refusals: tuple[int, str | None] = (0, None)
        self._lock = threading.Lock()  # taken only by Zenoh's threads, never by a reader
        self._token_key, self._token = node._token_for("MS", topic, msgtype, qos)
        everything = names.topic_keyexpr_any_type(node.domain_id, topic)
        self._subscriber: zenoh.Subscriber[None] | zenoh.ext.AdvancedSubscriber[None]
        if qos.durability == "transient_local":  # ask late-found publishers for their cache
            history = zenoh.ext.HistoryConfig(detect_late_publishers=True, max_samples=qos.depth)
            self._subscriber = zenoh.ext.declare_advanced_subscriber(
                node._session, everything, self._on_sample, history=history
            )
        else:
            self._subscriber = node._session.declare_subscriber(everything, self._on_sample)

    def latest(self) -> Sample | None:
        """The newest sample, or None before the first."""
        recent = self._recent
        return recent[-1] if recent else None

    def recent(self) -> tuple[Sample, ...]:
        """The newest ``qos.depth`` samples, oldest first."""
        return self._recent

    @property
    def refused(self) -> int:
        """How many samples were not taken (another type, undecodable CDR, bad attachment)."""
        return self._refusals[0]

    @property
    def last_refusal(self) -> str | None:
        """Why the last refused sample was refused, one line naming the topic."""
        return self._refusals[1]

    def _refuse(self, reason: str) -> None:
        with self._lock:
            self._refusals = (self._refusals[0] + 1, f"{self.topic}: {reason}")

    def _on_sample(self, sample: zenoh.Sample) -> None:
        """Runs on a Zenoh thread: decode, check, keep (or refuse). Never raises."""
        received_at = time.monotonic()
        try:
            self._take(sample, received_at)
        except Exception as error:  # a bug here must not kill Zenoh's thread silently
            self._refuse(f"sample not taken: {type(error).__name__}: {error}")

    def _take(self, sample: zenoh.Sample, received_at: float) -> None:
        if sample.kind != zenoh.SampleKind.PUT:
            self._refuse("a delete, not a message")
            return
        key = str(sample.key_expr)
        type_part, hash_part = key.rsplit("/", 2)[1:]
        if type_part != self._type_part:
            self._refuse(f"a publisher sends {type_part}, not {self._type_part}; refused")
            return
        if hash_part != self._hash_part:
            self._refuse(
                f"a publisher sends {type_part} with type hash {hash_part}, not Jazzy's "
                f"{self._hash_part}; refused"
            )
            return
        raw = sample.attachment
        attachment = None
        if raw is not None:
            try:
                attachment = Attachment.decode(raw.to_bytes())
            except ValueError as error:
                self._refuse(f"a malformed attachment: {error}")
                return
        try:
            message = names.typestore().deserialize_cdr(sample.payload.to_bytes(), self.msgtype)
        except Exception as error:  # rosbags raises whatever the truncated read hits
            self._refuse(f"a payload that is not CDR of {self.msgtype}: {error}")
            return
        taken = Sample(
            message=message,
            received_at=received_at,
            source_time_ns=None if attachment is None else attachment.source_time_ns,
            sequence=None if attachment is None else attachment.sequence,
        )
        with self._lock:
            self._recent = (*self._recent, taken)[-self.qos.depth :]

    def _undeclare(self) -> None:
        self._token.undeclare()
        self._subscriber.undeclare()
