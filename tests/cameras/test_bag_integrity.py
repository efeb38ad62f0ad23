"""A bag's storage checks itself before it is replayed: MCAP chunk CRCs, SQLite's structure."""

from __future__ import annotations

import logging

import numpy as np
import pytest

from ros_bags import add_chunk_crcs, damage_chunk, frames, mcap_chunks, write_bag
from vla_client.cameras.ros_bag import BagSource
from vla_client.errors import RecordingError

pytest.importorskip("rosbags")

STAMPS = [1.0 + 0.1 * i for i in range(12)]


def big_frames_bag(path, **options):
    """12 frames of 240x320 rgb8 on /cam: rosbags' writer closes a chunk past 1 MiB, so the
    chunks hold frames 0-4, 5-9 and 10-11."""
    images = frames(12, height=240, width=320)
    return images, write_bag(path, "mcap", {"/cam": ("rgb8", images, STAMPS)}, **options)


def test_a_damaged_chunk_is_left_out_and_counted_and_the_rest_is_exact(tmp_path, caplog):
    images, bag = big_frames_bag(tmp_path / "b")
    assert len(mcap_chunks(bag)) == 3
    add_chunk_crcs(bag)
    damage_chunk(bag, 1)  # 64 random bytes inside frames 5-9
    with caplog.at_level(logging.WARNING, logger="vla_client.cameras.ros_bag"):
        source = BagSource(bag, {"/cam": "cam"})
    integrity = source.integrity
    assert (integrity.checked_chunks, integrity.damaged_chunks) == (2, 1)
    assert (integrity.lost_messages, integrity.unchecked_chunks) == (5, 0)
    kept = [0, 1, 2, 3, 4, 10, 11]
    assert source.stamps == pytest.approx([STAMPS[k] for k in kept])
    steps = list(source)
    assert len(steps) == 7
    for k, step in zip(kept, steps, strict=True):
        np.testing.assert_array_equal(step.images["cam"], images[k])
    (warning,) = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert warning.getMessage() == (
        f"bag {bag}: 1 damaged MCAP chunk(s) left out (CRC or size mismatch): 5 message(s) of "
        "the chosen topics lost"
    )


def test_a_damaged_chunk_of_another_topic_loses_no_chosen_message(tmp_path):
    images = frames(12, height=240, width=320)
    bag = write_bag(
        tmp_path / "b", "mcap",
        {"/cam": ("rgb8", images[:2], STAMPS[:2]), "/other": ("rgb8", images, STAMPS)},
    )  # fmt: skip
    add_chunk_crcs(bag)
    damage_chunk(bag, 2)  # frames 8-11 of /other only
    source = BagSource(bag, {"/cam": "cam"})
    assert (source.integrity.damaged_chunks, source.integrity.lost_messages) == (1, 0)
    assert len(list(source)) == 2


@pytest.mark.parametrize("at_start", [False, True], ids=["inside", "frame-header"])
def test_a_compressed_chunk_that_no_longer_decompresses_is_damaged(tmp_path, at_start):
    """zstd chunks: damage inside the compressed data, or over the zstd frame's header (the
    decompressor's own error), leaves the chunk out like a CRC that does not match."""
    images, bag = big_frames_bag(tmp_path / "b", compression="zstd")
    chunks = len(mcap_chunks(bag))
    add_chunk_crcs(bag)
    damage_chunk(bag, chunks - 1, count=16, at_start=at_start)
    source = BagSource(bag, {"/cam": "cam"})
    assert (source.integrity.damaged_chunks, source.integrity.checked_chunks) == (1, chunks - 1)
    steps = list(source)
    assert 0 < len(steps) == 12 - source.integrity.lost_messages
    for step in steps:
        k = STAMPS.index(step.capture_times["cam"])
        np.testing.assert_array_equal(step.images["cam"], images[k])


def test_without_crcs_the_damage_cannot_be_seen_and_the_chunks_are_counted_unchecked(tmp_path):
    """rosbags' writer writes no chunk CRC: what the bag cannot say is said, not guessed."""
    _, bag = big_frames_bag(tmp_path / "b")
    damage_chunk(bag, 1)
    source = BagSource(bag, {"/cam": "cam"})
    assert (source.integrity.unchecked_chunks, source.integrity.checked_chunks) == (3, 0)
    assert source.integrity.damaged_chunks == 0 and len(list(source)) == 12


def test_an_undamaged_bag_with_crcs_reads_whole(tmp_path):
    images, bag = big_frames_bag(tmp_path / "b")
    source = BagSource(add_chunk_crcs(bag), {"/cam": "cam"})
    assert (source.integrity.checked_chunks, source.integrity.damaged_chunks) == (3, 0)
    for image, step in zip(images, source, strict=True):
        np.testing.assert_array_equal(step.images["cam"], image)


def test_a_sqlite_bag_with_a_broken_structure_is_refused(tmp_path):
    """SQLite checks its pages and b-trees (no message carries a checksum in rosbag2's
    sqlite3 storage): a database whose structure is overwritten is refused."""
    stamps = [1.0 + 0.1 * i for i in range(40)]
    bag = write_bag(tmp_path / "b", "sqlite3", {"/cam": ("rgb8", frames(40, 64, 64), stamps)})
    database = next(bag.glob("*.db3"))
    data = bytearray(database.read_bytes())
    page = int.from_bytes(data[16:18], "big")
    data[page * 10 : page * 10 + 64] = np.random.default_rng(0).bytes(64)  # a b-tree page's
    database.write_bytes(bytes(data))
    with pytest.raises(RecordingError) as refused:
        BagSource(bag, {"/cam": "cam"})
    assert str(refused.value).startswith(
        f"bag {bag}: b.db3 fails SQLite's integrity check: On tree page "
    )
    assert "\n" not in str(refused.value)


@pytest.mark.parametrize(
    ("chunk", "handed", "reason"),
    [(1, 5, "/cam"), (2, 10, "2 step(s) lost their messages")],
)
def test_a_chunk_damaged_after_the_bag_was_read_ends_the_replay_with_an_error(
    tmp_path, chunk, handed, reason
):
    """The replay reads the bag again: a chunk damaged in between is left out there too, and
    the steps that needed it are neither handed out nor silently dropped."""
    _, bag = big_frames_bag(tmp_path / "b")
    source = BagSource(add_chunk_crcs(bag), {"/cam": "cam"})
    damage_chunk(bag, chunk)
    replay = iter(source)
    assert len([next(replay) for _ in range(handed)]) == handed  # the undamaged chunks' frames
    with pytest.raises(RecordingError) as refused:
        next(replay)
    assert str(refused.value) == f"bag {bag} changed while it was read: {reason}"
