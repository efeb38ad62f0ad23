"""Our node is on the graph as rmw_zenoh draws it, and leaves it on close().

The independent peer reads the graph from the liveliness tokens (as `ros2 node list` and
`ros2 topic info -v` do under rmw_zenoh): our node, its publishers and subscriptions with their
ROS type names, Jazzy's RIHS01 hashes and the QoS strings rmw_zenoh writes.
"""

from __future__ import annotations

import pytest
from peer import Peer, dds_type, type_hash, wait_for

from vla_client.ros2.graph import RELIABLE, SENSOR_DATA, Node, QoS


def test_the_node_and_its_endpoints_are_on_the_graph_with_types_hashes_and_qos(
    node: Node, peer: Peer
) -> None:
    node.subscribe("/camera/image_raw", "sensor_msgs/msg/Image", qos=SENSOR_DATA)
    node.advertise("/arm/commands", "std_msgs/msg/Float64MultiArray", qos=RELIABLE)

    assert ("/", "vla_client_test") in wait_for(peer.nodes, "our node in `ros2 node list`")
    camera = wait_for(lambda: peer.topic_info("/camera/image_raw"), "the camera topic")
    assert camera.topic_types == ["sensor_msgs/msg/Image"]
    [subscriber] = camera.subscribers
    assert (subscriber.node_name, subscriber.node_namespace) == ("vla_client_test", "/")
    assert subscriber.type_hash == type_hash("sensor_msgs/msg/Image")
    assert subscriber.qos == "2::,5:,:,:,,"  # best effort, keep last 5
    assert camera.publishers == []

    commands = wait_for(lambda: peer.topic_info("/arm/commands"), "the command topic")
    [publisher] = commands.publishers
    assert publisher.topic_type == "std_msgs/msg/Float64MultiArray"
    assert publisher.type_hash == type_hash("std_msgs/msg/Float64MultiArray")
    assert publisher.qos == "::,10:,:,:,,"  # reliable, volatile, keep last 10


def test_tokens_follow_rmw_zenohs_layout(node: Node, peer: Peer) -> None:
    node.advertise("/arm/commands", "std_msgs/msg/Float64MultiArray")
    node.subscribe("joint_states", "sensor_msgs/msg/JointState")

    def endpoint_tokens() -> list[str]:
        found = [t for t in peer.tokens() if f"/{node.zid}/" in t and len(t.split("/")) > 9]
        return found if len(found) == 2 else []

    ours = wait_for(endpoint_tokens, "our two endpoint tokens")
    node_token = f"@ros2_lv/0/{node.zid}/0/0/NN/%/%/vla_client_test"
    wait_for(lambda: node_token in peer.tokens(), "our node's token")
    float64 = "std_msgs/msg/Float64MultiArray"
    joints = "sensor_msgs/msg/JointState"
    assert sorted(ours) == [
        f"@ros2_lv/0/{node.zid}/0/1/MP/%/%/vla_client_test/%arm%commands/"
        f"{dds_type(float64)}/{type_hash(float64)}/::,10:,:,:,,",
        f"@ros2_lv/0/{node.zid}/0/2/MS/%/%/vla_client_test/%joint_states/"
        f"{dds_type(joints)}/{type_hash(joints)}/2::,5:,:,:,,",
    ]


def test_a_namespaced_node_on_another_domain(zenoh_router: str) -> None:
    with (
        Peer(zenoh_router, domain_id=7) as peer,
        Node("arm_driver", namespace="/robot/left", domain_id=7, router=zenoh_router) as node,
    ):
        node.advertise("status", "diagnostic_msgs/msg/DiagnosticArray")  # relative: namespaced
        assert ("/robot/left", "arm_driver") in wait_for(peer.nodes, "the namespaced node")
        info = wait_for(lambda: peer.topic_info("/robot/left/status"), "the relative topic")
        assert info.publishers[0].node_namespace == "/robot/left"
        assert node.advertise("/status", "std_msgs/msg/String").topic == "/status"


def test_close_leaves_the_graph_and_is_idempotent(zenoh_router: str, peer: Peer) -> None:
    node = Node("leaving", router=zenoh_router)
    node.subscribe("/camera/image_raw", "sensor_msgs/msg/Image")
    publisher = node.advertise("/arm/commands", "std_msgs/msg/Float64MultiArray")
    wait_for(lambda: peer.topic_info("/arm/commands"), "the node's publisher")
    wait_for(lambda: any(node.zid in token for token in peer.tokens()), "our tokens")

    node.close()
    wait_for(lambda: not any(node.zid in t for t in peer.tokens()), "every token of ours gone")
    assert peer.topic_info("/arm/commands") is None
    assert ("/", "leaving") not in peer.nodes()
    node.close()  # a second close (a signal after a normal exit, say) does nothing
    assert node.closed
    with pytest.raises(RuntimeError, match="closed"):
        publisher.publish(None)
    with pytest.raises(RuntimeError, match="closed"):
        node.advertise("/again", "std_msgs/msg/String")


def test_the_context_manager_leaves_the_graph_on_an_exception(
    zenoh_router: str, peer: Peer
) -> None:
    with pytest.raises(KeyError), Node("crashing", router=zenoh_router) as node:
        wait_for(lambda: ("/", "crashing") in peer.nodes(), "the node")
        raise KeyError("the loop failed")
    assert node.closed
    wait_for(lambda: ("/", "crashing") not in peer.nodes(), "the node gone")


@pytest.mark.parametrize(
    ("qos", "token"),
    [
        (SENSOR_DATA, "2::,5:,:,:,,"),
        (RELIABLE, "::,10:,:,:,,"),
        (QoS("reliable", "transient_local", 1), ":1:,1:,:,:,,"),
        (QoS("best_effort", "volatile", 42), "2::,:,:,:,,"),  # rmw_zenoh's default depth
    ],
)
def test_qos_strings_are_rmw_zenohs(qos: QoS, token: str) -> None:
    assert qos.token() == token
