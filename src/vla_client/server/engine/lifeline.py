"""End a child process of the server when the process that started it dies, however it dies.

A parent killed with SIGKILL (by an operator, the OOM killer, a container runtime) runs no
cleanup, so its children must notice by themselves; otherwise entrypoints keep the port and
answer ``/health`` with no worker behind them, and a restart finds the port taken.

On Linux the kernel does the noticing: ``prctl(PR_SET_PDEATHSIG, sig)`` asks for `sig` the
moment the parent goes. It is chosen over a pipe the child watches because it needs no
descriptor passed through uvicorn's or the worker's start-up and no thread, and it fires even
while the child is busy (a worker inside a long policy call). It is set first thing in the
child, and the parent's pid is compared right after: a parent that died before the call is
gone without a signal. The signal is sent when the *thread* that started the child ends; the
server starts its children from threads that live as long as the children are needed (the
event loop's thread, uvicorn's supervisor on the main thread). Elsewhere (macOS) a daemon
thread compares the parent's pid twice a second.
"""

from __future__ import annotations

import ctypes
import os
import sys
import threading
import time

_PR_SET_PDEATHSIG = 1
_POLL_S = 0.5


def end_with_parent(parent_pid: int, signum: int) -> None:
    """Send `signum` to this process when the process `parent_pid` (its parent) ends."""
    if sys.platform.startswith("linux") and _set_parent_death_signal(signum):
        if os.getppid() != parent_pid:  # died before the kernel was asked to tell us
            os.kill(os.getpid(), signum)
        return
    threading.Thread(
        target=_watch, args=(parent_pid, signum), name="parent watch", daemon=True
    ).start()


def _set_parent_death_signal(signum: int) -> bool:
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return int(libc.prctl(_PR_SET_PDEATHSIG, signum, 0, 0, 0)) == 0
    except (OSError, AttributeError):  # no libc with prctl (musl builds without it, say)
        return False


def _watch(parent_pid: int, signum: int) -> None:
    while os.getppid() == parent_pid:
        time.sleep(_POLL_S)
    os.kill(os.getpid(), signum)
