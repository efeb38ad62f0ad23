"""Shared-memory slots on their own, in this process: layouts, segments, slots, leases, the pool
and the worker's attachments. The round trips through a worker process are in test_worker.py."""

from __future__ import annotations

import errno
import json
import logging
import mmap
import os
import pickle
import stat
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
from numpy.lib.stride_tricks import as_strided
from small_shm import in_small_shm, require_small_shm

import vla_client
from vla_client.errors import InferenceError
from vla_client.server.worker.shm import (
    MIN_SLOT_BYTES,
    RECENT_REQUESTS,
    SEGMENT_PREFIX,
    ArrayLayout,
    Attachments,
    Segment,
    Slot,
    SlotPool,
    plan_layout,
    shm_space,
    slot_size,
    view,
    write_arrays,
)

MIB = 1 << 20


def on_disk(name: str) -> bool:
    return os.path.exists(f"/dev/shm/{name}")


def open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


@pytest.fixture
def name(request: pytest.FixtureRequest) -> Iterator[str]:
    """A segment name of this test's own; what starts with it is removed afterwards."""
    name = f"{SEGMENT_PREFIX}{os.getpid()}_unit_{request.node.name[:40]}"
    yield name
    for left in os.listdir("/dev/shm"):
        if left.startswith(name):
            os.unlink(f"/dev/shm/{left}")


def test_layouts_start_at_the_next_64_byte_boundary_and_leave_room_for_each_array() -> None:
    arrays: dict[str, np.ndarray] = {
        "a": np.zeros(65, np.uint8), "b": np.zeros(3, np.float64), "c": np.zeros(0)
    }  # fmt: skip
    layouts, end = plan_layout(arrays, start=1)
    # 1 rounds up to 64; 64 + 65 bytes ends at 129, rounds up to 192; 192 + 24 = 216 -> 256.
    assert [(lay.key, lay.offset) for lay in layouts] == [("a", 64), ("b", 192), ("c", 256)]
    assert end == 256
    assert layouts[1] == ArrayLayout("b", "<f8", (3,), 192)
    assert plan_layout(arrays, start=64)[0][0].offset == 64  # an aligned start stays
    assert plan_layout(arrays)[0][0].offset == 0  # from the start of the slot by default
    assert plan_layout({}, start=0) == ([], 0)


def test_a_view_reads_the_array_at_its_layout_offset() -> None:
    buffer = memoryview(bytearray(256))
    buffer[128:136] = np.arange(2, dtype="<i4").tobytes()
    array = view(buffer, ArrayLayout("x", "<i4", (2, 1), 128))
    assert array.tolist() == [[0], [1]]
    array[1, 0] = 7
    assert bytes(buffer[132:136]) == (7).to_bytes(4, "little")  # a view, not a copy


def test_written_arrays_read_back_where_the_planned_layouts_say() -> None:
    arrays: dict[str, np.ndarray] = {
        "a": np.arange(5, dtype=np.uint8), "b": np.linspace(0, 1, 3, dtype=np.float32)
    }  # fmt: skip
    buffer = memoryview(bytearray(256))
    layouts = write_arrays(buffer, arrays)
    assert layouts == plan_layout(arrays)[0]
    assert bytes(buffer[:5]) == bytes(range(5))
    assert bytes(buffer[64:76]) == arrays["b"].tobytes()


def test_writing_arrays_refuses_layouts_that_do_not_match_them() -> None:
    arrays = {"a": np.ones(4, np.float32), "b": np.ones(4, np.float32)}
    layouts, end = plan_layout(arrays)
    buffer = memoryview(bytearray(end))
    with pytest.raises(ValueError):  # one layout for two arrays: nothing is written silently
        write_arrays(buffer, arrays, layouts[:1])
    wrong_dtype = {"a": np.ones(4, np.float64), "b": np.ones(4, np.float64)}
    with pytest.raises(TypeError):  # no casting: float64 into a float32 layout
        write_arrays(buffer, wrong_dtype, layouts)


