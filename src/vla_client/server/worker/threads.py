"""How many threads the inference worker's torch (OpenMP) may run, and how they wait.

A torch forward pass on the CPU splits its work over an OpenMP thread pool. By default that
pool has one thread per core and its threads spin ("active" waiting) between parallel regions,
for microseconds to milliseconds, so the next region starts without a wake-up. On a machine
where other processes want the same cores (the entrypoints decoding frames, a camera driver,
a second model) the spinning threads hold cores that the threads with real work wait for, and
a region cannot end until its slowest thread is scheduled: a 170 ms forward pass then takes
seconds now and then (docs/server.md, "Threads"). So the worker starts with

- ``OMP_NUM_THREADS``: `WorkerSettings.torch_threads` when given (``serve --torch-threads
  N``); else the user's own ``OMP_NUM_THREADS`` if set; else `default_torch_threads`, the
  cores this process may run on less one per entrypoint process, at least 1;
- ``OMP_WAIT_POLICY=PASSIVE`` (threads sleep when idle) unless the user set it.

Both are environment variables of the worker, set before it starts, since OpenMP reads them
once, when it loads; torch's intra-op thread count follows ``OMP_NUM_THREADS``. The entrypoint
never imports torch, so nothing here does either.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass

THREADS_ENV = "OMP_NUM_THREADS"
WAIT_POLICY_ENV = "OMP_WAIT_POLICY"
WAIT_POLICIES = ("ACTIVE", "PASSIVE")
DEFAULT_WAIT_POLICY = "PASSIVE"


def usable_cores() -> int:
    """The cores this process may run on: its CPU affinity (a container's or ``taskset``'s
    limit), or every core where the platform has no affinity call (macOS)."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def default_torch_threads(entrypoints: int = 1) -> int:
    """The worker's default thread count: the usable cores less one per entrypoint process
    (each decodes bodies and answers on its own event loop), at least 1."""
    return max(1, usable_cores() - entrypoints)


def check_torch_threads(option: str, value: object) -> None:
    """Raise `ValueError` unless `value` is None (the default) or an integer from 1 to the
    usable cores, naming `option`. More threads than cores is the oversubscription that makes
    the tail (and torch would quietly cap a larger ``OMP_NUM_THREADS`` at the cores anyway)."""
    if value is None:
        return
    cores = usable_cores()
    if not isinstance(value, int) or isinstance(value, bool) or not 1 <= value <= cores:
        raise ValueError(
            f"{option} must be an integer in 1..{cores} (the cores this process may use), or "
            f"unset for the default ({default_torch_threads()} here); got {value!r}"
        )


def check_wait_policy(environ: Mapping[str, str]) -> None:
    """Raise `ValueError` if ``OMP_WAIT_POLICY`` is set to something OpenMP does not know
    (OpenMP would ignore it without a word and spin)."""
    given = environ.get(WAIT_POLICY_ENV)
    if given is not None and given.strip().upper() not in WAIT_POLICIES:
        raise ValueError(
            f"{WAIT_POLICY_ENV} must be ACTIVE or PASSIVE (or unset for PASSIVE); got {given!r}"
        )


@dataclass(frozen=True)
class WorkerThreads:
    """The worker's OpenMP settings: `threads` (``OMP_NUM_THREADS``, the user's text when it
    was theirs) and `wait_policy`, and where each came from (``"option"``, ``"environment"``
    or ``"default"``), for the start-up log line."""

    threads: str
    threads_from: str
    wait_policy: str
    wait_policy_from: str

    def environment(self, base: Mapping[str, str]) -> dict[str, str]:
        """`base` (the server's environment) with these two variables set."""
        return {**base, THREADS_ENV: self.threads, WAIT_POLICY_ENV: self.wait_policy}

    def describe(self) -> str:
        return (
            f"{THREADS_ENV}={self.threads} ({self.threads_from}), "
            f"{WAIT_POLICY_ENV}={self.wait_policy} ({self.wait_policy_from})"
        )


def worker_threads(
    torch_threads: int | None, entrypoints: int, environ: Mapping[str, str]
) -> WorkerThreads:
    """The settings for a worker behind `entrypoints` entrypoint processes, `torch_threads`
    as configured (None: the user's ``OMP_NUM_THREADS``, else the default). Raises `ValueError`
    for a bad `torch_threads` or ``OMP_WAIT_POLICY``."""
    check_torch_threads("torch_threads", torch_threads)
    check_wait_policy(environ)
    if torch_threads is not None:
        threads, threads_from = str(torch_threads), "option"
    elif environ.get(THREADS_ENV):
        threads, threads_from = environ[THREADS_ENV], "environment"
    else:
        threads, threads_from = str(default_torch_threads(entrypoints)), "default"
    if environ.get(WAIT_POLICY_ENV) is not None:
        wait_policy, wait_from = environ[WAIT_POLICY_ENV], "environment"
    else:
        wait_policy, wait_from = DEFAULT_WAIT_POLICY, "default"
    return WorkerThreads(threads, threads_from, wait_policy, wait_from)
