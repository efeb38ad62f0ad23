"""The worker layout without HTTP: shared-memory slots and `WorkerRunner` round trips."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable

import numpy as np
import pytest

from vla_client.scene import synthetic_frames
from vla_client.server import PolicyInput, ReferencePolicy
from vla_client.server.policies import reference_actions
from vla_client.server.worker import SEGMENT_PREFIX, WorkerRunner
from vla_client.server.worker.shm import MIN_SLOT_BYTES, SlotPool, plan_layout, view, write_arrays


def pid_segments() -> set[str]:
    return {n for n in os.listdir("/dev/shm") if n.startswith(f"{SEGMENT_PREFIX}{os.getpid()}_")}


@pytest.fixture
def own_segments() -> Callable[[], list[str]]:
    """This test's segments: servers other tests keep for the session share our pid."""
    before = pid_segments()
    return lambda: sorted(pid_segments() - before)


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
    slot = pool.acquire()
    assert slot is not None
    slot.reserve(10)
    first = slot.name
    assert len(slot.buffer) == MIN_SLOT_BYTES
    slot.reserve(3 * MIN_SLOT_BYTES)
    assert slot.name != first and len(slot.buffer) >= 3 * MIN_SLOT_BYTES
    assert own_segments() == [slot.name]
    assert pool.acquire() is not None and pool.acquire() is None
    pool.close()
    assert own_segments() == []


def test_worker_runner_returns_the_reference_chunk_and_cleans_up(
    own_segments: Callable[[], list[str]],
) -> None:
    frames = synthetic_frames(["left", "right"], 120, 160, seed=3)
    state = np.array([0.5, -0.25], np.float32)
    observation = PolicyInput(images=frames, state=state, task="pick", action_horizon=5)

    async def scenario() -> tuple[np.ndarray, dict[str, float], int | None]:
        runner = WorkerRunner(ReferencePolicy())
        await runner.start()
        try:
            actions, timings = await runner.infer(observation)
            assert own_segments(), "the request's slot should exist while the server runs"
            return actions, timings, runner.worker_pid
        finally:
            await runner.close()

    actions, timings, pid = asyncio.run(scenario())
    expected = reference_actions(observation, horizon=5, action_dim=7)
    np.testing.assert_allclose(actions, expected, rtol=1e-6)
    assert pid is not None and pid != os.getpid()
    assert set(timings) == {"queue_ms", "ipc_ms", "inference_ms"}
    assert all(value >= 0 for value in timings.values())
    assert own_segments() == []


@pytest.mark.parametrize("size", [(48, 64), (720, 1280)])
def test_requests_of_different_sizes_share_slots(
    size: tuple[int, int], own_segments: Callable[[], list[str]]
) -> None:
    async def scenario() -> list[np.ndarray]:
        runner = WorkerRunner(ReferencePolicy())
        await runner.start()
        try:
            results = []
            for shape in [(24, 32), size, (24, 32)]:
                frames = synthetic_frames(1, *shape, seed=shape[0])
                actions, _ = await runner.infer(PolicyInput(images=frames))
                expected = reference_actions(PolicyInput(images=frames), horizon=16, action_dim=7)
                np.testing.assert_allclose(actions, expected, rtol=1e-6)
                results.append(actions)
            return results
        finally:
            await runner.close()

    assert len(asyncio.run(scenario())) == 3
    assert own_segments() == []
