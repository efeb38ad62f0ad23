"""The batcher: batch size and wait window bounds, cancelled requests, batching through a worker."""

from __future__ import annotations

import asyncio

import numpy as np
import pytest
from worker_doubles import FaultyPolicy

from vla_client.cameras.scene import synthetic_frames
from vla_client.server import PolicyInput
from vla_client.server.config import WorkerSettings
from vla_client.server.worker import WorkerRunner
from vla_client.server.worker.scheduler import Batcher, Pending


def run_batcher(
    max_batch: int, wait_s: float, arrivals: int, *, cancel: int = 0
) -> tuple[list[list[int]], list[int]]:
    """Queue `arrivals` requests while paused, cancel the first `cancel`, resume; batches sent."""

    async def scenario() -> tuple[list[list[int]], list[int]]:
        sent: list[list[int]] = []
        retired: list[int] = []
        batcher: Batcher[int] = Batcher(
            max_batch, wait_s, lambda b: sent.append([p.item for p in b])
        )
        loop = asyncio.get_running_loop()
        pendings = [Pending(i, loop.create_future(), on_retire=lambda i=i: retired.append(i))
                    for i in range(arrivals)]  # fmt: skip
        for pending in pendings:
            batcher.put(pending)
        for pending in pendings[:cancel]:
            pending.future.cancel()
        batcher.resume()
        await asyncio.sleep(wait_s + 0.05)
        while batcher.paused and len(batcher):
            batcher.resume()
            await asyncio.sleep(wait_s + 0.05)
        return sent, retired

    return asyncio.run(scenario())


def test_batches_never_exceed_max_batch_and_keep_order() -> None:
    sent, _ = run_batcher(max_batch=3, wait_s=0.0, arrivals=7)
    assert sent == [[0, 1, 2], [3, 4, 5], [6]]


def test_cancelled_requests_are_skipped_and_give_their_slot_back() -> None:
    sent, retired = run_batcher(max_batch=8, wait_s=0.0, arrivals=4, cancel=2)
    assert sent == [[2, 3]]
    assert retired == [0, 1]


def test_wait_window_collects_late_arrivals() -> None:
    async def scenario() -> list[list[int]]:
        sent: list[list[int]] = []
        batcher: Batcher[int] = Batcher(4, 0.2, lambda b: sent.append([p.item for p in b]))
        batcher.resume()
        loop = asyncio.get_running_loop()
        batcher.put(Pending(0, loop.create_future(), on_retire=lambda: None))
        await asyncio.sleep(0.02)
        assert sent == [], "the first request should wait for company"
        batcher.put(Pending(1, loop.create_future(), on_retire=lambda: None))
        await asyncio.sleep(0.4)
        return sent

    assert asyncio.run(scenario()) == [[0, 1]]


def test_full_batch_goes_before_the_window_ends() -> None:
    async def scenario() -> list[list[int]]:
        sent: list[list[int]] = []
        batcher: Batcher[int] = Batcher(2, 30.0, lambda b: sent.append([p.item for p in b]))
        batcher.resume()
        loop = asyncio.get_running_loop()
        for i in range(2):
            batcher.put(Pending(i, loop.create_future(), on_retire=lambda: None))
        return sent

    assert asyncio.run(scenario()) == [[0, 1]]


def test_without_one_at_a_time_batches_go_while_others_run_and_a_backlog_goes_whole() -> None:
    async def scenario() -> tuple[list[list[int]], list[list[int]]]:
        sent: list[list[int]] = []
        batcher: Batcher[int] = Batcher(
            2, 0.0, lambda b: sent.append([p.item for p in b]), one_at_a_time=False
        )
        loop = asyncio.get_running_loop()
        for i in range(5):  # queued while the worker is down: paused
            batcher.put(Pending(i, loop.create_future(), on_retire=lambda: None))
        batcher.resume()
        backlog = list(sent)
        for i in range(5, 7):  # nothing has come back, and each goes at once
            batcher.put(Pending(i, loop.create_future(), on_retire=lambda: None))
        return backlog, sent[len(backlog) :]

    backlog, after = asyncio.run(scenario())
    assert backlog == [[0, 1], [2, 3], [4]]
    assert after == [[5], [6]]


def test_settings_are_bounded() -> None:
    for bad in ({"max_batch": 0}, {"max_batch": 1000}, {"batch_wait_ms": 5000}, {"queue_size": 0}):
        with pytest.raises(ValueError):
            WorkerSettings(**bad)  # type: ignore[arg-type]


