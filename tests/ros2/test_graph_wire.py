"""What travels beside the payload, and what a subscription refuses instead of handing on.

The attachment our publisher writes is read off the wire by a plain Zenoh subscriber: sequence
numbers from 1, the source clock in ns, a 16-byte GID behind its length byte. Samples that are
not the subscription's type (another type name on the topic, another hash of the same name),
payloads that are not CDR of the type, and malformed attachments are counted and named in
`last_refusal`, and never appear in `latest()` or `recent()`.
"""

from __future__ import annotations

import struct
import time
from collections.abc import Callable

import numpy as np
import pytest
import zenoh
from peer import JAZZY, Peer, dds_type, type_hash, wait_for

from vla_client.ros2.attachment import Attachment
from vla_client.ros2.graph import Node, Subscription

STRING = "std_msgs/msg/String"
FLOAT64 = "std_msgs/msg/Float64MultiArray"


def string(text: str) -> object:
    return JAZZY.types[STRING](data=text)


def test_the_attachment_is_well_formed(node: Node, peer: Peer) -> None:
    wire = peer.raw("0/chatter/**")
    publisher = node.advertise("/chatter", STRING)
    before = time.time_ns()
    published = 0

    def three_on_the_wire() -> bool:
        nonlocal published
        publisher.publish(string("hello"))
        published += 1
        return len(wire.samples) >= 3

    wait_for(three_on_the_wire, "three samples on the wire")
    after = time.time_ns()
    samples = wire.wait(3)
    assert {s.key for s in samples} == {f"0/chatter/{dds_type(STRING)}/{type_hash(STRING)}"}
    decoded = []
    for sample in samples:
        assert sample.attachment is not None
        sequence, stamp, length = struct.unpack_from("<QQB", sample.attachment)
        assert length == 16 and len(sample.attachment) == 8 + 8 + 1 + 16
        assert before <= stamp <= after
        decoded.append((sequence, sample.attachment[17:]))
    # The first few samples may go out before the peer's subscription is matched; the
    # sequence still counts from 1, one per publish, so what arrives is a consecutive run.
    sequences = [sequence for sequence, _ in decoded]
    first = sequences[0]
    assert first >= 1 and sequences[:3] == [first, first + 1, first + 2]
    assert sequences[-1] <= published
    assert {gid for _, gid in decoded} == {publisher.gid}
    assert sum(s.payload == bytes(JAZZY.serialize_cdr(string("hello"), STRING)) for s in samples)


def test_the_source_time_and_sequence_reach_the_sample(node: Node, peer: Peer) -> None:
    subscription = node.subscribe("/chatter", STRING)
    stamp = 1_765_000_000_123_456_789
    gid = bytes(range(16))

    def delivered() -> object:
        peer.put_raw("/chatter", STRING, _cdr("x"), Attachment(41, stamp, gid).encode())
        return subscription.latest()

    wait_for(delivered, "a sample with our attachment")
    sample = subscription.latest()
    assert sample is not None
    assert (sample.sequence, sample.source_time_ns) == (41, stamp)
    assert sample.received_at <= time.monotonic()


def test_a_sample_without_an_attachment_is_taken_without_its_times(node: Node, peer: Peer) -> None:
    subscription = node.subscribe("/chatter", STRING)

    def delivered() -> object:
        peer.put_raw("/chatter", STRING, _cdr("y"), None)
        return subscription.latest()

    wait_for(delivered, "the sample")
    sample = subscription.latest()
    assert sample is not None and sample.message.data == "y"
    assert (sample.sequence, sample.source_time_ns) == (None, None)


def _cdr(text: str) -> bytes:
    return bytes(JAZZY.serialize_cdr(string(text), STRING))


def _refused_after(subscription: Subscription, send: Callable[[], object], what: str) -> str:
    """Send (repeatedly, discovery takes a moment) until the subscription refuses; its reason."""

    def refused() -> bool:
        send()
        return subscription.refused > 0

    wait_for(refused, what)
    assert subscription.latest() is None
    assert subscription.recent() == ()
    reason = subscription.last_refusal
    assert isinstance(reason, str) and reason.startswith("/commands: ")
    return reason


