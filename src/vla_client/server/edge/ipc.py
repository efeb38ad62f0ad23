"""The ``ipc://`` edge of the server: the action API on a Unix socket, frames in shared memory.

``vla-client serve --ipc PATH`` listens on a Unix socket at PATH beside its port. A client on
the same host writes each frame once into a shared-memory segment of its own and sends the rest
of the request (`vla_client.protocol.ipc`); this edge maps the segment, hands the frames to the
`Pipeline` as arrays viewing it, and the policy worker reads them there in place (the segment
becomes a slot of the runner's pool for the request: `SlotPool.adopt`). The request otherwise
takes the same path as over HTTP (`Pipeline.decode_document` and `Pipeline.answer`), and its
answer is the HTTP reply's status, body and ``Retry-After``.

What keeps it to its user and its clients:

- the socket is made mode 0600 (bound under a temporary name, then renamed into place), so
  only the server's user can connect; with an API key, every request carries it
  (`hmac.compare_digest`, as on HTTP) and a wrong one ends the connection after its 401;
- a segment is mapped only if its name is a client's (`vla_client.segments.client_owner`)
  and, when client and server share a pid namespace, names the connected process (the
  socket's ``SO_PEERCRED``): a client cannot make the server read another client's frames or
  the server's own slots. A connection maps at most `SEGMENTS_PER_CONNECTION` segments, let go
  when it closes;
- when a connection closes and its process has died (killed mid-request), the segments it
  named are unlinked here; the server also sweeps dead clients' segments when it starts.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import logging
import math
import os
import socket
import struct
import time
from collections import OrderedDict
from typing import Any

import msgspec
import numpy as np

from vla_client.codecs.depth import DEPTH_DTYPES
from vla_client.errors import CodecError, InvalidObservationError
from vla_client.protocol import CONTENT_TYPES, ErrorStatus, dumps, loads
from vla_client.protocol.ipc import (
    GREETING,
    LENGTH_BYTES,
    MAX_REQUEST_BYTES,
    VERSION,
    Answer,
    FrameLayout,
    Hello,
    Infer,
    Metadata,
    SharedFrames,
    decode_request,
    framed,
    with_frames,
)
from vla_client.segments import (
    Segment,
    client_owner,
    pid_namespace,
    process_gone,
    sweep_dead_clients,
    unlink_name,
)
from vla_client.server.config import check_ipc_path
from vla_client.server.edge.auth import REFUSALS
from vla_client.server.engine.inference import RequestMemory
from vla_client.server.engine.pipeline import Pipeline, failure
from vla_client.server.worker import WorkerRunner
from vla_client.server.worker.shm import AdoptedSlot

log = logging.getLogger("vla_client.server")

ROUTE = "ipc"
"""How ``/metrics`` names the requests that came in on the socket."""
SEGMENTS_PER_CONNECTION = 4
DEATH_WATCH_S = 2.0
"""How long after a connection closes the server looks for its process's death (a killed
process closes its sockets a moment before it is gone)."""
_UNAUTHORIZED = "missing or invalid API key"


def bind_private(path: str) -> socket.socket:
    """A listening Unix socket at `path`, mode 0600 from the moment it has that name; a stale
    socket there is replaced, anything else refused (`check_ipc_path`)."""
    check_ipc_path(path)
    temporary = f"{path}.{os.getpid()}.tmp"
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temporary)
        sock.bind(temporary)
        os.chmod(temporary, 0o600)
        os.rename(temporary, path)
        sock.listen(128)
    except BaseException:
        sock.close()
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temporary)
        raise
    sock.setblocking(False)
    return sock


class IpcEdge:
    """Serves `pipeline` on the Unix socket at `path` (`start`, then `close`)."""

    def __init__(self, pipeline: Pipeline, path: str) -> None:
        self.pipeline = pipeline
        self.path = path
        self._server: asyncio.AbstractServer | None = None
        self._handlers: set[asyncio.Task[None]] = set()
        self._watches: set[asyncio.Task[None]] = set()
        self._hello = framed(Hello(GREETING, VERSION))
        self.namespace = pid_namespace()

    async def start(self) -> None:
        swept = sweep_dead_clients()
        if swept:
            log.info("unlinked %d shared-memory segments of clients that died", len(swept))
        sock = bind_private(self.path)
        self._server = await asyncio.start_unix_server(self._serve, sock=sock)
        self.pipeline.metrics.routes = self.pipeline.metrics.routes | {ROUTE}

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
            with contextlib.suppress(FileNotFoundError):
                os.unlink(self.path)
        for task in (*self._handlers, *self._watches):
            task.cancel()
        await asyncio.gather(*self._handlers, *self._watches, return_exceptions=True)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._handlers.add(task)
        connection = _Connection(self, writer)
        try:
            writer.write(self._hello)
            while True:
                head = await reader.readexactly(LENGTH_BYTES)
                size = int.from_bytes(head, "big")
                if size > MAX_REQUEST_BYTES:
                    await connection.answer_failure(
                        ErrorStatus(413, f"{size}-byte request, over {MAX_REQUEST_BYTES}")
                    )
                    return
                record = await reader.readexactly(size)
                if not await connection.handle(record):
                    return
        except (asyncio.IncompleteReadError, ConnectionError):
            return  # the client went away
        finally:
            self._handlers.discard(task)
            connection.close()
            writer.close()

    def watch(self, pid: int | None, names: list[str]) -> None:
        """Unlink `names` once the process `pid` (which named them) is found dead."""
        if pid is None or not names:
            return
        task = asyncio.get_running_loop().create_task(_unlink_when_dead(pid, names))
        self._watches.add(task)
        task.add_done_callback(self._watches.discard)


class _Connection:
    """One client's connection: its peer, the segments it named, its requests."""

    def __init__(self, edge: IpcEdge, writer: asyncio.StreamWriter) -> None:
        self.edge = edge
        self.pipeline = edge.pipeline
        self.writer = writer
        self.pid = _peer_pid(writer)
        self.segments: OrderedDict[str, tuple[Segment, AdoptedSlot | None]] = OrderedDict()
        self.named: list[str] = []

    async def handle(self, record: bytes) -> bool:
        """Answer one request; False when the connection should end."""
        started = time.perf_counter()
        try:
            request = decode_request(record)
        except (msgspec.DecodeError, msgspec.ValidationError) as exc:
            await self.answer_failure(ErrorStatus(400, f"unreadable ipc request: {exc}"))
            return False
        expected = self.pipeline.config.api_key
        if expected is not None and not _key_matches(request.api_key, expected):
            REFUSALS.info(f"refused ipc request from pid {self.pid}: no valid API key")
            await self.answer_failure(ErrorStatus(401, _UNAUTHORIZED))
            return False
        if isinstance(request, Metadata):
            await self.send(Answer(200, CONTENT_TYPES["msgpack"], self.pipeline.handshake))
            return True
        await self.infer(request, started)
        return True

    async def infer(self, request: Infer, started: float) -> None:
        pipeline = self.pipeline
        request_id: str | None = None
        memory: RequestMemory | None = None
        try:
            slot, frames, used = self.frames(request)
            decoded = await pipeline.decode_document(
                with_frames(loads(request.body, "msgpack"), frames), "msgpack"
            )
            request_id = decoded.request_id
            runner = pipeline.runner
            if slot is not None and isinstance(runner, WorkerRunner):
                memory = runner.lend_adopted(slot, used)
            reply = await pipeline.answer(decoded, form="asked", started=started, memory=memory)
            answer = Answer(200, CONTENT_TYPES["msgpack"], dumps(reply, "msgpack"))
        except Exception as exc:  # every failure is an answer, never a crash
            await self.answer_failure(failure(exc, request_id, pipeline.failures))
            return
        finally:
            if memory is not None:
                memory.release()
        pipeline.metrics.count(ROUTE, 200)
        await self.send(answer)

    def frames(self, request: Infer) -> tuple[AdoptedSlot | None, SharedFrames, int]:
        """The request's colour and depth frames as read-only arrays viewing its segment, the
        segment's slot (None where the runner has no worker) and the bytes the frames span."""
        segment, slot = self.segment(request.segment)
        buffer = segment.buf.toreadonly()
        images: dict[str, np.ndarray] = {}
        depth: dict[str, np.ndarray] = {}
        used = 0
        for kind, layouts, into in (("images", request.frames, images),
                                    ("depth", request.depth, depth)):  # fmt: skip
            for layout in layouts:
                into[layout.camera] = frame = _view(buffer, layout, kind)
                used = max(used, layout.offset + frame.nbytes)
        return slot, SharedFrames(images, depth), used

    def segment(self, name: str) -> tuple[Segment, AdoptedSlot | None]:
        """The client's segment `name`, mapped here (once per connection)."""
        known = self.segments.get(name)
        if known is not None:
            self.segments.move_to_end(name)
            return known
        owner = client_owner(name)
        if owner is None:
            raise InvalidObservationError(f"{name!r} is not the name of a client's segment")
        if owner[0] == self.edge.namespace and owner[1] != self.pid:
            raise InvalidObservationError(
                f"segment {name} belongs to process {owner[1]}, not to this connection's "
                f"({self.pid}): a client sends only the segments it made"
            )
        try:
            segment = Segment.attach(name)
        except FileNotFoundError:
            raise InvalidObservationError(
                f"segment {name} is not in the server's /dev/shm: client and server must share "
                "it (on one host, or containers run with --ipc=host; docs/server.md)"
            ) from None
        except PermissionError:
            raise InvalidObservationError(
                f"segment {name} belongs to another user; the server maps its own user's only"
            ) from None
        runner = self.pipeline.runner
        slot = runner.adopt(segment) if isinstance(runner, WorkerRunner) else None
        self.segments[name] = (segment, slot)
        self.named.append(name)
        while len(self.segments) > SEGMENTS_PER_CONNECTION:
            self._let_go(*self.segments.popitem(last=False)[1])
        return segment, slot

    async def answer_failure(self, status: ErrorStatus) -> None:
        self.pipeline.metrics.count(ROUTE, status.status)
        headers = {} if status.retry_after is None else {"retry-after": f"{status.retry_after:g}"}
        body = dumps({"detail": status.detail}, "json")
        await self.send(Answer(status.status, CONTENT_TYPES["json"], body, headers))

    async def send(self, answer: Answer) -> None:
        self.writer.write(framed(answer))
        await self.writer.drain()

    def close(self) -> None:
        """Let go of every segment; unlink them too if the client has died."""
        for segment, slot in self.segments.values():
            self._let_go(segment, slot)
        self.segments.clear()
        self.edge.watch(self.pid, self.named)

    def _let_go(self, segment: Segment, slot: AdoptedSlot | None) -> None:
        runner = self.pipeline.runner
        if slot is not None and isinstance(runner, WorkerRunner):
            runner.let_go(slot)
        else:
            segment.close()


