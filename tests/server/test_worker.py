"""The worker layout without HTTP: shared-memory slots and `WorkerRunner` round trips."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Awaitable, Callable
from typing import TypeVar

import numpy as np
import pytest

from oracles import oracle_actions
from vla_client.cameras.scene import synthetic_frames
from vla_client.server import PolicyInput, ReferencePolicy
from vla_client.server.config import WorkerSettings
from vla_client.server.worker import SEGMENT_PREFIX, WorkerRunner
from vla_client.server.worker.shm import MIN_SLOT_BYTES, SlotPool, plan_layout, view, write_arrays

T = TypeVar("T")


def pid_segments() -> set[str]:
    return {n for n in os.listdir("/dev/shm") if n.startswith(f"{SEGMENT_PREFIX}{os.getpid()}_")}


@pytest.fixture
def own_segments() -> Callable[[], list[str]]:
    """This test's segments: servers other tests keep for the session share our pid."""
    before = pid_segments()
    return lambda: sorted(pid_segments() - before)


def with_runner(
    scenario: Callable[[WorkerRunner], Awaitable[T]], settings: WorkerSettings | None = None
) -> T:
    """Run `scenario` against a started `WorkerRunner` (reference policy), closed afterwards."""

    async def run() -> T:
        runner = WorkerRunner(ReferencePolicy(), settings)
        await runner.start()
        try:
            return await scenario(runner)
        finally:
            await runner.close()

    return asyncio.run(run())


def test_layout_is_aligned_and_round_trips_every_dtype() -> None:
    arrays = {
        "a": np.arange(7, dtype=np.uint8).reshape(7, 1),
        "b": np.linspace(0, 1, 5, dtype=np.float32),
        "c": np.arange(6, dtype=np.int64).reshape(2, 3),
    }
    layouts, needed = plan_layout(arrays)
    assert [layout.offset % 64 for layout in layouts] == [0, 0, 0]
    buffer = memoryview(bytearray(needed))
    written = write_arrays(buffer, arrays)
    for layout in written:
        np.testing.assert_array_equal(view(buffer, layout), arrays[layout.key])
    fresh = memoryview(bytearray(needed))
    assert write_arrays(fresh, arrays, layouts) == layouts == written  # planned once, same place
    assert bytes(fresh) == bytes(buffer)


def test_slot_grows_under_a_new_name_and_close_unlinks_everything(
    own_segments: Callable[[], list[str]],
) -> None:
    pool = SlotPool(2)
    slot = pool.lend().slot
    slot.reserve(10)
    first = slot.name
    assert len(slot.buffer) == MIN_SLOT_BYTES
    slot.reserve(3 * MIN_SLOT_BYTES)
    assert slot.name != first and len(slot.buffer) >= 3 * MIN_SLOT_BYTES
    assert own_segments() == [slot.name]
    pool.close()
    assert own_segments() == []


def test_worker_runner_returns_the_reference_chunk_and_cleans_up(
    own_segments: Callable[[], list[str]],
) -> None:
    frames = synthetic_frames(["left", "right"], 120, 160, seed=3)
    state = np.array([0.5, -0.25], np.float32)
    observation = PolicyInput(images=frames, state=state, task="pick", action_horizon=5)

    async def scenario(runner: WorkerRunner) -> tuple[np.ndarray, dict[str, float], int | None]:
        actions, timings = await runner.infer(observation)
        assert own_segments(), "the request's slot should exist while the server runs"
        return actions, timings, runner.worker_pid

    actions, timings, pid = with_runner(scenario)
    expected = oracle_actions(observation, horizon=5, action_dim=7)
    np.testing.assert_allclose(actions, expected, rtol=1e-6)
    assert pid is not None and pid != os.getpid()
    assert set(timings) == {"queue_ms", "ipc_ms", "inference_ms"}
    assert all(value >= 0 for value in timings.values())
    assert own_segments() == []


@pytest.mark.parametrize("size", [(48, 64), (720, 1280)])
def test_requests_of_different_sizes_share_slots(
    size: tuple[int, int], own_segments: Callable[[], list[str]]
) -> None:
    async def scenario(runner: WorkerRunner) -> list[np.ndarray]:
        results = []
        for shape in [(24, 32), size, (24, 32)]:
            frames = synthetic_frames(1, *shape, seed=shape[0])
            actions, _ = await runner.infer(PolicyInput(images=frames))
            expected = oracle_actions(PolicyInput(images=frames), horizon=16, action_dim=7)
            np.testing.assert_allclose(actions, expected, rtol=1e-6)
            results.append(actions)
        return results

    assert len(with_runner(scenario)) == 3
    assert own_segments() == []


