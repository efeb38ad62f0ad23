"""POSIX shared-memory segments: what the server's slots and the ``ipc://`` clients map.

A `Segment` is a named region of ``/dev/shm`` mapped into this process. The server's entrypoint
makes them for the requests it reads (`vla_client.server.worker.shm`) and its worker maps them;
a client of ``ipc://`` makes its own (`vla_client.transports.ipc_memory`), writes each frame
into one once, and the server's worker reads the frames there. Every name starts with
`SEGMENT_PREFIX`, so a leak is easy to spot in ``/dev/shm``; a client's names also carry its
pid and pid namespace (`client_segment_name`), so that a survivor can tell the segments of a
client that died (`owner_is_dead`) and unlink them.
"""

from __future__ import annotations

import _posixshmem  # type: ignore[import-not-found]  # the module SharedMemory is built on
import contextlib
import mmap
import os
import re
import sys
from multiprocessing import resource_tracker

SEGMENT_PREFIX = "vlac_"
SHM_DIR = "/dev/shm"
CLIENT_MARK = "c"
"""What follows `SEGMENT_PREFIX` in a client's segment names (the server's start with a pid)."""
_CLIENT_NAME = re.compile(rf"^{SEGMENT_PREFIX}{CLIENT_MARK}(\d+)_(\d+)_[0-9a-f]+_\d+$")


def shm_space() -> tuple[int, int]:
    """The size of ``/dev/shm`` and the bytes free there."""
    stats = os.statvfs(SHM_DIR)
    return stats.f_blocks * stats.f_frsize, stats.f_bavail * stats.f_frsize


def pid_namespace() -> int:
    """This process's pid namespace (its inode number), 0 where the system does not say: pids
    mean something only within one namespace (a container has its own)."""
    try:
        return os.stat("/proc/self/ns/pid").st_ino
    except OSError:
        return 0


def client_segment_name(tag: str, number: int) -> str:
    """The name of a client's segment: the prefix, its pid namespace and pid, the pool's `tag`
    (random hex) and the segment's `number`."""
    return f"{SEGMENT_PREFIX}{CLIENT_MARK}{pid_namespace()}_{os.getpid()}_{tag}_{number}"


def client_owner(name: str) -> tuple[int, int] | None:
    """The pid namespace and pid of the client that made the segment `name`; None for a name
    that is not a client's."""
    match = _CLIENT_NAME.match(name)
    return None if match is None else (int(match[1]), int(match[2]))


def owner_is_dead(name: str) -> bool:
    """Whether `name` is a client segment whose maker, in this pid namespace, has exited. A
    segment from another namespace is never judged (its pid means nothing here)."""
    owner = client_owner(name)
    return owner is not None and owner[0] == pid_namespace() and process_gone(owner[1])