FRAME_FORMS = {"images": ("HxWx3", 3, ("uint8",)), "depth": ("HxW", 2, DEPTH_DTYPES)}
"""What a frame in shared memory may be, by where it goes in the observation: what to call
it, its dimensions (a colour frame's third is 3) and its dtypes."""


def _view(buffer: memoryview, layout: FrameLayout, kind: str) -> np.ndarray:
    """The frame `layout` places in `buffer`, a read-only view, if it is what `FRAME_FORMS`
    says for `kind` (``images`` or ``depth``) and lies wholly inside the segment; else the
    request's 400, naming the frame."""
    wanted, ndim, dtypes = FRAME_FORMS[kind]
    shape, where = layout.shape, f"input.observation.{kind}.{layout.camera}"
    if (
        len(shape) != ndim
        or (ndim == 3 and shape[2] != 3)
        or min(shape) < 1
        or layout.offset < 0
        or layout.dtype not in dtypes
    ):
        raise InvalidObservationError(
            f"{where}: a frame in shared memory is {wanted} {' or '.join(dtypes)} at an "
            f"offset; got {layout.dtype} of shape {list(shape)} at {layout.offset}"
        )
    dtype = np.dtype(layout.dtype)
    end = layout.offset + math.prod(shape) * dtype.itemsize
    if end > len(buffer):
        raise CodecError(
            f"{where}: the frame ends at byte {end}, past the end of its segment "
            f"({len(buffer)} bytes)"
        )
    frame: np.ndarray = np.ndarray(shape, dtype, buffer, layout.offset)
    return frame


def _key_matches(presented: str | None, expected: str) -> bool:
    if not presented:
        return False
    return hmac.compare_digest(presented.encode(), expected.encode())


def _peer_pid(writer: asyncio.StreamWriter) -> int | None:
    """The connected process's pid (``SO_PEERCRED``, Linux), None where it cannot be read."""
    sock: Any = writer.get_extra_info("socket")
    option = getattr(socket, "SO_PEERCRED", None)
    if sock is None or option is None:
        return None
    try:
        pid, _, _ = struct.unpack("3i", sock.getsockopt(socket.SOL_SOCKET, option, 12))
    except OSError:
        return None
    return int(pid)


async def _unlink_when_dead(pid: int, names: list[str]) -> None:
    """Unlink `names` if `pid` dies within `DEATH_WATCH_S` of closing its connection."""
    deadline = time.monotonic() + DEATH_WATCH_S
    while time.monotonic() < deadline:
        if process_gone(pid):
            for name in names:  # each checked as this process's when it was first named
                unlink_name(name)
            return
        await asyncio.sleep(0.05)
