"""Work on several frames at once: one thread per frame, from a pool shared by every codec.

OpenCV, ISA-L's inflate and numpy's array work release the GIL, so several cameras encode, or
several images decode, in parallel threads; both sides use the same pool. fpng's binding does
not: `vla_client.protocol.image_forms.encodes_in_parallel` says where threads pay.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

T = TypeVar("T")
R = TypeVar("R")
_pool: ThreadPoolExecutor | None = None


def map_frames(function: Callable[[T], R], items: Iterable[T]) -> list[R]:
    """`function` over `items`, in parallel threads when there is more than one item."""
    items = list(items)
    if len(items) < 2:
        return [function(item) for item in items]
    return list(_thread_pool().map(function, items))


def _thread_pool() -> ThreadPoolExecutor:
    global _pool
    if _pool is None:
        _pool = ThreadPoolExecutor(
            max_workers=min(8, os.cpu_count() or 2), thread_name_prefix="codec"
        )
    return _pool


def _forget_pool() -> None:
    """In a forked child the pool's threads do not exist, and work handed to it would wait
    forever: the child starts a pool of its own when it first needs one."""
    global _pool
    _pool = None


if hasattr(os, "register_at_fork"):  # not on Windows, which cannot fork
    os.register_at_fork(after_in_child=_forget_pool)