def test_a_created_segment_has_its_size_is_private_and_its_name_is_taken(name: str) -> None:
    segment = Segment.create(name, 3000)
    try:
        assert segment.name == name and segment.size == len(segment.buf) == 3000
        assert os.stat(f"/dev/shm/{name}").st_size == 3000
        assert stat.S_IMODE(os.stat(f"/dev/shm/{name}").st_mode) == 0o600
        with pytest.raises(FileExistsError):
            Segment.create(name, 3000)
        assert on_disk(name), "a failed create leaves the existing segment alone"
    finally:
        segment.unlink()
        segment.close()
    assert not on_disk(name)


def reserved_bytes(name: str) -> int:
    """Bytes of pages /dev/shm has given segment `name`."""
    return os.stat(f"/dev/shm/{name}").st_blocks * 512


def test_a_created_segment_has_its_pages_reserved_and_discard_gives_them_back(name: str) -> None:
    # Sparse, a full /dev/shm would be found at the first write: SIGBUS, not an error.
    segment = Segment.create(name, 3 * MIN_SLOT_BYTES)
    try:
        assert reserved_bytes(name) == 3 * MIN_SLOT_BYTES
        held = np.frombuffer(segment.buf, np.uint8)  # a view: the mapping stays
        held[:10] = 1
        segment.discard(MIN_SLOT_BYTES + 1)  # from the next page on
        assert reserved_bytes(name) == 2 * MIN_SLOT_BYTES - (MIN_SLOT_BYTES - 4096)
        segment.discard()
        assert reserved_bytes(name) == 0 and held[:10].sum() == 0, "given back while viewed"
        del held
    finally:
        segment.unlink()
        segment.close()


def test_discarding_from_the_last_page_on_or_past_the_end_frees_nothing_and_raises_nothing(
    name: str,
) -> None:
    page = mmap.PAGESIZE
    segment = Segment.create(name, 2 * page)
    try:
        segment.discard(2 * page)
        segment.discard(2 * page - 100)  # rounds up to the end: nothing to give back
        segment.discard(3 * page)
        assert reserved_bytes(name) == 2 * page
        segment.discard(page - 100)  # rounds up to the second page
        assert reserved_bytes(name) == page
    finally:
        segment.unlink()
        segment.close()


def test_a_slot_whose_body_ends_in_its_last_page_still_grows() -> None:
    # The arrays decoded from a body that filled its slot need room after it: the slot grows,
    # and its old segment is discarded from the body's end on, which is the segment's end.
    pool = SlotPool(0)  # keeps no slot: each body below starts in a new 1 MiB one
    for body in (MIN_SLOT_BYTES, MIN_SLOT_BYTES - 100):
        lease = pool.lend()
        lease.reserve(body)[-3:] = b"end"
        old = lease.slot.name
        lease.slot.reserve(MIN_SLOT_BYTES + 1)
        assert lease.slot.size == slot_size(MIN_SLOT_BYTES + 1) and not on_disk(old)
        lease.release()
    pool.close()


def test_a_segment_that_cannot_be_mapped_leaves_no_name_and_no_descriptor(name: str) -> None:
    before = open_fds()
    with pytest.raises(ValueError):  # mmap refuses an empty file
        Segment.create(name, 0)
    assert not on_disk(name)
    assert open_fds() == before


def test_a_created_segment_keeps_no_descriptor_open(name: str) -> None:
    before = open_fds()
    segment = Segment.create(name, 4096)
    attached = Segment.attach(name)
    # The mapping itself keeps a duplicate descriptor before Python 3.13, one per segment.
    per_mapping = 0 if sys.version_info >= (3, 13) else 1
    assert open_fds() == before + 2 * per_mapping
    attached.close()
    segment.unlink()
    segment.close()
    assert open_fds() == before