def test_a_payload_that_is_not_cdr_of_the_type_is_refused(node: Node, peer: Peer) -> None:
    subscription = node.subscribe("/commands", FLOAT64)
    attachment = Attachment(1, time.time_ns(), bytes(16)).encode()
    truncated = bytes(JAZZY.serialize_cdr(_float64([1.0, 2.0, 3.0]), FLOAT64))[:-5]
    reason = _refused_after(
        subscription,
        lambda: peer.put_raw("/commands", FLOAT64, truncated, attachment),
        "the truncated payload refused",
    )
    assert f"not CDR of {FLOAT64}" in reason


def test_another_type_on_the_topic_is_refused(node: Node, peer: Peer) -> None:
    subscription = node.subscribe("/commands", FLOAT64)
    publisher = peer.publisher("/commands", STRING)
    reason = _refused_after(
        subscription, lambda: peer.publish(publisher, string("1.0")), "the String refused"
    )
    assert f"sends {dds_type(STRING)}, not {dds_type(FLOAT64)}" in reason


def test_another_hash_of_the_same_type_name_is_refused(node: Node, peer: Peer) -> None:
    subscription = node.subscribe("/commands", FLOAT64)
    other_hash = "RIHS01_" + "0" * 64  # another distribution's (or a changed) definition
    key = f"0/commands/{dds_type(FLOAT64)}/{other_hash}"
    payload = bytes(JAZZY.serialize_cdr(_float64([1.0]), FLOAT64))
    reason = _refused_after(
        subscription, lambda: peer.session.session.put(key, payload), "the other hash refused"
    )
    assert other_hash in reason


def test_a_malformed_attachment_is_refused(node: Node, peer: Peer) -> None:
    subscription = node.subscribe("/commands", FLOAT64)
    payload = bytes(JAZZY.serialize_cdr(_float64([1.0]), FLOAT64))
    reason = _refused_after(
        subscription,
        lambda: peer.put_raw("/commands", FLOAT64, payload, b"\x01\x02\x03"),
        "the short attachment refused",
    )
    assert "malformed attachment" in reason


def test_good_samples_are_still_taken_after_refusals(node: Node, peer: Peer) -> None:
    subscription = node.subscribe("/commands", FLOAT64)
    wrong = peer.publisher("/commands", STRING)
    right = peer.publisher("/commands", FLOAT64)
    _refused_after(subscription, lambda: peer.publish(wrong, string("x")), "the String refused")
    peer.publish_until(right, _float64([0.5, 0.25]), subscription.latest)
    sample = subscription.latest()
    assert sample is not None and list(sample.message.data) == [0.5, 0.25]


def _float64(values: list[float]) -> object:
    layout = JAZZY.types["std_msgs/msg/MultiArrayLayout"](dim=[], data_offset=0)
    return JAZZY.types[FLOAT64](layout=layout, data=np.array(values, dtype=np.float64))


def test_the_attachment_is_what_zenohs_serializer_writes_for_rmw_zenoh() -> None:
    """rmw_zenoh serializes (int64, int64, std::array<uint8_t, 16>) with Zenoh's serializer;
    zenoh-python's serializer is the oracle both ways."""
    from zenoh.ext import Int64, UInt8, z_deserialize, z_serialize

    gid = bytes(range(16))
    ours = Attachment(5, 1_765_000_000_123_456_789, gid).encode()
    theirs = z_serialize((Int64(5), Int64(1_765_000_000_123_456_789), [UInt8(b) for b in gid]))
    assert ours == theirs.to_bytes()
    assert Attachment.decode(theirs.to_bytes()) == Attachment(5, 1_765_000_000_123_456_789, gid)
    read = z_deserialize(tuple[Int64, Int64, list[UInt8]], zenoh.ZBytes(ours))
    assert (int(read[0]), int(read[1]), bytes(int(b) for b in read[2])) == (
        5, 1_765_000_000_123_456_789, gid,
    )  # fmt: skip


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b"\x01\x02\x03", "an attachment of 3 bytes"),
        (struct.pack("<QQB", 1, 2, 8) + bytes(8), "an attachment of 25 bytes"),
        (struct.pack("<QQB", 1, 2, 15) + bytes(16), "GID length says 15, not 16"),
        (struct.pack("<QQB", 1, 2, 16) + bytes(17), "an attachment of 34 bytes"),
    ],
)
def test_attachments_rmw_zenoh_would_not_read_are_refused(data: bytes, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        Attachment.decode(data)
    with pytest.raises(ValueError, match="a GID of 8 bytes: rmw_zenoh's are 16"):
        Attachment(1, 2, bytes(8)).encode()
