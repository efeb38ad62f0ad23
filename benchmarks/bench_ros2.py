"""What does the live ROS 2 node add to the control loop, at 30 Hz with three 480x640 cameras?

Runs the same loop twice, alternating, for ``--rounds`` rounds of ``--seconds`` each: once fed by
`vla-client ros2`'s bridge (`RosBridge`: three ``sensor_msgs/Image`` rgb8 topics and a JointState,
published by a second node at the camera rate through a Zenoh router run in this process, the
commands published as ``Float64MultiArray`` and received by a third node), once fed by three
synthetic cameras called by the loop itself. Both ask the same fake policy (``--infer-ms``, as a
server and network would take, from `bench_control_loop.FakePolicy`), so the difference is the
node: reading, decoding and synchronising the messages, and publishing.

It prints, for each: the latency from the frame to the request (ROS: the newest message of the
synchronised set received -> the request sent, which includes waiting for the loop's next tick,
up to a period: the cameras run at ``--camera-rate``, 29 Hz, so that within a second their
frames arrive at every phase of the loop's ticks, as unsynchronised cameras do over a run;
synthetic: the frames rendered in the tick -> the request sent), the node's own work per tick
(reading the topics: `observe`), the tick jitter, and the jitter of the commands as their
subscriber receives them (inter-arrival minus the period); then the ratios, with the date and
the load. The tests assert no timing; this is where it is measured.

    PYTHONPATH=src python benchmarks/bench_ros2.py --seconds 5 --rounds 3

``--save FILE.json`` writes the figures for the Performance page
(``benchmarks/render_performance.py``).
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import json
import os
import platform
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
from bench_control_loop import FakePolicy

from vla_client.cameras.scene import synthetic_frames
from vla_client.client.result import ActionResult
from vla_client.control import ChunkExecutor, ControlLoop, Percentiles, percentiles
from vla_client.observation import Observation
from vla_client.ros2.bridge import RosBridge
from vla_client.ros2.graph import Node
from vla_client.ros2.names import typestore

CAMERAS = ("top", "left", "wrist")
JOINTS = [f"joint{i}" for i in range(1, 8)]


def router() -> tuple[Any, str]:
    """A Zenoh router on a free loopback port (rmw_zenohd's part), and its endpoint."""
    import zenoh

    config = zenoh.Config()
    config.insert_json5("mode", '"router"')
    config.insert_json5("listen/endpoints", '["tcp/127.0.0.1:0"]')
    config.insert_json5("scouting/multicast/enabled", "false")
    config.insert_json5("adminspace/enabled", "true")
    session = zenoh.open(config)
    zid = str(session.info.zid())
    for _ in range(50):
        for reply in session.get(f"@/{zid}/router", timeout=1.0):
            if reply.ok is not None:
                locators = json.loads(reply.ok.payload.to_string()).get("locators", [])
                tcp = [locator for locator in locators if locator.startswith("tcp/")]
                if tcp:
                    return session, str(tcp[0])
        time.sleep(0.05)
    raise RuntimeError("the router did not say where it listens")


class Robot:
    """Publishes three rgb8 cameras and a JointState at `rate_hz` from its own node."""

    def __init__(self, endpoint: str, height: int, width: int, rate_hz: float) -> None:
        self.node = Node("robot", router=endpoint)
        types = typestore().types
        self._types = types
        self._frames = synthetic_frames(len(CAMERAS), height, width, seed=3)
        self._cameras = {
            name: self.node.advertise(f"/{name}/image_raw", "sensor_msgs/msg/Image")
            for name in CAMERAS
        }
        self._state = self.node.advertise("/joint_states", "sensor_msgs/msg/JointState")
        self._period = 1.0 / rate_hz
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _header(self, stamp: float) -> Any:
        sec = int(stamp)
        time_ = self._types["builtin_interfaces/msg/Time"](
            sec=sec, nanosec=int((stamp - sec) * 1e9)
        )
        return self._types["std_msgs/msg/Header"](stamp=time_, frame_id="camera")

    def _run(self) -> None:
        image, joints = (
            self._types["sensor_msgs/msg/Image"],
            self._types["sensor_msgs/msg/JointState"],
        )
        empty = np.empty(0, dtype=np.float64)
        start = time.monotonic()
        tick = 0
        while not self._stop.is_set():
            tick += 1
            self._stop.wait(max(0.0, start + tick * self._period - time.monotonic()))
            header = self._header(time.time())
            for publisher, frame in zip(self._cameras.values(), self._frames.values(), strict=True):
                publisher.publish(image(
                    header=header, height=frame.shape[0], width=frame.shape[1], encoding="rgb8",
                    is_bigendian=0, step=frame.shape[1] * 3, data=frame.reshape(-1),
                ))  # fmt: skip
            self._state.publish(joints(
                header=header, name=JOINTS, position=np.zeros(len(JOINTS)), velocity=empty,
                effort=empty,
            ))  # fmt: skip

    def close(self) -> None:
        self._stop.set()
        self._thread.join(5)
        self.node.close()


class Timed:
    """`infer` that notes, for each request, the time from its frames to its sending."""

    def __init__(self, policy: FakePolicy, since: Callable[[Observation], float | None]) -> None:
        self.policy, self.since = policy, since
        self.latencies_ms: list[float] = []

    def __call__(self, observation: Observation) -> ActionResult:
        began = self.since(observation)
        if began is not None:
            self.latencies_ms.append((time.monotonic() - began) * 1e3)
        return self.policy(observation)


def run_ros(args: argparse.Namespace, endpoint: str) -> dict[str, Any]:
    robot = Robot(endpoint, args.height, args.width, args.camera_rate)
    listener = Node("controller", router=endpoint)
    commands = listener.subscribe("/command", "std_msgs/msg/Float64MultiArray")
    arrivals: list[float] = []
    stop = threading.Event()

    def watch() -> None:  # the controller: each command's arrival time
        seen = None
        while not stop.wait(0.0005):
            latest = commands.latest()
            if latest is not None and latest is not seen:
                seen = latest
                arrivals.append(latest.received_at)

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    try:
        with Node("vla_client", router=endpoint) as node:
            bridge: RosBridge | None = None

            def since(observation: Observation) -> float | None:
                reading = None if bridge is None else bridge.reading
                if reading is None or reading.observation is not observation:
                    return None
                return reading.received_at

            infer = Timed(FakePolicy(args.horizon, len(JOINTS), args.infer_ms), since)
            executor = ChunkExecutor(
                infer, prefetch_at=args.horizon // 2, max_observation_age_s=0.5, clock=time.time
            )
            bridge = RosBridge(
                node, executor, images={f"/{name}/image_raw": name for name in CAMERAS},
                state="/joint_states", command="/command", command_type="array",
                rate_hz=args.rate, max_age_s=0.5,
            )  # fmt: skip
            observe_ms = timed_observe(bridge)
            loop = bridge.control_loop()
            assert bridge.wait_for_input(lambda: False, timeout_s=10.0), "no input from the robot"
            stats = loop.run(ticks=int(args.seconds * args.rate))
            executor.close(timeout=2.0)
    finally:
        stop.set()
        watcher.join(5)
        listener.close()
        robot.close()
    return {
        "latency_ms": infer.latencies_ms,
        "observe_ms": observe_ms,
        "jitter_ms": [j * 1e3 for j in stats.jitter_s],
        "arrival_jitter_ms": arrival_jitter(arrivals, args.rate),
        "commands": len(arrivals),
        "applied": stats.applied,
    }


def timed_observe(bridge: RosBridge) -> list[float]:
    """Times each of the bridge's `observe` calls (the loop calls it every tick)."""
    spent: list[float] = []
    observe = bridge.observe

    def timed() -> Observation:
        started = time.perf_counter()
        observation = observe()
        spent.append((time.perf_counter() - started) * 1e3)
        return observation

    bridge.observe = timed  # type: ignore[method-assign]
    return spent


def run_synthetic(args: argparse.Namespace) -> dict[str, Any]:
    synthetic_frames(len(CAMERAS), args.height, args.width)  # the scenes are made once, here
    rendered: dict[int, float] = {}
    spent: list[float] = []
    tick = [0]

    def observe() -> Observation:
        started = time.perf_counter()
        tick[0] += 1
        frames = synthetic_frames(len(CAMERAS), args.height, args.width, t=tick[0])
        now = time.time()
        observation = Observation(
            dict(zip(CAMERAS, frames.values(), strict=True)), state=np.zeros(len(JOINTS)),
            capture_times=dict.fromkeys(CAMERAS, now),
        )  # fmt: skip
        rendered[id(observation)] = time.monotonic()
        spent.append((time.perf_counter() - started) * 1e3)
        return observation

    infer = Timed(
        FakePolicy(args.horizon, len(JOINTS), args.infer_ms),
        lambda observation: rendered.pop(id(observation), None),
    )
    executor = ChunkExecutor(
        infer, prefetch_at=args.horizon // 2, max_observation_age_s=0.5, clock=time.time
    )
    loop = ControlLoop(observe=observe, executor=executor, apply_action=lambda a: None,
                       rate_hz=args.rate, log=EveryTick())  # fmt: skip
    stats = loop.run(ticks=int(args.seconds * args.rate))
    executor.close(timeout=2.0)
    return {
        "latency_ms": infer.latencies_ms,
        "observe_ms": spent,
        "jitter_ms": [j * 1e3 for j in stats.jitter_s],
        "applied": stats.applied,
    }


class EveryTick:
    """A `TickLog` that keeps nothing: with it the loop reads the cameras every tick, as the
    bridge's loop reads its topics (its status is its log)."""

    def use_clock(self, clock: Callable[[], float], period_s: float) -> None:
        """Nothing to time."""

    def tick(self, t: float, observation: Observation, action: Any) -> None:
        """Nothing to keep."""


def arrival_jitter(arrivals: list[float], rate_hz: float) -> list[float]:
    """How far each command's arrival is from a period after the one before, in ms."""
    gaps = np.diff(np.asarray(arrivals))
    return list(np.abs(gaps - 1.0 / rate_hz) * 1e3)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rate", type=float, default=30.0, help="control rate, Hz")
    parser.add_argument("--seconds", type=float, default=5.0, help="each run")
    parser.add_argument("--rounds", type=int, default=2, help="runs of each, alternating")
    parser.add_argument(
        "--camera-rate", type=float, default=29.0,
        help="the robot's cameras, Hz: not locked to the loop's ticks, so every phase is seen",
    )  # fmt: skip
    parser.add_argument("--height", type=int, default=480)
    parser.add_argument("--width", type=int, default=640)
    parser.add_argument("--infer-ms", type=float, default=30.0, help="fake inference time")
    parser.add_argument("--horizon", type=int, default=10)
    parser.add_argument("--save", metavar="FILE.json", help="write the figures as JSON")
    args = parser.parse_args()
    load_before = os.getloadavg()[0]
    session, endpoint = router()
    pooled: dict[str, dict[str, list[float]]] = {"ros2": {}, "synthetic": {}}
    applied = {"ros2": 0, "synthetic": 0}
    commands = 0
    try:
        for _ in range(args.rounds):
            for name, run in (
                ("ros2", lambda: run_ros(args, endpoint)),
                ("synthetic", lambda: run_synthetic(args)),
            ):
                result = run()
                applied[name] += result.pop("applied")
                commands += result.pop("commands", 0)
                for key, values in result.items():
                    pooled[name].setdefault(key, []).extend(values)
    finally:
        session.close()
    now = datetime.datetime.now(datetime.timezone.utc)
    print(
        f"{now:%Y-%m-%d %H:%M} UTC, python {platform.python_version()} on {platform.machine()}, "
        f"{os.cpu_count()} CPUs, load {load_before:.2f} -> {os.getloadavg()[0]:.2f}"
    )
    print(
        f"{args.rounds} x {args.seconds:g} s each at {args.rate:g} Hz, 3 cameras "
        f"{args.height}x{args.width} rgb8, {args.infer_ms:g} ms fake inference; "
        f"ros2: {applied['ros2']} ticks applied, {commands} commands received; "
        f"synthetic: {applied['synthetic']} applied"
    )
    figures: dict[str, dict[str, Any]] = {}
    for label, key in ROWS:
        ros, synthetic = summary(pooled["ros2"][key]), summary(pooled["synthetic"][key])
        figures[key] = {"ros2": dataclasses.asdict(ros), "synthetic": dataclasses.asdict(synthetic)}
        print(f"{label}:")
        print(f"  ros2      {ros}")
        print(f"  synthetic {synthetic}")
        print(f"  ratio p50 {ratio(ros.p50, synthetic.p50)}, p99 {ratio(ros.p99, synthetic.p99)}")
    arrivals = summary(pooled["ros2"]["arrival_jitter_ms"])
    print(f"command arrival jitter ms (ros2 subscriber): {arrivals}")
    if args.save:
        report = {
            "format": "vla-client.ros2",
            "date": f"{now:%Y-%m-%d %H:%M} UTC",
            "load": [load_before, os.getloadavg()[0]],
            "cpus": os.cpu_count(),
            "rate_hz": args.rate,
            "camera_rate_hz": args.camera_rate,
            "cameras": [len(CAMERAS), args.height, args.width],
            "seconds": args.seconds,
            "rounds": args.rounds,
            "infer_ms": args.infer_ms,
            "ticks": applied,
            "commands_received": commands,
            "figures": figures,
            "arrival_jitter_ms": dataclasses.asdict(arrivals),
        }
        Path(args.save).write_text(json.dumps(report, indent=2) + "\n")


ROWS = (
    ("frame -> request ms", "latency_ms"),
    ("observe (node work) ms/tick", "observe_ms"),
    ("tick jitter ms", "jitter_ms"),
)


def summary(values: list[float]) -> Percentiles:
    return (
        percentiles(values)
        if values
        else Percentiles(0, float("nan"), float("nan"), float("nan"), float("nan"))
    )


def ratio(a: float, b: float) -> str:
    return f"{a / b:.2f}x" if b > 0 else "n/a"


if __name__ == "__main__":
    main()