def test_an_attached_segment_shares_the_memory_at_its_full_size(name: str) -> None:
    owner = Segment.create(name, 5000)
    worker = Segment.attach(name)
    assert worker.name == name and worker.size == len(worker.buf) == 5000
    worker.buf[4990:5000] = b"from-there"
    assert bytes(owner.buf[4990:5000]) == b"from-there"
    owner.buf[:4] = b"back"
    assert bytes(worker.buf[:4]) == b"back"
    assert worker.close() and owner.close()
    owner.unlink()


def test_closing_a_segment_that_is_still_viewed_waits_for_the_view(name: str) -> None:
    segment = Segment.create(name, 4096)
    segment.unlink()
    array = np.frombuffer(segment.buf, np.uint8)
    assert segment.close() is False
    array[0] = 9  # still mapped
    assert array[0] == 9
    del array
    assert segment.close() is True
    with pytest.raises(ValueError):
        segment.buf[0]  # the mapping is gone


def test_unlinking_a_segment_someone_else_removed_is_harmless(name: str) -> None:
    segment = Segment.create(name, 4096)
    os.unlink(f"/dev/shm/{name}")
    segment.unlink()
    assert segment.close()


# The owner's resource tracker unlinks what it created if the owner dies before unlinking it,
# and says nothing about segments the owner unlinked itself.
OWNER = """
import sys
from vla_client.server.worker.shm import Segment
kept = Segment.create(sys.argv[1] + "_kept", 4096)
done = Segment.create(sys.argv[1] + "_done", 4096)
done.unlink()
done.close()
print("ready", flush=True)
sys.exit(0)
"""


def test_the_owners_tracker_unlinks_what_it_did_not_and_nothing_else(name: str) -> None:
    # The same calls in this process too, so that mutation testing, which runs a test only
    # for the code it calls in the test's own process, runs this one for them.
    here = Segment.create(f"{name}_here", 4096)
    here.unlink()
    here.close()
    completed = subprocess.run(
        [sys.executable, "-c", OWNER, name], capture_output=True, text=True, timeout=60
    )
    assert completed.stdout == "ready\n", completed.stderr
    assert not on_disk(f"{name}_kept")
    assert not on_disk(f"{name}_done")
    # The tracker warns of one leaked segment: the one left for it.
    assert "There appear to be 1 leaked shared_memory" in completed.stderr, completed.stderr


def test_a_slot_before_reserve_has_no_segment_and_says_so() -> None:
    slot = Slot("tag", 0, [])
    assert not slot.fits(0)
    assert slot.used == slot.needed == slot.size == 0
    assert slot.locate(np.zeros(4)) is None
    with pytest.raises(AssertionError, match="before reserve"):
        slot.name  # noqa: B018
    with pytest.raises(AssertionError, match="before reserve"):
        slot.buffer  # noqa: B018
    slot.release()  # nothing to release: no error


def test_a_slot_is_at_least_a_mebibyte_and_grows_by_eighths_of_a_power_of_two() -> None:
    assert [slot_size(n) for n in (0, 1, MIN_SLOT_BYTES)] == [MIN_SLOT_BYTES] * 3
    mib = MIN_SLOT_BYTES
    assert slot_size(mib + 1) == mib + mib // 4  # 2 MiB in eighths: steps of 256 KiB
    assert slot_size(4 * mib) == 4 * mib  # a power of two is big enough as it is
    assert slot_size(4 * mib + 1) == 5 * mib  # 8 MiB in eighths: steps of 1 MiB
    assert slot_size(40_000_000) == 40 * mib  # at most an eighth unused
    forgotten: list[int] = []
    slot = Slot(f"{os.getpid()}_grow", 3, forgotten)
    try:
        slot.reserve(1)
        assert len(slot.buffer) == MIN_SLOT_BYTES == slot.size
        assert forgotten == [], "a first segment replaces nothing"
        assert slot.fits(MIN_SLOT_BYTES) and not slot.fits(MIN_SLOT_BYTES + 1)
        first = slot.name
        slot.reserve(MIN_SLOT_BYTES)  # fits: same segment
        assert slot.name == first
        slot.reserve(4 * MIN_SLOT_BYTES)
        assert len(slot.buffer) == 4 * MIN_SLOT_BYTES
        assert forgotten == [3], "the worker must unmap the old segment"
        second = slot.name
        slot.reserve(4 * MIN_SLOT_BYTES + 1)
        assert len(slot.buffer) == 5 * MIN_SLOT_BYTES
        assert forgotten == [3, 3]
        assert slot.needed == 4 * MIN_SLOT_BYTES + 1, "the most it was asked for"
        assert len({first, second, slot.name}) == 3, "a grown slot has a new name"
        assert not on_disk(first) and not on_disk(second) and on_disk(slot.name)
        assert slot.name.startswith(f"{SEGMENT_PREFIX}{os.getpid()}_grow_3_")
    finally:
        slot.release()


