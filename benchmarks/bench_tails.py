"""The torch policy's inference time on a busy machine, per OpenMP setting of the worker.

    PYTHONPATH=src python benchmarks/bench_tails.py [--requests N] [--busy K]

A `WorkerRunner` serves a torch policy in its worker process while K processes (default 2)
spin on a core each beside it (``while True: pass``, each bounded in time and killed at the
end). For each policy and setting it sends N requests one after another (default 100, after 5
unmeasured) and prints p50 and p90 of the worker's ``inference_ms`` (the policy call, timed in
the worker) and their ratio; the target is p90/p50 <= 1.5. The policies:

- ``torch-cnn``: `TorchCNNPolicy` (``serve --policy torch``), 3 cameras 240x320, 14-dim state,
  horizon 50: a few milliseconds a pass, shorter than the scheduler's time slice, so its p90
  on a loaded machine is one slice or two whatever OpenMP does;
- ``mlp-60ms``: `DenseStack`, a stack of dense layers sized to about 60 ms a pass on one core
  (a small ACT takes 170 ms), where OpenMP's threads decide the tail.

The settings:

- ``torch defaults``: the worker's environment as vla-client 0.2.0 left it: no
  ``OMP_NUM_THREADS`` (torch takes one thread per core) and no ``OMP_WAIT_POLICY`` (the
  OpenMP runtime spins a while before it sleeps);
- ``spinning``: ``OMP_WAIT_POLICY=ACTIVE``, a thread per core;
- ``passive, a thread per core``: ``OMP_WAIT_POLICY=PASSIVE``, ``--torch-threads`` = the cores;
- ``default``: what the worker does now (`vla_client.server.worker.threads`).

The machine's other load is whatever else runs on it; the load average is printed.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import os
import statistics
import subprocess
import sys
from collections.abc import Mapping
from typing import Any

import numpy as np

from vla_client.server import PolicyInput
from vla_client.server.config import WorkerSettings
from vla_client.server.policies.torch_cnn import TorchCNNPolicy
from vla_client.server.policy import Policy, PolicySpec
from vla_client.server.worker import WorkerRunner
from vla_client.server.worker.threads import (
    THREADS_ENV,
    WAIT_POLICY_ENV,
    WorkerThreads,
    usable_cores,
)

CAMERAS, HEIGHT, WIDTH, STATE_DIM, HORIZON = 3, 240, 320, 14, 50
WARM_UP = 5
BUSY_LIMIT_S = 600  # a spinning process ends by itself after this, should this script die


class TorchDefaults(WorkerThreads):
    """The worker's environment before the thread settings: neither variable set."""

    def environment(self, base: Mapping[str, str]) -> dict[str, str]:
        return {k: v for k, v in base.items() if k not in (THREADS_ENV, WAIT_POLICY_ENV)}