def frames_in(buffer: memoryview, frames: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Copies of `frames` laid out one after another in `buffer`, as a decoded body's are."""
    placed, offset = {}, 8  # not at 0: a body starts with msgpack headers
    for name, frame in frames.items():
        placed[name] = np.ndarray(frame.shape, frame.dtype, buffer=buffer, offset=offset)
        placed[name][...] = frame
        offset += frame.nbytes
    return placed


def test_slot_locates_only_arrays_that_lie_wholly_inside_it() -> None:
    pool = SlotPool(1)
    slot = pool.lend().slot
    slot.reserve(1000)
    inside = np.ndarray((10,), np.float32, buffer=slot.buffer, offset=64)
    assert slot.locate(inside) == 64
    assert slot.locate(np.ndarray((3,), np.float32, buffer=slot.buffer, offset=2)) is None
    assert slot.locate(np.ndarray((4, 4), np.uint8, buffer=slot.buffer)[:, ::2]) is None
    assert slot.locate(inside.copy()) is None
    del inside
    pool.close()


def test_arrays_read_into_a_lent_slot_reach_the_worker_in_place(
    own_segments: Callable[[], list[str]],
) -> None:
    frames = synthetic_frames(["left", "right"], 120, 160, seed=5)

    async def scenario(runner: WorkerRunner) -> None:
        lease = runner.lend_memory()
        body = lease.reserve(8 + sum(frame.nbytes for frame in frames.values()))
        observation = PolicyInput(images=frames_in(body, frames), task="in place")
        job = runner._write_job(lease.slot, observation)
        assert [layout.offset for layout in job.arrays] == [8, 8 + frames["left"].nbytes]
        actions, _ = await runner.infer(observation, lease)
        expected = oracle_actions(observation, horizon=16, action_dim=7)
        np.testing.assert_allclose(actions, expected, rtol=1e-6)
        # The worker wrote its chunk after the body: the frames are intact for digests.
        for name, frame in frames.items():
            np.testing.assert_array_equal(observation.images[name], frame)
        del observation, body
        lease.release()
        assert runner._pool.in_use == 0

    with_runner(scenario)
    assert own_segments() == []


def test_a_slot_that_must_grow_keeps_the_body_and_moves_every_array(
    own_segments: Callable[[], list[str]],
) -> None:
    """A small body whose decoded frames need more room (PNG, say) than the slot has."""
    small = synthetic_frames(["a"], 16, 16, seed=1)
    big = synthetic_frames(["b"], 720, 1280, seed=2)

    async def scenario(runner: WorkerRunner) -> None:
        lease = runner.lend_memory()
        body = lease.reserve(8 + small["a"].nbytes)
        first = lease.slot.name
        images = {**frames_in(body, small), **big}
        actions, _ = await runner.infer(PolicyInput(images=images), lease)
        assert lease.slot.name != first
        assert first not in own_segments(), "the outgrown segment is unlinked at once"
        np.testing.assert_array_equal(images["a"], small["a"])  # still mapped: views live
        expected = oracle_actions(PolicyInput(images=images), horizon=16, action_dim=7)
        np.testing.assert_allclose(actions, expected, rtol=1e-6)
        del images, body
        lease.release()

    with_runner(scenario)
    assert own_segments() == []


def worker_maps(pid: int | None, names: list[str]) -> list[str]:
    with open(f"/proc/{pid}/maps") as maps:
        text = maps.read()
    return [name for name in names if name in text]


def test_slots_beyond_the_kept_ones_are_unlinked_and_unmapped_by_the_worker(
    own_segments: Callable[[], list[str]],
) -> None:
    frames = synthetic_frames(1, 24, 32, seed=4)
    observation = PolicyInput(images=frames)

    async def scenario(runner: WorkerRunner) -> None:
        # Four requests at once (slow bodies, say): the pool lends beyond its two kept slots.
        leases = [runner.lend_memory() for _ in range(4)]
        for lease in leases:
            lease.reserve(64)
        names = [lease.slot.name for lease in leases]
        await runner.infer(observation, leases[3])  # the worker maps the fourth slot
        assert worker_maps(runner.worker_pid, names) == [names[3]]
        for lease in reversed(leases):  # the longest idle go first
            lease.release()
        assert own_segments() == sorted(names[:2]), "two kept, two unlinked"
        await runner.infer(observation)  # the next batch tells the worker to forget them
        assert worker_maps(runner.worker_pid, names[2:]) == []

    with_runner(scenario, WorkerSettings(queue_size=2))
    assert own_segments() == []


def test_a_slot_lent_around_shutdown_is_unlinked_when_it_comes_back(
    own_segments: Callable[[], list[str]],
) -> None:
    async def scenario() -> None:
        runner = WorkerRunner(ReferencePolicy())
        await runner.start()
        reading = runner.lend_memory()  # a request still reading its body at shutdown
        body = reading.reserve(1000)
        await runner.close()
        assert own_segments() == [], "close unlinks slots still in use"
        body[:4] = b"late"  # still mapped: the late writer does no harm
        late = runner.lend_memory()  # a request that arrived as the server stopped
        late.reserve(1000)
        assert own_segments() == [late.slot.name]
        del body
        reading.release()
        late.release()

    asyncio.run(scenario())
    assert own_segments() == []


def test_a_chunk_too_big_for_the_slot_comes_back_inline(
    own_segments: Callable[[], list[str]],
) -> None:
    observation = PolicyInput(images=synthetic_frames(1, 24, 32, seed=6), action_horizon=50_000)

    async def scenario(runner: WorkerRunner) -> np.ndarray:
        actions, _ = await runner.infer(observation)  # 1.4 MB of actions, a 1 MB slot
        return actions

    actions = with_runner(scenario)
    expected = oracle_actions(observation, horizon=50_000, action_dim=7)
    assert actions.flags.writeable and actions.shape == (50_000, 7)
    np.testing.assert_allclose(actions, expected, rtol=1e-6)
    assert own_segments() == []