def test_a_slot_that_grows_or_is_released_forgets_its_body() -> None:
    slot = Slot(f"{os.getpid()}_used", 0, [])
    slot.reserve(10)
    slot.used = 10
    slot.reserve(2 * MIN_SLOT_BYTES)
    assert slot.used == 0
    slot.used = 10
    slot.reset()
    assert slot.used == 0 and slot.needed == 0, "the pool sizes idle slots by `needed`"
    slot.used = 10
    name = slot.name
    slot.release()
    assert slot.used == 0 and not on_disk(name) and not slot.fits(0)


def test_a_slot_locates_arrays_at_its_first_and_last_bytes_only() -> None:
    slot = Slot(f"{os.getpid()}_locate", 0, [])
    slot.reserve(1)
    size = len(slot.buffer)
    try:
        assert slot.locate(np.frombuffer(slot.buffer, np.uint8, count=8)) == 0
        last = np.frombuffer(slot.buffer, np.float32, offset=size - 8)
        assert slot.locate(last) == size - 8
        # Claims to run 4 bytes past the end (never read): not wholly inside.
        past = as_strided(last[1:], shape=(2,), strides=(4,))
        assert slot.locate(past) is None
        before = np.zeros(2, np.uint8)
        assert slot.locate(before) is None
        misaligned = np.frombuffer(slot.buffer, np.float32, count=2, offset=6)
        assert slot.locate(misaligned) is None
        del last, past, misaligned
    finally:
        slot.release()


def test_a_lease_hands_out_the_body_view_and_frees_it_when_the_last_hold_goes() -> None:
    pool = SlotPool(1)
    lease = pool.lend()
    body = lease.reserve(100)
    assert len(body) == 100 and not body.readonly
    assert lease.slot.used == 100
    body[:5] = b"hello"
    assert bytes(lease.slot.buffer[:5]) == b"hello"
    lease.hold()  # a job in the worker
    lease.release()  # the entrypoint is done
    assert pool.in_use == 1 and bytes(body[:5]) == b"hello", "the job still holds the slot"
    lease.release()
    assert pool.in_use == 0 and lease.slot.used == 0
    with pytest.raises(ValueError):
        body[0]  # released
    with pytest.raises(AssertionError, match=r"^lease released more often than held$"):
        lease.release()
    pool.close()


def test_a_lease_whose_body_is_still_viewed_gives_the_slot_back_anyway() -> None:
    pool = SlotPool(0)
    lease = pool.lend()
    # A consumer that holds the body's buffer itself, so the view cannot be released now.
    held = pickle.PickleBuffer(lease.reserve(64))
    name = lease.slot.name
    lease.release()  # no BufferError
    assert pool.in_use == 0 and not on_disk(name)
    held.raw()[0] = 1  # still mapped until `held` goes
    held.release()
    pool.close()


def test_a_lease_released_without_a_body_gives_the_slot_back() -> None:
    pool = SlotPool(1)
    lease = pool.lend()
    lease.release()
    assert pool.in_use == 0
    assert pool.lend().slot is lease.slot
    pool.close()