def test_concurrent_requests_share_one_policy_call() -> None:
    """While the worker sleeps on one request, the next ones queue and run as one batch."""
    frames = synthetic_frames(2, 32, 48)

    async def scenario() -> list[float]:
        runner = WorkerRunner(FaultyPolicy(), WorkerSettings(max_batch=4, queue_size=8))
        await runner.start()
        try:
            first = asyncio.create_task(runner.infer(PolicyInput(images=frames, task="sleep:0.5")))
            await asyncio.sleep(0.1)
            rest = [runner.infer(PolicyInput(images=frames, task=f"t{i}")) for i in range(6)]
            results = await asyncio.gather(first, *rest)
        finally:
            await runner.close()
        return [float(actions[0, 0]) for actions, _ in results]

    sizes = asyncio.run(scenario())
    assert sizes[0] == 1
    assert sorted(sizes[1:]) == [2, 2, 4, 4, 4, 4], "6 queued requests: a batch of 4, then 2"
    assert np.isfinite(sizes).all()


def test_a_request_gives_back_what_it_holds_once_and_its_first_outcome_stands() -> None:
    async def scenario() -> tuple[list[str], object]:
        given_back: list[str] = []
        pending = Pending(0, asyncio.get_running_loop().create_future(),
                          on_retire=lambda: given_back.append("slot"))  # fmt: skip
        pending.fail(RuntimeError("worker died"))
        pending.resolve("late reply")
        pending.retire()
        return given_back, pending.future.exception()

    given_back, outcome = asyncio.run(scenario())
    assert given_back == ["slot"]
    assert isinstance(outcome, RuntimeError) and str(outcome) == "worker died"


def test_a_batch_of_one_is_allowed_and_none_is_refused_by_name() -> None:
    assert Batcher(1, 0.0, lambda batch: None).max_batch == 1
    with pytest.raises(ValueError, match=r"^max_batch must be at least 1$"):
        Batcher(0, 0.0, lambda batch: None)


def test_by_default_the_next_batch_waits_for_resume() -> None:
    async def scenario() -> list[list[int]]:
        sent: list[list[int]] = []
        batcher: Batcher[int] = Batcher(2, 0.0, lambda b: sent.append([p.item for p in b]))
        batcher.resume()
        assert batcher.paused is False
        loop = asyncio.get_running_loop()
        batcher.put(Pending(0, loop.create_future(), on_retire=lambda: None))
        assert batcher.paused is True, "the worker has a batch: the next one waits"
        batcher.put(Pending(1, loop.create_future(), on_retire=lambda: None))
        assert sent == [[0]]
        batcher.resume()
        return sent

    assert asyncio.run(scenario()) == [[0], [1]]


def test_a_request_cancelled_mid_queue_leaves_the_rest_of_the_batch_together() -> None:
    async def scenario() -> list[list[int]]:
        sent: list[list[int]] = []
        batcher: Batcher[int] = Batcher(8, 0.0, lambda b: sent.append([p.item for p in b]))
        loop = asyncio.get_running_loop()
        pendings = [Pending(i, loop.create_future(), on_retire=lambda: None) for i in range(4)]
        for pending in pendings:
            batcher.put(pending)
        pendings[1].future.cancel()
        batcher.resume()
        return sent

    assert asyncio.run(scenario()) == [[0, 2, 3]]


def test_a_cancelled_request_does_not_count_towards_a_full_batch() -> None:
    async def scenario() -> tuple[list[list[int]], list[list[int]]]:
        sent: list[list[int]] = []
        batcher: Batcher[int] = Batcher(2, 30.0, lambda b: sent.append([p.item for p in b]),
                                        one_at_a_time=False)  # fmt: skip
        batcher.resume()
        loop = asyncio.get_running_loop()
        gone = Pending(0, loop.create_future(), on_retire=lambda: None)
        batcher.put(gone)
        gone.future.cancel()
        batcher.put(Pending(1, loop.create_future(), on_retire=lambda: None))
        before = list(sent)
        batcher.put(Pending(2, loop.create_future(), on_retire=lambda: None))
        return before, sent

    before, sent = asyncio.run(scenario())
    assert before == [], "one live request waits for company"
    assert sent == [[1, 2]]


def test_the_wait_window_opens_again_for_each_batch() -> None:
    async def scenario() -> list[list[int]]:
        sent: list[list[int]] = []
        batcher: Batcher[int] = Batcher(4, 0.05, lambda b: sent.append([p.item for p in b]),
                                        one_at_a_time=False)  # fmt: skip
        batcher.resume()
        loop = asyncio.get_running_loop()
        for i in range(2):
            batcher.put(Pending(i, loop.create_future(), on_retire=lambda: None))
            for _ in range(200):  # the window is 50 ms; a busy machine may take longer
                if len(sent) > i:
                    break
                await asyncio.sleep(0.05)
        return sent

    assert asyncio.run(scenario()) == [[0], [1]]
