"""One saved ACT served by LeRobot's async-inference PolicyServer and by ``vla-client serve``.

    PYTHONPATH=src /path/to/lerobot-venv/bin/python benchmarks/bench_lerobot.py [--repeats N]

Runs in the venv `.ci/lerobot_venv.sh` builds. The small ACT of the LeRobot tests (two cameras
96x128, state 6, chunks of 10x5; random weights, `save_pretrained` into a temporary folder) is
served twice, both on 127.0.0.1, both with one torch thread:

- ``lerobot``: ``python -m lerobot.async_inference.policy_server`` (gRPC, pickled
  ``TimedObservation`` in, pickled ``TimedAction`` list out), driven with its own stub calls as
  its RobotClient makes them: ``SendObservations`` (``send_bytes_in_chunks``), then
  ``GetActions``; ``must_go`` so no observation is filtered, ``inference_latency=0`` so it
  does not sleep;
- ``vla-client``: ``vla-client serve --policy lerobot --policy-option path=DIR``, driven by
  `ActionClient` (raw frames, msgpack).

The same observation goes to both in alternation (the order swapped every round). Printed per
path: end-to-end p50/p90, request and reply bytes, and the transport share, 1 - compute/end to
end at p50. vla-client's compute is the server's own ``total_ms`` per reply (its
``model_ms``, predict_action_chunk alone, is printed too); PolicyServer
reports none, so its compute is the same steps (LeRobot's preparation, preprocessor,
predict_action_chunk, postprocessor) timed in this process on the same thread count, an
estimate. Both chunks are checked equal first.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import pickle
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import grpc
import httpx
import numpy as np
import torch
from lerobot.async_inference.helpers import RemotePolicyConfig, TimedObservation
from lerobot.transport import services_pb2, services_pb2_grpc
from lerobot.transport.utils import send_bytes_in_chunks

import vla_client
from vla_client import ActionClient, Observation

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "lerobot"))
import lerobot_folders as folders

THREADS = str(folders.TORCH_THREADS)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@contextlib.contextmanager
def running(command: list[str], ready: Callable[[], bool], cwd: Path) -> Iterator[None]:
    """`command` in a subprocess with one OpenMP thread, once `ready()` says so."""
    source = str(Path(vla_client.__file__).resolve().parents[1])  # the vla_client imported here
    path = os.pathsep.join([source, os.environ.get("PYTHONPATH", "")])
    env = {**os.environ, "PYTHONPATH": path, "OMP_NUM_THREADS": THREADS, "HF_HUB_OFFLINE": "1"}
    log = (cwd / f"{Path(command[2]).name}.log").open("wb")
    process = subprocess.Popen(command, cwd=cwd, env=env, stdout=log, stderr=log)
    try:
        deadline = time.monotonic() + 300
        while not ready():
            if process.poll() is not None or time.monotonic() > deadline:
                log.flush()
                raise RuntimeError(f"{command[:4]} did not start: {log.name} says "
                                   f"{Path(log.name).read_text()[-1000:]}")  # fmt: skip
            time.sleep(0.2)
        yield
    finally:
        process.terminate()
        process.wait(timeout=30)
        log.close()


def healthy(port: int) -> bool:
    try:
        return httpx.get(f"http://127.0.0.1:{port}/health", timeout=1).status_code == 200
    except httpx.TransportError:
        return False


class LeRobotClient:
    """PolicyServer's client side without a robot: its stub, its messages, its chunking."""

    def __init__(self, port: int, folder: Path, features: dict[str, Any]) -> None:
        self.channel = grpc.insecure_channel(f"127.0.0.1:{port}")
        grpc.channel_ready_future(self.channel).result(timeout=300)
        self.stub = services_pb2_grpc.AsyncInferenceStub(self.channel)
        self.stub.Ready(services_pb2.Empty())
        config = RemotePolicyConfig(
            policy_type="act",
            pretrained_name_or_path=str(folder),
            lerobot_features=features,
            actions_per_chunk=folders.ACT_CHUNK,
            device="cpu",
        )
        self.stub.SendPolicyInstructions(services_pb2.PolicySetup(data=pickle.dumps(config)))
        self.timestep = 0
        self.sent = self.received = 0

    def infer(self, raw: dict[str, Any]) -> np.ndarray:
        self.timestep += 1
        observation = TimedObservation(
            timestamp=time.time(), timestep=self.timestep, observation=raw, must_go=True
        )
        body = pickle.dumps(observation)
        self.stub.SendObservations(send_bytes_in_chunks(body, services_pb2.Observation))
        reply = self.stub.GetActions(services_pb2.Empty())
        actions = pickle.loads(reply.data)  # its own server's reply, as its client reads it
        self.sent, self.received = len(body), len(reply.data)
        return torch.stack([action.get_action() for action in actions]).numpy()


