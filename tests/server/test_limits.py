"""`read_body` and `within` on their own: a real Starlette `Request` fed by an ASGI receive.

The end-to-end tests (test_limits_at_the_edge.py, test_hostile_input.py) send real bodies to a
real server; these check each refusal's status, detail and headers, and which path a body
takes (straight into the caller's buffer, or collected), where a server reply shows less.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from typing import Any

import pytest
from fastapi import HTTPException
from starlette.requests import Request

from vla_client.server.edge.limits import read_body, within


def request(
    chunks: list[bytes], *, length: str | None = None, pause_s: float = 0.0, hang_up: bool = False
) -> Request:
    """A POST whose body arrives as `chunks`, each after `pause_s`; with `hang_up` the client
    disconnects after the last chunk instead of ending the body."""
    headers = [] if length is None else [(b"content-length", length.encode())]
    pending = list(chunks)

    async def receive() -> dict[str, Any]:
        await asyncio.sleep(pause_s)
        if not pending:
            return {"type": "http.disconnect"}
        chunk = pending.pop(0)
        return {"type": "http.request", "body": chunk, "more_body": hang_up or bool(pending)}

    scope = {"type": "http", "method": "POST", "path": "/", "headers": headers}
    return Request(scope, receive)


def run(awaitable: Awaitable[Any]) -> Any:
    return asyncio.run(awaitable)  # type: ignore[arg-type]


def refusal(awaitable: Awaitable[Any]) -> HTTPException:
    with pytest.raises(HTTPException) as caught:
        run(awaitable)
    return caught.value


class Buffers:
    """An `into` that hands out fresh buffers and remembers the sizes asked for."""

    def __init__(self) -> None:
        self.sizes: list[int] = []
        self.buffers: list[memoryview] = []

    def __call__(self, size: int) -> memoryview:
        self.sizes.append(size)
        self.buffers.append(memoryview(bytearray(size)))
        return self.buffers[-1]


def test_a_declared_length_over_the_limit_is_refused_before_reading() -> None:
    into = Buffers()
    error = refusal(read_body(request([b"x" * 11], length="11"), 10, 1.0, into))
    assert (error.status_code, error.detail) == (413, "body of 11 bytes is over the limit of 10")
    assert into.sizes == []


def test_a_body_of_declared_length_goes_straight_into_the_buffer() -> None:
    into = Buffers()
    body = run(read_body(request([b"abc", b"de"], length="5"), 5, 1.0, into))
    assert into.sizes == [5] and body is into.buffers[0] and bytes(body) == b"abcde"


@pytest.mark.parametrize("length", [None, "", "5x", "-5", "+5"])
def test_without_a_usable_length_the_body_is_collected(length: str | None) -> None:
    into = Buffers()
    body = run(read_body(request([b"abc", b"de"], length=length), 5, 1.0, into))
    assert body == b"abcde" and into.sizes == []


def test_a_collected_body_over_the_limit_is_refused() -> None:
    error = refusal(read_body(request([b"abc", b"def"]), 5, 1.0))
    assert (error.status_code, error.detail) == (413, "body is over the limit of 5 bytes")


def test_a_body_too_slow_gets_408_and_the_connection_closes() -> None:
    for length, into in ((None, None), ("2", Buffers())):
        slow = request([b"a", b"b"], length=length, pause_s=0.2)
        error = refusal(read_body(slow, 10, 0.05, into))
        assert error.status_code == 408
        assert error.detail == "request body did not arrive within 0.05 s"
        assert error.headers == {"Connection": "close"}


def test_a_body_longer_than_its_length_is_a_400() -> None:
    error = refusal(read_body(request([b"ab", b"cd"], length="3"), 10, 1.0, Buffers()))
    assert (error.status_code, error.detail) == (400, "body is longer than its Content-Length of 3")


def test_a_body_shorter_than_its_length_is_a_400() -> None:
    error = refusal(read_body(request([b"ab"], length="3"), 10, 1.0, Buffers()))
    assert (error.status_code, error.detail) == (
        400,
        "body is shorter than its Content-Length of 3",
    )


@pytest.mark.parametrize("length", [None, "4"])
def test_a_client_that_hangs_up_mid_body_gets_a_400(length: str | None) -> None:
    into = None if length is None else Buffers()
    error = refusal(read_body(request([b"ab"], length=length, hang_up=True), 10, 1.0, into))
    assert (error.status_code, error.detail) == (
        400,
        "client disconnected before the body was complete",
    )


def test_within_returns_the_result_or_times_out() -> None:
    async def after(delay_s: float, value: str) -> str:
        await asyncio.sleep(delay_s)
        return value

    assert run(within(1.0, after(0.0, "done"))) == "done"
    with pytest.raises(asyncio.TimeoutError):
        run(within(0.02, after(1.0, "late")))


def test_within_runs_the_awaitable_in_the_callers_task() -> None:
    async def task_of_caller_and_awaitable() -> tuple[object, object]:
        async def current() -> object:
            return asyncio.current_task()

        return asyncio.current_task(), await within(1.0, current())

    caller, inner = run(task_of_caller_and_awaitable())
    assert caller is inner