def test_the_pool_keeps_idle_slots_up_to_keep_and_lends_them_again() -> None:
    pool = SlotPool(2)
    assert pool._tag.startswith(f"{os.getpid()}_")
    leases = [pool.lend() for _ in range(3)]
    assert [lease.slot.index for lease in leases] == [0, 1, 2]
    assert [lease.slot.used for lease in leases] == [0, 0, 0]
    assert pool.in_use == 3
    for lease in leases:
        lease.reserve(10)
    names = [lease.slot.name for lease in leases]
    # Named after this process, so a leak on /dev/shm says whose it is.
    assert all(n.startswith(f"{SEGMENT_PREFIX}{pool._tag}_") for n in names)
    assert pool.slot(1) is leases[1].slot
    for lease in leases:
        lease.release()
    assert pool.in_use == 0
    # The longest idle goes: the last two given back are kept.
    assert [on_disk(n) for n in names] == [False, True, True], "two kept, the first unlinked"
    assert pool.take_forgotten() == (0,)
    assert pool.take_forgotten() == (), "each index is handed over once"
    with pytest.raises(KeyError):
        pool.slot(0)
    again = pool.lend()
    assert again.slot is leases[2].slot and again.slot.name == names[2], "reused, not remade"
    assert pool.in_use == 1
    pool.close()
    assert not any(on_disk(n) for n in names)


def test_idle_slots_shrink_to_what_recent_requests_needed_in_number_and_size() -> None:
    pool = SlotPool(32)
    burst = [pool.lend() for _ in range(4)]
    for lease in burst:
        lease.reserve(3 * MIN_SLOT_BYTES)
    names = [lease.slot.name for lease in burst]
    for lease in burst:
        lease.release()
    assert all(on_disk(n) for n in names), "right after the burst, its slots are kept"
    assert pool.reserved_bytes == 4 * 3 * MIN_SLOT_BYTES
    for _ in range(RECENT_REQUESTS):  # small requests, one at a time
        lease = pool.lend()
        lease.reserve(100)
        lease.release()
    assert not any(on_disk(n) for n in names)
    assert set(pool.take_forgotten()) >= {0, 1, 2, 3}, "the worker unmaps each one"
    lease = pool.lend()
    lease.reserve(100)
    lease.release()
    assert pool.reserved_bytes == MIN_SLOT_BYTES, "one idle slot, of the size small ones need"
    assert pool.in_use == 0
    pool.close()


def test_idle_slots_shrink_in_number_once_a_burst_leaves_the_recent_requests() -> None:
    pool = SlotPool(8)
    burst = [pool.lend() for _ in range(4)]
    for lease in burst:
        lease.reserve(10)
    names = [lease.slot.name for lease in burst]
    for lease in burst:
        lease.release()
    assert pool.reserved_bytes == 4 * MIN_SLOT_BYTES, "as many idle slots as were lent at once"

    def one_request() -> None:
        lease = pool.lend()
        lease.reserve(10)
        lease.release()

    for _ in range(RECENT_REQUESTS - 1):  # one at a time, each in the last slot given back
        one_request()
    assert pool.reserved_bytes == 4 * MIN_SLOT_BYTES, "the burst is still a recent request"
    one_request()
    assert pool.reserved_bytes == MIN_SLOT_BYTES, "one idle slot: requests come one at a time"
    assert [on_disk(n) for n in names] == [False, False, False, True], "the longest idle go"
    assert pool.take_forgotten() == (0, 1, 2)
    pool.close()