def percentile(values: list[float], q: float) -> float:
    return float(np.percentile(values, q))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=100)
    args = parser.parse_args()
    if args.repeats < 1:
        parser.error("--repeats must be at least 1")
    os.environ["HF_HUB_OFFLINE"] = "1"
    torch.set_num_threads(folders.TORCH_THREADS)
    frames, state = folders.observation(seed=1)
    with tempfile.TemporaryDirectory() as temporary:
        work = Path(temporary)
        folder = folders.save_folder(folders.act_config(), work / "act")
        reference = folders.LeRobotReference(folder)
        raw: dict[str, Any] = {**frames, **{f"joint_{i}": float(v) for i, v in enumerate(state)}}
        ours, theirs = free_port(), free_port()
        serve = [sys.executable, "-m", "vla_client.cli", "serve", "--port", str(ours),
                 "--policy", "lerobot", "--policy-option", f"path={folder}",
                 "--torch-threads", THREADS]  # fmt: skip
        policy_server = [sys.executable, "-m", "lerobot.async_inference.policy_server",
                         "--host=127.0.0.1", f"--port={theirs}", "--inference_latency=0",
                         "--obs_queue_timeout=30"]  # fmt: skip
        with (
            running(serve, lambda: healthy(ours), work),
            running(policy_server, lambda: True, work),  # the channel waits for it below
            ActionClient(
                f"http://127.0.0.1:{ours}", encoding="raw", wire="msgpack", timeout_s=60
            ) as client,  # fmt: skip
        ):
            lerobot = LeRobotClient(theirs, folder, reference.features)
            observation = Observation(frames, state=state)
            same = np.array_equal(lerobot.infer(raw), client.infer(observation).actions)
            same = same and np.array_equal(lerobot.infer(raw), reference.chunk(frames, state))
            results: dict[str, dict[str, list[float]]] = {
                name: {"e2e": [], "compute": []} for name in ("lerobot", "vla-client")
            }
            ours_bytes = (0, 0)
            model_ms: list[float] = []

            def run_lerobot() -> None:
                start = time.perf_counter()
                lerobot.infer(raw)
                results["lerobot"]["e2e"].append((time.perf_counter() - start) * 1000)
                start = time.perf_counter()
                reference.chunk(frames, state)
                results["lerobot"]["compute"].append((time.perf_counter() - start) * 1000)

            def run_ours() -> None:
                nonlocal ours_bytes
                start = time.perf_counter()
                result = client.infer(observation)
                results["vla-client"]["e2e"].append((time.perf_counter() - start) * 1000)
                results["vla-client"]["compute"].append(result.timings.server["total_ms"])
                model_ms.append(result.timings.server["model_ms"])
                ours_bytes = (result.timings.bytes_sent, result.timings.bytes_received)

            for round_ in range(args.repeats):
                for run in (run_lerobot, run_ours) if round_ % 2 == 0 else (run_ours, run_lerobot):
                    run()
    load = ", ".join(f"{value:.2f}" for value in os.getloadavg())
    print(f"{datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC, load average {load}, "
          f"{os.cpu_count()} cores, {args.repeats} requests each, alternating")  # fmt: skip
    print(f"chunks equal (LeRobot PolicyServer, vla-client, LeRobot in process): {same}")
    sizes = {"lerobot": (lerobot.sent, lerobot.received), "vla-client": ours_bytes}
    print(f"{'path':<11} {'p50 ms':>8} {'p90 ms':>8} {'request B':>10} {'reply B':>8} "
          f"{'compute p50':>12} {'transport':>10}")  # fmt: skip
    for name, timing in results.items():
        p50 = statistics.median(timing["e2e"])
        compute = statistics.median(timing["compute"])
        sent, received = sizes[name]
        print(f"{name:<11} {p50:8.1f} {percentile(timing['e2e'], 90):8.1f} {sent:10d} "
              f"{received:8d} {compute:12.1f} {1 - compute / p50:9.0%}")  # fmt: skip
    ratio = statistics.median(results["lerobot"]["e2e"]) / statistics.median(
        results["vla-client"]["e2e"]
    )
    print(f"p50 end to end, lerobot / vla-client: {ratio:.2f}x")
    print(f"vla-client's model_ms (predict_action_chunk alone) p50: "
          f"{statistics.median(model_ms):.1f} ms")  # fmt: skip


if __name__ == "__main__":
    main()
