"""Bounds on how much, and how slowly, a client may send: 413 for too much, 408 for too slow.

A body that drips in a byte at a time would otherwise hold a connection and a buffer for as
long as the client likes (slowloris); the read deadline ends that. A client that disconnects
mid-body ends its request as a plain 4xx, not as an unhandled error with a logged traceback.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Awaitable, Callable
from typing import TypeVar

from fastapi import HTTPException, Request
from starlette.requests import ClientDisconnect

from vla_client.server.edge.connections import BODY_INTO, BodyIntoStarter

T = TypeVar("T")


async def within(deadline_s: float, awaitable: Awaitable[T]) -> T:
    """`awaitable`'s result, or `asyncio.TimeoutError` once `deadline_s` has passed.

    On Python 3.11 and later this is `asyncio.timeout`, which, unlike `asyncio.wait_for`, runs
    the awaitable in the caller's task: no extra task and event-loop pass per request.
    """
    if sys.version_info >= (3, 11):
        async with asyncio.timeout(deadline_s):
            return await awaitable
    return await asyncio.wait_for(awaitable, deadline_s)


async def read_body(
    request: Request,
    max_bytes: int,
    deadline_s: float,
    into: Callable[[int], memoryview] | None = None,
) -> bytes | memoryview:
    """The whole body, or 413 when over `max_bytes`, or 408 when not in within `deadline_s`.

    With `into` and a Content-Length, the body is written into ``into(length)`` as it arrives
    (for the worker layout, shared memory) and that buffer is returned: by the HTTP protocol
    itself where it offers that (`BODY_INTO`), else chunk by chunk as the app receives them.
    """
    header = request.headers.get("content-length")
    declared = int(header) if header and header.isdigit() else None
    if declared is not None and declared > max_bytes:
        raise HTTPException(413, f"body of {declared} bytes is over the limit of {max_bytes}")
    try:
        if into is not None and declared is not None:
            return await within(deadline_s, _read_into(request, into(declared)))
        return await within(deadline_s, _collect(request, max_bytes))
    except asyncio.TimeoutError:  # a distinct class before Python 3.11
        message = f"request body did not arrive within {deadline_s:g} s"
        raise HTTPException(408, message, headers={"Connection": "close"}) from None
    except ClientDisconnect:  # nobody reads this reply; it only ends the request quietly
        raise HTTPException(400, "client disconnected before the body was complete") from None


async def _read_into(request: Request, buffer: memoryview) -> memoryview:
    offer = request.scope.get("extensions", {}).get(BODY_INTO)
    start: BodyIntoStarter | None = None if offer is None else offer["start"]
    body_into = None if start is None else start(buffer)
    size = 0
    try:
        async for chunk in request.stream():  # with `body_into`, only the end of the body
            if body_into is not None and chunk:  # a check, not an assert: -O must keep it
                raise RuntimeError("the HTTP protocol handed the app body it had taken")
            end = size + len(chunk)
            if end > len(buffer):  # the HTTP layer holds bodies to their Content-Length
                raise HTTPException(400, f"body is longer than its Content-Length of {len(buffer)}")
            buffer[size:end] = chunk
            size = end
    finally:
        if body_into is not None:
            body_into.close()
    if body_into is not None:
        size = body_into.filled
    if size != len(buffer):  # the whole buffer, not a slice: no second view of it to release
        raise HTTPException(400, f"body is shorter than its Content-Length of {len(buffer)}")
    return buffer


async def _collect(request: Request, max_bytes: int) -> bytes:
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > max_bytes:
            raise HTTPException(413, f"body is over the limit of {max_bytes} bytes")
        chunks.append(chunk)
    return b"".join(chunks)
