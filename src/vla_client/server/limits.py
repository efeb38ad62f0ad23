"""Bounds on how much, and how slowly, a client may send: 413 for too much, 408 for too slow.

A body that drips in a byte at a time would otherwise hold a connection and a buffer for as
long as the client likes (slowloris); the read deadline ends that. A client that disconnects
mid-body ends its request as a plain 4xx, not as an unhandled error with a logged traceback.
"""

from __future__ import annotations

import asyncio

from fastapi import HTTPException, Request
from starlette.requests import ClientDisconnect


async def read_body(request: Request, max_bytes: int, deadline_s: float) -> bytes:
    """The whole body, or 413 when over `max_bytes`, or 408 when not in within `deadline_s`."""
    declared = request.headers.get("content-length")
    if declared and declared.isdigit() and int(declared) > max_bytes:
        raise HTTPException(413, f"body of {declared} bytes is over the limit of {max_bytes}")
    try:
        return await asyncio.wait_for(_collect(request, max_bytes), deadline_s)
    except asyncio.TimeoutError:  # a distinct class before Python 3.11
        message = f"request body did not arrive within {deadline_s:g} s"
        raise HTTPException(408, message, headers={"Connection": "close"}) from None
    except ClientDisconnect:  # nobody reads this reply; it only ends the request quietly
        raise HTTPException(400, "client disconnected before the body was complete") from None


async def _collect(request: Request, max_bytes: int) -> bytes:
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > max_bytes:
            raise HTTPException(413, f"body is over the limit of {max_bytes} bytes")
        chunks.append(chunk)
    return b"".join(chunks)
