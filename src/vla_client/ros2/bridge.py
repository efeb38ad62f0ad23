"""The robot side of the live node: ROS 2 topics in, a ros2_control controller's commands out.

`RosBridge` is what a `ControlLoop` drives on a robot that speaks ROS 2: `observe()` reads the
newest synchronised camera frames and joint state (`vla_client.ros2.inputs`), `apply_action()`
publishes the tick's action as a command, and as the loop's `TickLog` it publishes the node's
status. `control_loop()` assembles the loop around the bridge's `ChunkExecutor`, with a
`SafetyGate` and a `Watchdog` if given: the same loop, executor modes, gate and watchdog as on
any other robot.

Time. A header stamp is ROS time: the wall clock of the machine that took the frame (with
``use_sim_time`` off). The bridge hands header stamps on as `Observation.capture_times`, so the
executor's `clock` must be the wall clock, ``time.time`` (its `monotonic` clock still runs the
ticks), and the robot's and this host's clocks must agree (chrony or NTP, as ROS's own
message filters need): an input's age is this host's ``time.time()`` minus its oldest stamp.

Holding. While the newest synchronised input is older than `max_age_s` (or stamped more than
`max_age_s` ahead: the clocks disagree), no command is published: the controller keeps its
last one (position) or runs its last trajectory to its end. The executor refuses to send such
an observation too, since its `max_observation_age_s` should be the same. A server that is down
or refuses gives no chunk: once the current one has run out, nothing is published (unless a
watchdog is configured to command something). Each change of state is said once on the status
topic, the moment it happens, and logged; fresh input and a chunk resume commanding.

Commands. ``array``: each tick's action as a ``std_msgs/Float64MultiArray``. ``trajectory``:
when a chunk starts (and when commanding resumes after holding), the tick's action and the rows
of the chunk still to run as one ``trajectory_msgs/JointTrajectory`` for the state's joints; the
rows after the first pass a gate of their own (`point_gate`), at the loop's period, as the ticks
would pass them.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal

import numpy as np

from vla_client.control.chunk import ChunkExecutor
from vla_client.control.clocks import Clock
from vla_client.control.loop import ControlLoop
from vla_client.control.safety import SafetyGate
from vla_client.control.types import Action
from vla_client.control.watchdog import Watchdog
from vla_client.errors import InvalidObservationError
from vla_client.observation import Observation
from vla_client.ros2.inputs import InputSync, Reading, image_type
from vla_client.ros2.messages import (
    DIAGNOSTICS,
    ERROR,
    FLOAT_ARRAY,
    OK,
    TRAJECTORY,
    WARN,
    array_command,
    status_array,
    trajectory_command,
)
from vla_client.ros2.qos import RELIABLE, QoS
from vla_client.validation import check_choice, check_positive

if TYPE_CHECKING:
    from vla_client.ros2.graph import Node

log = logging.getLogger(__name__)

CommandType = Literal["array", "trajectory"]
COMMAND_TYPES: tuple[CommandType, ...] = ("array", "trajectory")
STATUS_TOPIC = "/diagnostics"
"""Where ROS's diagnostics tools (rqt_robot_monitor, diagnostic_aggregator) read statuses."""
STATUS_PERIOD_S = 1.0
"""The status is published on every change of state and at least this often."""
CAMERA_DEPTH = 10
STATE_DEPTH = 200
"""Samples kept per topic for synchronising: joint states come at up to hundreds of Hz, and a
frame is matched with the state nearest its own stamp, which may be a few frames back."""