def test_a_slot_larger_than_the_whole_of_dev_shm_is_a_413_once_idle_slots_are_given_up(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # tmpfs refuses to reserve more pages than it has at once (ENOSPC), filling nothing.
    total, _ = shm_space()
    pool = SlotPool(2)
    held, first, second = (pool.lend() for _ in range(3))
    for lease in (held, first, second):
        lease.reserve(10)
    names = [lease.slot.name for lease in (held, first, second)]
    first.release()
    second.release()
    lease = pool.lend()
    assert lease.slot is second.slot, "the last slot given back is lent first"
    lease.reserve(2 * MIN_SLOT_BYTES)
    assert on_disk(names[1]), "an idle slot is given up only when the room is short"
    assert pool.take_forgotten() == (2,)
    with caplog.at_level(logging.WARNING, logger="vla_client.server.worker"):
        for _ in range(2):  # refused each time, said once in the log
            with pytest.raises(InferenceError) as refused:
                lease.reserve(total + 1)
            assert refused.value.status_code == 413 and refused.value.retry_after is None
            assert refused.value.detail == (
                f"the request needs {(total + 1) / MIB:.1f} MiB ({total + 1} bytes) of shared "
                f"memory and the server's /dev/shm holds {total / MIB:.1f} MiB ({total} bytes) "
                "in all: send smaller frames"
            )
    [message] = [record.getMessage() for record in caplog.records]
    assert message.startswith(f"shared memory is short: /dev/shm holds {total / MIB:.0f} MiB (")
    assert [on_disk(n) for n in names] == [True, False, False], "the idle slot was given up"
    assert pool.take_forgotten() == (2, 1), "the grown segment, then the idle slot"
    assert lease.slot.size == 0 and pool.reserved_bytes == MIN_SLOT_BYTES
    mine = [n for n in os.listdir("/dev/shm") if n.startswith(f"{SEGMENT_PREFIX}{pool._tag}_")]
    assert mine == [names[0]], "a refused segment leaves no name"
    lease.reserve(10)  # the pool still serves, in the same slot
    lease.release()
    held.release()
    pool.close()
    assert not any(on_disk(n) for n in names)


# A private 4 MiB /dev/shm, as small as a container's is in proportion, so it can be filled:
# idle slots are given up to make room, then requests are refused with 503 (or 413 when no
# /dev/shm of that size could ever hold them). It prints what happened, as JSON.
def run_in_small_shm(size: str, script: str) -> dict[str, Any]:
    """The JSON document `script` prints, run by Python with a private ``/dev/shm`` of `size`."""
    source = str(os.path.dirname(os.path.dirname(vla_client.__file__)))
    completed = subprocess.run(
        in_small_shm(size, [sys.executable, "-c", script]),
        env={
            **os.environ,
            "PYTHONPATH": os.pathsep.join([source, os.environ.get("PYTHONPATH", "")]),
        },
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert completed.returncode == 0, completed.stderr
    document: dict[str, Any] = json.loads(completed.stdout)
    return document


SHORT_OF_ROOM = """
import json, logging, os
from vla_client.errors import InferenceError
from vla_client.server.worker.shm import MIN_SLOT_BYTES as MIB, SlotPool

logged = []
handler = logging.Handler()
handler.emit = lambda record: logged.append(record.getMessage())
logging.getLogger("vla_client.server.worker").addHandler(handler)
pool = SlotPool(4)
held, first, second = (pool.lend() for _ in range(3))
for lease in (held, first, second):
    lease.reserve(MIB)
first.release()
second.release()
grown = pool.lend()
grown.reserve(2 * MIB + 1)  # 2.5 MiB: there is room once the 1 MiB idle slot is given up
report = {"grown": [grown.slot.size, grown.slot.name], "forgotten": pool.take_forgotten(),
          "segments": len(os.listdir("/dev/shm")), "refused": []}
for nbytes in (MIB, MIB, 4 * MIB, 5 * MIB):
    lease = pool.lend()
    try:
        lease.reserve(nbytes)
    except InferenceError as exc:
        report["refused"].append([exc.status_code, exc.detail, exc.retry_after])
    lease.release()
for lease in (held, grown):
    lease.release()
pool.close()
stats = os.statvfs("/dev/shm")
report.update(logged=logged, left=os.listdir("/dev/shm"), free=stats.f_bavail * stats.f_frsize)
print(json.dumps(report))
"""


def test_a_full_dev_shm_gives_up_idle_slots_then_refuses_with_503_or_413() -> None:
    require_small_shm()
    # The same path in this process too, so that mutation testing, which runs a test only for
    # the code it calls in the test's own process, runs this one for it.
    with pytest.raises(InferenceError):
        SlotPool(0).lend().reserve(shm_space()[0] + 1)
    report = run_in_small_shm("4m", SHORT_OF_ROOM)
    size, name = report["grown"]
    assert size == 2 * MIB + MIB // 2 and name.startswith(SEGMENT_PREFIX)
    assert report["forgotten"] == [2, 1], "the grown slot's old segment, then the idle slot"
    assert report["segments"] == 2, "held and grown: the idle slot was unlinked"
    short = (
        "the server is short of shared memory: the request needs {} MiB, 0.5 MiB of /dev/shm "
        "is free"
    )
    assert report["refused"] == [
        [503, short.format("1.0"), 1.0],
        [503, short.format("1.0"), 1.0],
        [503, short.format("4.0"), 1.0],  # would fit in an empty /dev/shm: worth a retry
        [
            413,
            "the request needs 5.0 MiB (5242880 bytes) of shared memory and the server's "
            "/dev/shm holds 4.0 MiB (4194304 bytes) in all: send smaller frames",
            None,
        ],
    ]
    assert report["logged"] == [
        "shared memory is short: /dev/shm holds 4 MiB (0 MiB free), a request needed 1.0 MiB "
        "and this server process holds 3.5 MiB for 3 requests; give it more (docker run "
        "--shm-size, see docs/server.md, 'Shared memory') or send smaller frames. Such "
        "requests get 503 (413 when larger than /dev/shm)"
    ], "the first refusal only"
    assert report["left"] == [] and report["free"] == 4 * MIB


FITS_UNROUNDED = """
import json, os
from vla_client.server.worker.shm import MIN_SLOT_BYTES as MIB, SlotPool, slot_size
pool = SlotPool(4)
lease = pool.lend()
nbytes = 4 * MIB + MIB // 4  # its slot size, 5 MiB, is more than the 4.5 MiB /dev/shm holds
lease.reserve(nbytes)
print(json.dumps({"size": lease.slot.size, "rounded": slot_size(nbytes),
                  "segments": len(os.listdir("/dev/shm"))}))
lease.release()
pool.close()
"""


def test_a_body_that_fits_only_without_the_slot_rounding_gets_a_segment_of_its_own_size() -> None:
    """A slot is rounded up (to an eighth of its power of two) so that the next body a little
    larger still fits; where only the body itself fits, it gets that, not a 413 saying it can
    never fit (a 4.25 MiB body in a 4.5 MiB /dev/shm was refused as needing 5 MiB)."""
    require_small_shm()
    report = run_in_small_shm("4608k", FITS_UNROUNDED)
    assert report == {"size": 4 * MIB + MIB // 4, "rounded": 5 * MIB, "segments": 1}


def test_a_slot_without_a_pool_rounds_its_segment_up() -> None:
    slot = Slot(f"{os.getpid()}_rounds", 0, [])
    slot.reserve(MIN_SLOT_BYTES + 1)
    try:
        assert slot.size == slot_size(MIN_SLOT_BYTES + 1) > MIN_SLOT_BYTES + 1
    finally:
        slot.release()


def room_for(monkeypatch: pytest.MonkeyPatch, limit: int) -> list[int]:
    """Make `Segment.create` refuse segments over `limit` bytes with ``ENOSPC``, as a
    ``/dev/shm`` with that much free does (this machine's is large), and return the sizes asked
    for, in order."""
    asked: list[int] = []
    create = Segment.create

    def limited(name: str, size: int) -> Segment:
        asked.append(size)
        if size > limit:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return create(name, size)

    monkeypatch.setattr(Segment, "create", limited)
    return asked


ODD = MIB + MIB // 4 + 1
ODD_SLOT = MIB + MIB // 2
"""A body of `ODD` bytes gets a slot of `ODD_SLOT` (rounded to a multiple of 256 KiB)."""


@pytest.mark.parametrize(
    ("nbytes", "limit", "asked", "size"),
    [
        (ODD, ODD, [ODD_SLOT, ODD], ODD),
        (ODD, ODD_SLOT, [ODD_SLOT], ODD_SLOT),
        (1, 1, [MIN_SLOT_BYTES, 1], 1),
    ],
    ids=["only-its-own-size-fits", "the-rounded-size-fits", "one-byte"],
)
def test_a_segment_is_rounded_up_where_that_fits_else_made_its_own_size(
    monkeypatch: pytest.MonkeyPatch, nbytes: int, limit: int, asked: list[int], size: int
) -> None:
    tried = room_for(monkeypatch, limit)
    slot = Slot(f"{os.getpid()}_room", 0, [])
    slot.reserve(nbytes)
    try:
        assert (tried, slot.size) == (asked, size)
    finally:
        slot.release()


@pytest.mark.parametrize(
    ("nbytes", "asked"),
    [
        (ODD, [ODD_SLOT, ODD]),
        (2 * MIB, [2 * MIB]),  # its own size is the rounded one: asked once
        (0, [MIN_SLOT_BYTES]),  # no empty segment
    ],
    ids=["rounded-then-own", "already-round", "nothing"],
)
def test_a_slot_without_a_pool_and_without_room_raises_enospc(
    monkeypatch: pytest.MonkeyPatch, nbytes: int, asked: list[int]
) -> None:
    tried = room_for(monkeypatch, 0)
    with pytest.raises(OSError) as raised:
        Slot(f"{os.getpid()}_full", 0, []).reserve(nbytes)
    assert tried == asked
    error = raised.value
    assert (error.errno, error.strerror, error.filename) == (
        errno.ENOSPC, os.strerror(errno.ENOSPC), "/dev/shm"
    )  # fmt: skip


def test_a_pool_that_keeps_nothing_unlinks_every_slot_given_back() -> None:
    pool = SlotPool(0)
    lease = pool.lend()
    lease.reserve(10)
    name = lease.slot.name
    lease.release()
    assert not on_disk(name) and pool.take_forgotten() == (0,)
    assert pool.lend().slot.index == 1


def test_a_closed_pool_unlinks_slots_as_they_come_back_and_keeps_none() -> None:
    pool = SlotPool(4)
    idle, busy = pool.lend(), pool.lend()
    idle.reserve(10)
    busy.reserve(10)
    idle.release()
    pool.close()
    assert pool.in_use == 0
    late = pool.lend()
    late.reserve(10)
    name = late.slot.name
    late.release()
    busy.release()
    assert not on_disk(name)
    assert pool.lend().slot is not late.slot, "a closed pool keeps no slot for reuse"


def test_attachments_map_each_slot_once_and_again_when_its_name_changes() -> None:
    pool = SlotPool(1)
    lease = pool.lend()
    lease.reserve(10)[:3] = b"one"
    attachments = Attachments()
    first = attachments.buffer(0, lease.slot.name)
    assert bytes(first[:3]) == b"one"
    assert attachments.buffer(0, lease.slot.name) is first, "mapped once"
    lease.slot.reserve(2 * MIN_SLOT_BYTES)  # grows: a new segment, a new name
    lease.slot.buffer[:3] = b"two"
    second = attachments.buffer(0, lease.slot.name)
    assert bytes(second[:3]) == b"two" and len(second) == 2 * MIN_SLOT_BYTES
    with pytest.raises(ValueError):
        first[0]  # the old mapping is closed
    attachments.forget(0)
    with pytest.raises(ValueError):
        second[0]
    attachments.forget(0)  # forgetting a slot not mapped is harmless
    third = attachments.buffer(0, lease.slot.name)
    other = attachments.buffer(1, lease.slot.name)
    attachments.close()
    for buffer in (third, other):
        with pytest.raises(ValueError):
            buffer[0]
    assert attachments.buffer(0, lease.slot.name) is not third, "close forgets every mapping"
    attachments.close()
    lease.release()
    pool.close()