class DenseStack(Policy):
    """Dense layers over 64 tokens of 1024 features: the compute of a small transformer,
    without the attention; the chunk is read off the first tokens. Seeded, nothing loaded."""

    def __init__(self, layers: int = 28) -> None:
        self.layers = layers
        self._model: Any = None

    @property
    def spec(self) -> PolicySpec:
        return PolicySpec(family="dense-stack", action_horizon=HORIZON, action_dim=STATE_DIM)

    def load(self) -> None:
        import torch

        torch.manual_seed(0)
        blocks = [torch.nn.Sequential(torch.nn.Linear(1024, 1024), torch.nn.GELU())]
        self._model = torch.nn.Sequential(*(blocks * self.layers)).eval()

    def infer(self, observation: PolicyInput) -> np.ndarray:
        import torch

        state = torch.from_numpy(np.array(observation.state, np.float32))
        tokens = state.repeat(64, 1024 // STATE_DIM + 1)[:, :1024]
        with torch.inference_mode():
            out = self._model(tokens)
        return out[:HORIZON, :STATE_DIM].numpy()


def observation(rng: np.random.Generator) -> PolicyInput:
    images = {
        f"cam{i}": rng.integers(0, 256, (HEIGHT, WIDTH, 3), dtype=np.uint8) for i in range(CAMERAS)
    }
    return PolicyInput(images=images, state=rng.standard_normal(STATE_DIM).astype(np.float32))


def make_policy(name: str) -> Policy:
    if name == "torch-cnn":
        return TorchCNNPolicy(
            action_horizon=HORIZON, action_dim=STATE_DIM, state_dim=STATE_DIM, device="cpu"
        )
    return DenseStack()


async def inference_times(
    policy_name: str,
    torch_threads: int | None,
    wait_policy: str | None,
    before: bool,
    requests: int,
) -> list[float]:
    """`inference_ms` of `requests` requests, one at a time, to a fresh worker."""
    saved = os.environ.pop(WAIT_POLICY_ENV, None)
    if wait_policy is not None:
        os.environ[WAIT_POLICY_ENV] = wait_policy
    try:
        runner = WorkerRunner(make_policy(policy_name), WorkerSettings(torch_threads=torch_threads))
    finally:
        os.environ.pop(WAIT_POLICY_ENV, None)
        if saved is not None:
            os.environ[WAIT_POLICY_ENV] = saved
    if before:
        runner._worker.threads = TorchDefaults("unset", "torch", "unset", "OpenMP")  # type: ignore[union-attr]
    await runner.start()
    rng = np.random.default_rng(0)
    times = []
    try:
        for index in range(WARM_UP + requests):
            _, timings = await runner.infer(observation(rng))
            if index >= WARM_UP:
                times.append(timings["inference_ms"])
    finally:
        await runner.close()
    return times


def spinner() -> subprocess.Popen[bytes]:
    code = (
        f"import time\nend = time.monotonic() + {BUSY_LIMIT_S}\nwhile time.monotonic() < end: pass"
    )
    return subprocess.Popen([sys.executable, "-c", code])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=100)
    parser.add_argument(
        "--policy", choices=("torch-cnn", "mlp-60ms"), action="append", help="default: both"
    )
    parser.add_argument("--busy", type=int, default=2, help="spinning processes beside it")
    args = parser.parse_args()
    cores = usable_cores()
    settings = [
        ("torch defaults (0.2.0)", None, None, True),
        ("spinning (ACTIVE), a thread per core", cores, "ACTIVE", False),
        ("passive, a thread per core", cores, "PASSIVE", False),
        ("default now", None, None, False),
    ]
    for variable in (THREADS_ENV, WAIT_POLICY_ENV):
        if variable in os.environ:
            sys.exit(f"unset {variable} first: the settings here set it themselves")
    busy = [spinner() for _ in range(args.busy)]
    try:
        print(
            f"{datetime.datetime.now(datetime.UTC):%Y-%m-%d %H:%M} UTC; {cores} usable cores, "
            f"{args.busy} spinning processes beside the server, load average "
            f"{os.getloadavg()[0]:.1f}; {args.requests} requests per setting, worker "
            "inference_ms"
        )
        print(f"{'policy':10} {'setting':38} {'p50 ms':>8} {'p90 ms':>8} {'max ms':>8} p90/p50")
        for policy in args.policy or ("torch-cnn", "mlp-60ms"):
            for name, threads, wait_policy, before in settings:
                times = asyncio.run(
                    inference_times(policy, threads, wait_policy, before, args.requests)
                )
                p50, p90 = statistics.median(times), statistics.quantiles(times, n=10)[8]
                print(
                    f"{policy:10} {name:38} {p50:8.1f} {p90:8.1f} {max(times):8.1f} "
                    f"{p90 / p50:7.2f}",
                    flush=True,
                )
    finally:
        for process in busy:
            process.kill()
            process.wait()


if __name__ == "__main__":
    main()