class RosBridge:
    """Cameras and joint state from ROS 2 topics in, commands and status out, for a
    `ControlLoop` around `executor`.

    `images` maps each camera topic to the camera name the server knows (the first is the
    reference the others are synchronised to; a topic ending in ``/compressed`` carries
    CompressedImage, any other Image); `state` is the JointState topic, `joints` picks and
    orders its joints (default: the message's own order). `command` is the topic the
    controller listens on and `command_type` its message (`COMMAND_TYPES`). Options are checked
    here (`ValueError`). The subscriptions and publishers are made on `node` at once.
    """

    def __init__(
        self,
        node: Node,
        executor: ChunkExecutor,
        *,
        images: Mapping[str, str],
        state: str,
        command: str,
        command_type: CommandType,
        rate_hz: float,
        joints: Sequence[str] | None = None,
        max_skew_s: float = 0.05,
        max_age_s: float = 0.5,
        task: str = "",
        status_topic: str = STATUS_TOPIC,
        point_gate: Callable[[Clock], SafetyGate] | None = None,
        hardware_id: str = "",
    ) -> None:
        check_choice("command_type", command_type, COMMAND_TYPES)
        check_positive("rate_hz", rate_hz, finite=True)
        check_positive("max_skew_s", max_skew_s, finite=True)
        check_positive("max_age_s", max_age_s, finite=True)
        if executor.clock is time.monotonic:
            raise ValueError(
                "header stamps are ROS time, the wall clock: give ChunkExecutor(clock=time.time) "
                "so observation ages are measured on it"
            )
        _check_topics(images, state, command, status_topic)
        if joints is not None and (not joints or len(set(joints)) != len(joints)):
            raise ValueError(f"joints must name each joint once, at least one; got {joints!r}")
        # The sensor data profile (best effort), deeper: see CAMERA_DEPTH and STATE_DEPTH.

        cameras = {
            topic: node.subscribe(
                topic, image_type(topic), qos=QoS("best_effort", "volatile", CAMERA_DEPTH)
            )
            for topic in images
        }
        names = {cameras[topic].topic: name for topic, name in images.items()}
        cameras = {subscription.topic: subscription for subscription in cameras.values()}
        joint_state = node.subscribe(
            state, "sensor_msgs/msg/JointState", qos=QoS("best_effort", "volatile", STATE_DEPTH)
        )
        self._inputs = InputSync(
            cameras, names, joint_state, joints=joints, max_skew_s=max_skew_s, task=task
        )
        self._command = node.advertise(
            command, FLOAT_ARRAY if command_type == "array" else TRAJECTORY, qos=RELIABLE
        )
        self._status = node.advertise(status_topic, DIAGNOSTICS, qos=RELIABLE)
        self.executor = executor
        self.command_type = command_type
        self.rate_hz = rate_hz
        self.max_age_s = max_age_s
        self.hardware_id = hardware_id
        self._node_name = node.name
        self._point_gate = point_gate
        self._topics = [*cameras, joint_state.topic]
        self._reading: Reading | None = None
        self._input_hold: str | None = "no input yet"
        self._state: tuple[str, str] = ("holding", "")
        self._said: tuple[str, str] | None = None
        self._last_status_at = -math.inf
        self._last_refusal = ""
        self._trajectory_chunk = -1
        self._held_last_tick = True
        self._loop: ControlLoop | None = None
        self._gate: SafetyGate | None = None
        self._watchdog: Watchdog | None = None
        self._stopped = threading.Event()
        self.published = 0
        """Commands published."""
        self.held = 0
        """Ticks with an action not published: the input was stale."""

    @property
    def reading(self) -> Reading | None:
        """The newest synchronised input read (None before the first): its observation, oldest
        stamp, joint names and when its newest message arrived."""
        return self._reading

    def control_loop(
        self, *, gate: SafetyGate | None = None, watchdog: Watchdog | None = None
    ) -> ControlLoop:
        """The `ControlLoop` that runs the bridge: observe, executor, watchdog, gate, publish,
        and the status as its log, at `rate_hz`."""
        self._gate, self._watchdog = gate, watchdog
        self._loop = ControlLoop(
            observe=self.observe,
            executor=self.executor,
            apply_action=self.apply_action,
            rate_hz=self.rate_hz,
            gate=gate,
            watchdog=watchdog,
            log=self,
        )
        return self._loop

    def wait_for_input(self, stop: Callable[[], bool], timeout_s: float | None = None) -> bool:
        """Wait until the inputs make a first synchronised set, saying on the status topic that
        the node holds meanwhile; False if `stop()` became true or `timeout_s` passed first."""
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        while not stop():
            self._refresh()
            if self._reading is not None:
                return True
            self._report(time.monotonic())
            if deadline is not None and time.monotonic() > deadline:
                return False
            self._stopped.wait(1.0 / self.rate_hz)
        return False

    def observe(self) -> Observation:
        """The newest synchronised input as an observation (maybe too old to send: the executor
        refuses it then); `InvalidObservationError` before the first (`wait_for_input`)."""
        self._refresh()
        if self._reading is None:
            raise InvalidObservationError(
                f"no synchronised input yet on {', '.join(self._topics)}: wait_for_input() first"
            )
        return self._reading.observation

    def apply_action(self, action: Action) -> None:
        """Publish `action` (and, for a trajectory, the rows after it), unless the input is
        stale or nothing has been published since `stop()`."""
        if self._stopped.is_set():
            return
        if self._input_hold is not None:
            self.held += 1
            self._held_last_tick = True
            return
        if self.command_type == "array":
            self._command.publish(array_command(action))
        elif self._starts_trajectory():
            rows = np.vstack([action[None, :], self._planned(action, self.executor.upcoming)])
            assert self._reading is not None  # not holding: there is input
            self._command.publish(trajectory_command(rows, self._reading.joint_names, self.rate_hz))
        self._held_last_tick = False
        self.published += 1

    def stop(self) -> None:
        """Publish nothing more, and end the loop before its next tick."""
        self._stopped.set()
        if self._loop is not None:
            self._loop.stop()

    def fail(self, why: str) -> None:
        """Say on the status topic, once, that the node stopped: `why`."""
        self._state = ("stopped", why)
        self._say(time.monotonic(), force=True)
        self._stopped.set()

    # The loop's TickLog: the status.

    def use_clock(self, clock: Callable[[], float], period_s: float) -> None:
        """The loop's monotonic clock and period (the status is timed by `tick`'s `t`)."""

    def tick(self, t: float, observation: Observation, action: Action | None) -> None:
        """After each tick: the node's state, said on a change and every `STATUS_PERIOD_S`."""
        if self._stopped.is_set():
            return
        self._report(t, action)

    # Inside.

    def _refresh(self) -> None:
        """Read the inputs, and decide whether they are fresh enough to command on."""
        self._reading = self._inputs.read()
        if self._reading is None:
            self._input_hold = f"no synchronised input yet on {', '.join(self._topics)}"
            return
        age_s = self.executor.clock() - self._reading.oldest_stamp
        limit_ms = self.max_age_s * 1e3
        if age_s > self.max_age_s:
            self._input_hold = (
                f"input stale: the newest synchronised set is {age_s * 1e3:.0f} ms old, over "
                f"--max-age-ms {limit_ms:g} (a topic stopped, or this host's clock is ahead)"
            )
        elif age_s < -self.max_age_s:
            self._input_hold = (
                f"input stamped {-age_s * 1e3:.0f} ms ahead of this host's clock, over "
                f"--max-age-ms {limit_ms:g}: synchronise the clocks (chrony, NTP)"
            )
        else:
            self._input_hold = None

    def _report(self, t: float, action: Action | None = None) -> None:
        if self._input_hold is not None:
            self._state = ("holding", self._input_hold)
        elif action is None:
            error = self.executor.last_error
            why = (
                "waiting for the first chunk"
                if error is None and not self.executor.stats.chunks_received
                else f"no chunk from the server: {error or 'its chunk ran out'}"
            )
            self._state = ("holding", why)
        else:
            self._state = ("running", f"commanding {self._command.topic}")
        new_reason = False  # a stream of the same refusal is said once, then counted
        for refusal in self._inputs.refusals():
            if refusal != self._last_refusal:
                log.warning("input refused: %s", refusal)
                new_reason = True
            self._last_refusal = refusal
        self._say(t, force=new_reason)

    def _say(self, t: float, *, force: bool = False) -> None:
        state, why = self._state
        kind = (state, why.split(":")[0])
        changed = kind != self._said
        if not (changed or force or t - self._last_status_at >= STATUS_PERIOD_S):
            return
        if changed:
            level = logging.INFO if state == "running" else logging.WARNING
            log.log(level, "%s: %s", state, why)
        self._said = kind
        self._last_status_at = t
        level = {"running": OK, "holding": WARN}.get(state, ERROR)
        if state == "running" and self._last_refusal and force:
            level = WARN
        self._status.publish(
            status_array(
                f"{self._node_name}: bridge",
                level,
                f"{state}: {why}",
                self._values(),
                time.time(),
                self.hardware_id,
            )
        )

    def _values(self) -> dict[str, object]:
        state, why = self._state
        stats = self.executor.stats
        values: dict[str, object] = {
            "state": state,
            "reason": why,
            "command_topic": self._command.topic,
            "commands_published": self.published,
            "held_ticks": self.held,
            "refused_inputs": self._inputs.refused,
            "last_refusal": self._last_refusal,
            "requests_sent": stats.requests_sent,
            "chunks_received": stats.chunks_received,
            "failed_requests": stats.errors + stats.malformed_replies + stats.dropped_mismatched,
            "stale_observations": stats.stale_observations,
            "late_replies": stats.dropped_late,
        }
        if self._loop is not None:
            loop = self._loop.stats
            values.update(ticks=loop.ticks, skipped_ticks=loop.skipped, overruns=loop.overruns)
        if self._gate is not None:
            values.update(gate_clipped=self._gate.clipped, gate_rejected=self._gate.rejected)
        if self._watchdog is not None:
            values.update(watchdog_trips=self._watchdog.trips)
        if stats.latencies:
            latest = stats.latencies[-1]
            values.update(
                observation_age_ms=latest.observation_age_ms,
                infer_ms=latest.infer_ms,
                server_ms=_or_dash(latest.server_ms),
                network_ms=_or_dash(latest.network_ms),
            )
        if self._reading is not None:
            values["input_received_ms_ago"] = (time.monotonic() - self._reading.received_at) * 1e3
        return values

    def _starts_trajectory(self) -> bool:
        """Whether this tick's action starts a chunk (or commanding resumes after holding)."""
        chunk = self.executor.stats.chunks_received
        starts = chunk != self._trajectory_chunk or self._held_last_tick
        self._trajectory_chunk = chunk
        return starts

    def _planned(self, first: Action, rows: Action) -> Action:
        """`rows` through a gate of their own, one a period after `first`: the trajectory's
        points as the ticks would pass them (as they are, without a `point_gate`)."""
        if self._point_gate is None or not len(rows):
            return rows
        now = [0.0]
        gate = self._point_gate(lambda: now[0])
        gate.reset(first)
        checked = []
        for row in rows:
            now[0] += 1.0 / self.rate_hz
            checked.append(gate.check(row))
        return np.asarray(checked, dtype=np.float32)


def _check_topics(images: Mapping[str, str], state: str, command: str, status: str) -> None:
    if not images:
        raise ValueError("name at least one camera: images={TOPIC: NAME}")
    names = list(images.values())
    if len(set(names)) != len(names) or not all(names):
        raise ValueError(f"each camera topic needs its own name; got {dict(images)}")
    topics = [*images, state, command, status]
    repeated = sorted({topic for topic in topics if topics.count(topic) > 1})
    if repeated:
        raise ValueError(
            f"a topic is one input or output: {', '.join(repeated)} is named twice among the "
            "cameras, the state, the command and the status"
        )


def _or_dash(value: float | None) -> Any:
    return "-" if value is None else value
