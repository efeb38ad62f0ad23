"""The files an observation crosses from `ActionClient.infer` to the socket, and the calls that
go back into the client on the way.

    PYTHONPATH=src python tools/client_path.py

Starts the reference server on 127.0.0.1 and sends one observation (two 120x160 frames, a
7-value state) with each client over HTTP and over the realtime websocket, twice: the first
call also reads the server's metadata. For each it prints the number of `vla_client` source
files with a function called in the calling thread (and the event loop's worker threads, for
asyncio) while `infer` ran, and those of ``client/`` and ``transports/`` by name. A callback is
a call into the client's own modules (`CLIENT_MODULES`) from code that the client called: the
shape of a core that calls back for its I/O, which the sessions of steps replaced
(`tests/client/test_client_path.py` keeps it out).
"""

from __future__ import annotations

import asyncio
import sys
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import Any

import vla_client

SRC = str(Path(vla_client.__file__).parent) + "/"
CLIENT_MODULES = ("client/sync_client.py", "client/async_client.py", "client/base.py")
"""The modules of the two clients and what they share at construction."""


@dataclass
class Trace:
    """What one traced call crossed: `files` in order of first call, relative to the package,
    and `callbacks` as ``callee <- caller`` (qualified names)."""

    files: list[str] = field(default_factory=list)
    callbacks: set[str] = field(default_factory=set)

    def under(self, *folders: str) -> list[str]:
        """The files crossed in `folders` (``client/``, say)."""
        return [name for name in self.files if name.startswith(folders)]


def _package_file(frame: FrameType | None) -> str | None:
    name = frame.f_code.co_filename if frame is not None else ""
    return name[len(SRC) :] if name.startswith(SRC) else None


def _qualname(frame: FrameType) -> str:
    code = frame.f_code
    return str(getattr(code, "co_qualname", code.co_name))  # co_qualname: Python 3.11+


def _callback(frame: FrameType) -> str | None:
    """``callee <- caller`` when `frame` runs client code called from code the client called
    (another module's, with a client module's frame further down the stack)."""
    caller = frame.f_back
    caller_file = _package_file(caller)
    if caller is None or caller_file is None or caller_file in CLIENT_MODULES:
        return None
    below = caller.f_back
    while below is not None:
        if _package_file(below) in CLIENT_MODULES:
            return f"{_qualname(frame)} <- {_qualname(caller)}"
        below = below.f_back
    return None


@contextmanager
def traced() -> Iterator[Trace]:
    """Trace the calls made in this thread (and threads started meanwhile by asyncio's
    executor) until the block ends."""
    trace = Trace()
    on = threading.current_thread()

    def profile(frame: FrameType, event: str, arg: Any) -> None:
        if event != "call":
            return
        thread = threading.current_thread()
        if thread is not on and not thread.name.startswith("asyncio_"):
            return
        name = _package_file(frame)
        if name is None:
            return
        if name not in trace.files:
            trace.files.append(name)
        if name in CLIENT_MODULES and (callback := _callback(frame)):
            trace.callbacks.add(callback)

    sys.setprofile(profile)
    threading.setprofile(profile)
    try:
        yield trace
    finally:
        sys.setprofile(None)
        threading.setprofile(None)


def trace_call(call: Callable[[], Any]) -> Trace:
    """`call()` traced."""
    with traced() as trace:
        call()
    return trace


def main() -> None:
    import numpy as np

    from vla_client import ActionClient, AsyncActionClient, Observation
    from vla_client.cameras.scene import synthetic_frames
    from vla_client.server import LocalServer, ReferencePolicy, create_app

    frames = synthetic_frames(2, 120, 160, seed=7)
    observation = Observation(frames, state=np.linspace(-1, 1, 7), task="stack the blocks")
    policy = ReferencePolicy(action_horizon=10, action_dim=7)
    with LocalServer(create_app(policy)) as server:
        for scheme in ("http", "ws"):
            url = server.url.replace("http", scheme, 1)
            with ActionClient(url) as client:
                traces = [trace_call(lambda: client.infer(observation)) for _ in range(2)]
            show(f"ActionClient {scheme}", traces)

            async def both(url: str = url) -> list[Trace]:
                async with AsyncActionClient(url) as client:
                    return [await trace_async(lambda: client.infer(observation)) for _ in range(2)]

            show(f"AsyncActionClient {scheme}", asyncio.run(both()))


async def trace_async(call: Callable[[], Any]) -> Trace:
    """`call()` awaited and traced, with a fresh executor: a profile reaches only the threads
    started after it is set."""
    loop = asyncio.get_running_loop()
    with ThreadPoolExecutor(thread_name_prefix="asyncio") as executor:
        loop.set_default_executor(executor)
        with traced() as trace:
            await call()
    return trace


def show(label: str, traces: list[Trace]) -> None:
    first, steady = traces
    print(f"{label}: {len(first.files)} files on the first call, {len(steady.files)} after")
    print(f"  in client/ and transports/: {', '.join(first.under('client/', 'transports/'))}")
    print(f"  callbacks into the client: {sorted(first.callbacks | steady.callbacks) or 'none'}")


if __name__ == "__main__":
    main()