def process_gone(pid: int) -> bool:
    """Whether process `pid` has exited: it is no more, or a zombie its parent has yet to
    reap (killed, it holds nothing)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:  # alive, another user's
        return False
    try:
        with open(f"/proc/{pid}/stat") as stat:
            state = stat.read().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state in ("Z", "X")


def sweep_dead_clients() -> list[str]:
    """Unlink every client segment in ``/dev/shm`` whose maker has died (killed before it could
    unlink them); the names unlinked."""
    try:
        names = os.listdir(SHM_DIR)
    except OSError:
        return []
    swept = []
    for name in names:
        if name.startswith(SEGMENT_PREFIX + CLIENT_MARK) and owner_is_dead(name):
            with contextlib.suppress(FileNotFoundError, PermissionError):
                _posixshmem.shm_unlink(f"/{name}")
                swept.append(name)
    return swept


def unlink_name(name: str) -> None:
    """Remove the segment `name` from ``/dev/shm`` (gone already: nothing to do)."""
    with contextlib.suppress(FileNotFoundError):
        _posixshmem.shm_unlink(f"/{name}")


class Segment:
    """A POSIX shared-memory segment mapped into this process (`buf` is the whole of it).

    This is `multiprocessing.shared_memory.SharedMemory` less two of its habits, both wrong for a
    server that gives segments up while views of them may still live:

    - `SharedMemory` keeps the segment's file descriptor open beside the mapping until `close()`,
      and `close()` raises `BufferError` while any view exists. A segment dropped in that state
      (its `__del__` fails the same way) kept its descriptor, and the memory the descriptor
      pins, for the life of the process: the leak behind 408s. Here the descriptor is closed as
      soon as the mapping exists, and the mapping is owned by its `mmap` object, which unmaps
      itself (and closes the duplicate descriptor `mmap` keeps before Python 3.13) when the last
      view of it goes. A `close()` that must wait therefore frees everything later, by itself.
    - On Python before 3.13, *attaching* to an existing segment registers it with this process's
      resource tracker, which unlinks what it tracks when the process dies. The worker used to
      register and then unregister at once; a worker killed in between had its tracker unlink a
      segment the entrypoint was still using. `attach` never calls the tracker, so there is no
      such moment. `create` does register, so that if the entrypoint (the owner) is killed
      outright, its tracker unlinks the segments it made.
    """

    def __init__(self, name: str, mapping: mmap.mmap) -> None:
        self.name = name
        self.size = len(mapping)
        self._mmap = mapping
        self.buf = memoryview(mapping)

    @classmethod
    def create(cls, name: str, size: int) -> Segment:
        """A new segment of `size` bytes, owned by this process (unlink it when done), its pages
        reserved: `OSError` with ``ENOSPC`` when ``/dev/shm`` lacks the room."""
        fd = _posixshmem.shm_open(f"/{name}", os.O_CREAT | os.O_EXCL | os.O_RDWR, mode=0o600)
        try:
            os.ftruncate(fd, size)
            if size and hasattr(os, "posix_fallocate"):  # not on macOS: its segments are no files
                os.posix_fallocate(fd, 0, size)
            mapping = _map(fd, size)
        except BaseException:
            os.close(fd)
            _posixshmem.shm_unlink(f"/{name}")
            raise
        os.close(fd)
        resource_tracker.register(f"/{name}", "shared_memory")
        return cls(name, mapping)

    @classmethod
    def attach(cls, name: str) -> Segment:
        """Map an existing segment another process owns; no resource tracker is involved."""
        fd = _posixshmem.shm_open(f"/{name}", os.O_RDWR, mode=0o600)
        try:
            mapping = _map(fd, os.fstat(fd).st_size)
        finally:
            os.close(fd)
        return cls(name, mapping)

    def discard(self, start: int = 0) -> None:
        """Give the pages from `start` (rounded up to a page) to the end back to ``/dev/shm``
        now, even while a view or another process (the worker) still maps them: for memory
        nothing will read again. They read as zeros afterwards. Linux only (``MADV_REMOVE``);
        elsewhere the pages go when the last mapping does."""
        start = -(-start // mmap.PAGESIZE) * mmap.PAGESIZE
        if start < self.size and hasattr(mmap, "MADV_REMOVE"):
            self._mmap.madvise(mmap.MADV_REMOVE, start, self.size - start)

    def close(self) -> bool:
        """Unmap now; False while a view still uses the segment (it is unmapped when the last
        one goes, and nothing more needs doing)."""
        try:
            self.buf.release()
            self._mmap.close()
        except BufferError:
            return False
        return True

    def unlink(self) -> None:
        """Remove the name (the owner's job): the memory goes once nothing maps it."""
        with contextlib.suppress(FileNotFoundError):
            _posixshmem.shm_unlink(f"/{self.name}")
        resource_tracker.unregister(f"/{self.name}", "shared_memory")


def _map(fd: int, size: int) -> mmap.mmap:
    if sys.version_info >= (3, 13):  # the mapping needs no descriptor of its own
        return mmap.mmap(fd, size, trackfd=False)
    return mmap.mmap(fd, size)
