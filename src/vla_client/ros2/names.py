"""The names rmw_zenoh puts on the wire: key expressions, type names and hashes, liveliness tokens.

A topic's samples travel on the key expression ``<domain>/<topic without its leading
slash>/<DDS type name>/<RIHS01 type hash>``, so a node that gets any of the parts wrong never
meets the others: the type hash above all (REP-2011's RIHS01, the sha256 of the type's
description), which rosbags computes from its Jazzy typestore.

The graph is made of liveliness tokens under ``@ros2_lv``: one per node
(``@ros2_lv/<domain>/<session id>/<node id>/<node id>/NN/<enclave>/<namespace>/<name>``) and one
per endpoint (``.../<node id>/<entity id>/MP|MS/<enclave>/<namespace>/<node name>/<topic>/<type
name>/<type hash>/<qos>``). Names are mangled: ``/`` becomes ``%`` (a key expression cannot hold
an empty part, so the root namespace ``/`` is ``%``). A node is on the graph while its tokens are.
"""

from __future__ import annotations

import re
from functools import cache
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    from rosbags.typesys.store import Typestore

    from vla_client.ros2.qos import QoS

ADMIN_SPACE = "@ros2_lv"
EndpointKind = Literal["MP", "MS"]  # a publisher, a subscription

# ROS 2 names (design article "Topic and Service name mapping"): tokens of letters, digits and
# underscores, not starting with a digit, joined by single slashes.
_TOKEN = r"[A-Za-z_][A-Za-z0-9_]*"
_NODE_NAME = re.compile(rf"^{_TOKEN}$")
_NAMESPACE = re.compile(rf"^(/{_TOKEN})*$")
_TOPIC = re.compile(rf"^/?{_TOKEN}(/{_TOKEN})*$")
_MSGTYPE = re.compile(rf"^{_TOKEN}/msg/{_TOKEN}$")


@cache
def typestore() -> Typestore:
    """rosbags' ROS 2 Jazzy typestore (built once): message classes, CDR and RIHS01 hashes."""
    from rosbags.typesys import Stores, get_typestore

    return get_typestore(Stores.ROS2_JAZZY)


def node_name(name: str) -> str:
    """`name` when it is a valid ROS 2 node name; ValueError saying why otherwise."""
    if not isinstance(name, str) or not _NODE_NAME.match(name):
        raise ValueError(
            f"node name {name!r}: use letters, digits and underscores, not starting with a digit"
        )
    return name


def namespace(value: str) -> str:
    """The absolute namespace for `value` ("" or "/" is the root, "/robot" or "robot" one down)."""
    if not isinstance(value, str):
        raise ValueError(f"namespace {value!r}: use a string such as '/robot' or ''")
    absolute = "/" + value.strip("/") if value.strip("/") else ""
    if not _NAMESPACE.match(absolute) or "//" in value:
        raise ValueError(
            f"namespace {value!r}: use names of letters, digits and underscores joined by '/'"
        )
    return absolute or "/"


def topic_name(topic: str, node_namespace: str = "/") -> str:
    """The fully qualified name of `topic`: absolute as given, relative under `node_namespace`."""
    if not isinstance(topic, str) or not _TOPIC.match(topic):
        raise ValueError(
            f"topic {topic!r}: use names of letters, digits and underscores joined by '/', "
            "such as '/camera/image_raw'"
        )
    if topic.startswith("/"):
        return topic
    return f"{node_namespace.rstrip('/')}/{topic}"


def msgtype(name: str) -> str:
    """`name` when rosbags' Jazzy typestore knows it as a message type; ValueError otherwise."""
    if not isinstance(name, str) or not _MSGTYPE.match(name):
        raise ValueError(f"message type {name!r}: write it as 'package/msg/Name'")
    if name not in typestore().types:
        raise ValueError(f"message type {name!r} is not one of ROS 2 Jazzy's standard messages")
    return name


def dds_type_name(name: str) -> str:
    """The type name on the wire: "sensor_msgs/msg/Image" is "sensor_msgs::msg::dds_::Image_"."""
    package, kind, message = msgtype(name).split("/")
    return f"{package}::{kind}::dds_::{message}_"


def type_hash(name: str) -> str:
    """`name`'s RIHS01 type hash in Jazzy, "RIHS01_" and 64 hex digits."""
    return str(typestore().hash_rihs01(msgtype(name)))


def mangle(name: str) -> str:
    """`name` as one part of a key expression: every "/" becomes "%" (and "" is "%")."""
    return name.replace("/", "%") or "%"


def data_keyexpr(domain_id: int, topic: str, name: str) -> str:
    """The key expression `topic`'s samples of type `name` travel on."""
    return f"{domain_id}/{topic.strip('/')}/{dds_type_name(name)}/{type_hash(name)}"


def topic_keyexpr_any_type(domain_id: int, topic: str) -> str:
    """Every type's key expression on `topic` (wildcards on the type name and hash)."""
    return f"{domain_id}/{topic.strip('/')}/*/*"


def node_token(domain_id: int, zid: str, node_id: int, node_namespace: str, name: str) -> str:
    """The node's liveliness token (the enclave is the root, "/", as rcl's default)."""
    return (
        f"{ADMIN_SPACE}/{domain_id}/{zid}/{node_id}/{node_id}/NN/%/"
        f"{mangle(node_namespace)}/{mangle(name)}"
    )


def endpoint_token(
    kind: EndpointKind,
    *,
    domain_id: int,
    zid: str,
    node_id: int,
    entity_id: int,
    node_namespace: str,
    node: str,
    topic: str,
    name: str,
    qos: QoS,
) -> str:
    """A publisher's ("MP") or subscription's ("MS") liveliness token."""
    return (
        f"{ADMIN_SPACE}/{domain_id}/{zid}/{node_id}/{entity_id}/{kind}/%/"
        f"{mangle(node_namespace)}/{mangle(node)}/{mangle(topic)}/"
        f"{dds_type_name(name)}/{type_hash(name)}/{qos.token()}"
    )
