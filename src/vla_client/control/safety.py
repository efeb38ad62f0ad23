"""Check actions before they reach the robot.

None of the common VLA clients validates what comes back: a NaN from a diverged policy, a chunk
for a different robot (wrong action dim), or a jump far outside the workspace goes straight to
the motors. `SafetyGate` is the last step before `apply_action`; it never lets an unchecked
action through, and says why with an `UnsafeActionError`.
"""

from __future__ import annotations

import functools
import numbers
import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from vla_client.control.clocks import Clock, check_monotonic, shared_clock
from vla_client.control.names import ON_VIOLATION, OnViolation
from vla_client.control.types import Action
from vla_client.errors import UnsafeActionError
from vla_client.validation import check_choice

if TYPE_CHECKING:
    from vla_client.protocol import ActionMetadata

Limit = float | npt.ArrayLike


def _check_sizes(action_dim: int | None, horizon: int | None) -> None:
    """`ValueError` unless `action_dim` and `horizon` are positive integers or None."""
    for option, size in (("action_dim", action_dim), ("horizon", horizon)):
        if size is not None and (not isinstance(size, numbers.Integral) or size < 1):
            raise ValueError(f"{option} must be a positive integer or None; got {size!r}")


class SafetyGate:
    """Finite values, shape and dims always; bounds, step and rate limits when configured.

    Bounds and step violations are either clipped (`"clip"`) or raised (`"reject"`, the default:
    a policy that leaves its envelope is worth stopping for); any other value is a `ValueError`
    here, never a silent clip. Non-finite values and wrong shapes
    are always raised, since there is nothing sensible to clip them to. Steps are taken from
    the last action this gate passed; `reset()` forgets it (after re-homing, say).

    Two limits bound a step, and an action must keep both. `max_delta` is what one action may
    differ from the last, however much time passed between them: after a stall, the robot is
    still only moved one step. `max_rate` is a speed, in action units per second: a step may
    be at most `max_rate` times the time since the last action passed, read on the gate's
    monotonic `clock` (a `ControlLoop`'s, handed to the gate by the loop; `time.monotonic`
    on its own), so actions that come too close together (a burst) are held to the rate
    however small each step is. A limit on a robot's speed is `max_rate`; `max_delta` =
    `max_rate` x the loop's period adds a cap on any single step.

    The gate's action dimension is fixed by the first thing that gives it: `action_dim`, else
    the length of a vector limit (all vector limits must agree), else the first action or
    chunk it checks (or the action given to `reset`). From then on an action or chunk of any
    other shape is an `UnsafeActionError` naming both shapes, whatever the modes: the gate never
    stretches a 1-value action over 7 joints (numpy broadcasting) or trims a longer one.
    A scalar limit applies to every dimension once the dimension is known.
    """

    def __init__(
        self,
        *,
        action_dim: int | None = None,
        horizon: int | None = None,
        low: Limit | None = None,
        high: Limit | None = None,
        on_bounds: OnViolation = "reject",
        max_delta: Limit | None = None,
        on_delta: OnViolation = "reject",
        max_rate: Limit | None = None,
        clock: Clock | None = None,
    ) -> None:
        """`on_delta` applies to both step limits. `clock`: the monotonic clock `max_rate` is
        measured on; None takes the loop's, or `time.monotonic` on its own. A wall clock
        (`time.time`) is a `ValueError`."""
        check_choice("on_bounds", on_bounds, ON_VIOLATION)
        check_choice("on_delta", on_delta, ON_VIOLATION)
        if clock is not None:
            check_monotonic("the gate's clock", clock)
        _check_sizes(action_dim, horizon)
        self._dim: int | None = None if action_dim is None else int(action_dim)
        self._dim_origin = "action_dim"
        self.horizon = horizon
        # Each limit read may fix the dimension and spread the ones read before it.
        self._low: Action | None = None
        self._high: Action | None = None
        self._max_delta: Action | None = None
        self._max_rate: Action | None = None
        self._low = self._limit("low", low)
        self._high = self._limit("high", high)
        self._max_delta = self._limit("max_delta", max_delta)
        self._max_rate = self._limit("max_rate", max_rate)
        self._check_limits()
        self._on_bounds = on_bounds
        self._on_delta = on_delta
        self._clock = clock
        self._last: Action | None = None
        self._last_at: float | None = None
        self.clipped = 0
        self.rejected = 0

    def _check_limits(self) -> None:
        """`ValueError` unless low <= high, the step limits are >= 0 and the rate is finite."""
        if self._low is not None and self._high is not None and (self._low > self._high).any():
            raise ValueError("low must not exceed high")
        for option, limit in (("max_delta", self._max_delta), ("max_rate", self._max_rate)):
            if limit is not None and (limit < 0).any():
                raise ValueError(f"{option} must be >= 0")
        if self._max_rate is not None and not np.isfinite(self._max_rate).all():
            raise ValueError("max_rate must be finite (units per second; leave it out for none)")

    @classmethod
    def from_metadata(
        cls, metadata: ActionMetadata | Mapping[str, Any], **options: Any
    ) -> SafetyGate:
        """A gate expecting the horizon and action dim the server's metadata announces.

        Takes `ActionClient.metadata()` or the raw document (``{"output": {"action_horizon",
        "action_dim"}}``, read by `vla_client.protocol.read_metadata`: `ProtocolError` if it
        refuses it); either may leave them out. A horizon left out is not checked; an action
        dim left out is taken from the limits' length or the first action checked.
        """
        if isinstance(metadata, Mapping):
            from vla_client.protocol import read_metadata  # deferred: pydantic, on first use

            metadata = read_metadata(metadata)
        output = metadata.output
        return cls(horizon=output.action_horizon, action_dim=output.action_dim, **options)

    @property
    def action_dim(self) -> int | None:
        """The action dimension every action must have; None until something has fixed it."""
        return self._dim

    def _limit(self, option: str, value: Limit | None) -> Action | None:
        """`value` as float32, checked: NaN would turn every comparison off, and a vector must
        have one entry per dimension (a scalar applies to all). A vector fixes the dimension;
        a scalar is spread to one value per dimension once it is known."""
        if value is None:
            return None
        limit = np.asarray(value, dtype=np.float32)
        if np.isnan(limit).any():
            raise ValueError(f"{option} must not contain NaN")
        if not self._fits(limit):
            raise ValueError(
                f"{option} must be a number or one value per dimension "
                f"({self._dim or 'any'}); got shape {limit.shape}"
            )
        if limit.ndim == 1 and self._dim is None:
            self._fix_dim(limit.size, f"the length of {option}")
        return limit if limit.ndim == 1 or self._dim is None else np.full(self._dim, limit)

    def _fits(self, limit: np.ndarray) -> bool:
        """Whether `limit` is a number, or a vector of one value per dimension (any length
        while the dimension is not known yet)."""
        if limit.ndim > 1 or limit.size == 0:
            return False
        return limit.ndim == 0 or self._dim in (None, limit.size)

    def _fix_dim(self, size: int, origin: str) -> None:
        """Fix the action dimension at `size`, and spread the scalar limits given so far."""
        self._dim, self._dim_origin = size, origin
        for name in ("_low", "_high", "_max_delta", "_max_rate"):
            limit = getattr(self, name)
            if limit is not None and limit.ndim == 0:
                setattr(self, name, np.full(size, limit, dtype=np.float32))

    @property
    def last_action(self) -> Action | None:
        """The last action this gate passed."""
        return self._last

    @property
    def clock(self) -> Clock | None:
        """The clock `max_rate` is measured on; None until given one (`time.monotonic` is
        read meanwhile)."""
        return self._clock

    def use_clock(self, clock: Clock) -> None:
        """Measure the rate on `clock` (a control loop's); `ValueError` if the gate already has
        another one, given when it was built or taken by an earlier loop. A reference action
        set before (`reset`) counts from now, its time having been read on another clock."""
        own, self._clock = self._clock, shared_clock("gate", self._clock, clock, "the rate")
        if own is None and self._last_at is not None:
            self._last_at = clock()

    def reset(self, last_action: npt.ArrayLike | None = None) -> None:
        """Forget the last action, or set it (the robot's current command, now) for the step
        limits.

        The action must be finite and of the gate's dimension (it fixes the dimension if
        nothing has yet), else `UnsafeActionError` and the previous reference is kept: a NaN
        reference would turn the step limit off.
        """
        self._last = None if last_action is None else self._action(last_action, "reference action")
        self._last_at = self._now()

    def check_chunk(self, actions: npt.ArrayLike) -> None:
        """Raise unless `actions` is a finite ``[H, D]`` chunk of the expected size."""
        try:
            chunk = self._numbers(actions, "chunk")
            self._check_shape(chunk, (self.horizon, self._dim), "chunk")
            self._check_finite(chunk, "chunk")
        except UnsafeActionError:
            self.rejected += 1
            raise

    def check(self, action: npt.ArrayLike) -> Action:
        """The action to execute: `action` itself or clipped, else `UnsafeActionError`."""
        now = self._now()
        try:
            checked = self._action(action, "action")
            if self._low is not None or self._high is not None:
                bounded = np.clip(checked, self._low, self._high)
                checked = self._enforce(checked, bounded, self._on_bounds, self._bounds_violation)
            elapsed_s = self._elapsed(now)
            most = self._step_limit(elapsed_s)
            if most is not None and self._last is not None:
                last = self._last
                step = checked - last
                # Only steps over the limit are replaced: last + step is not exactly the action
                # in float32, and rounding must not count (or, with "reject", stop) as one.
                limited = np.where(np.abs(step) > most, last + np.clip(step, -most, most), checked)
                describe = functools.partial(self._step_violation, most=most, elapsed_s=elapsed_s)
                checked = self._enforce(checked, limited, self._on_delta, describe)
        except UnsafeActionError:
            self.rejected += 1
            raise
        self._last, self._last_at = checked, now
        return checked

    def _now(self) -> float | None:
        """The time on the gate's clock when it has a rate to keep, else None (not read)."""
        if self._max_rate is None:
            return None
        return (self._clock or time.monotonic)()

    def _elapsed(self, now: float | None) -> float | None:
        """Seconds since the last action passed, when there is a rate to keep; a clock read
        back (only a fake one can be) gives no time, so no movement."""
        if now is None or self._last_at is None:
            return None
        return max(0.0, now - self._last_at)

    def _step_limit(self, elapsed_s: float | None) -> Action | None:
        """The most each dimension may move from the last action: `max_delta`, or `max_rate`
        times `elapsed_s`, or the smaller of the two; None when neither applies."""
        by_rate = None
        if self._max_rate is not None and elapsed_s is not None:
            by_rate = self._max_rate * np.float32(elapsed_s)  # float32, as the limits are
        if by_rate is None or self._max_delta is None:
            return self._max_delta if by_rate is None else by_rate
        tighter: Action = np.minimum(self._max_delta, by_rate)
        return tighter

    def _step_violation(
        self, action: Action, dim: int, *, most: Action, elapsed_s: float | None
    ) -> str:
        assert self._last is not None
        step = action[dim] - self._last[dim]
        text = (
            f"step too large at dim {dim}: {_num(self._last[dim])} to {_num(action[dim])} is "
            f"{_num(step)}, limit {_num(most[dim])}"
        )
        if elapsed_s is not None and (self._max_delta is None or most[dim] < self._max_delta[dim]):
            assert self._max_rate is not None  # an elapsed time is only read for a rate
            text += f" (max_rate {_num(self._max_rate[dim])} per s for {elapsed_s * 1e3:.3g} ms)"
        return text

    def _action(self, value: npt.ArrayLike, what: str) -> Action:
        """`value` as a finite float32 copy of shape ``[D]``, else `UnsafeActionError`."""
        action = np.array(self._numbers(value, what), dtype=np.float32)
        self._check_shape(action, (self._dim,), what)
        self._check_finite(action, what)
        return action

    @staticmethod
    def _numbers(value: npt.ArrayLike, what: str) -> Action:
        """`value` as a float32 array when it holds real numbers (no strings, booleans, ragged
        lists or complex values, which numpy would otherwise convert or refuse its own way)."""
        try:
            array = np.asarray(value)
        except (TypeError, ValueError) as exc:
            raise UnsafeActionError(f"{what} is not an array of numbers: {exc}") from None
        if array.dtype.kind not in "iuf":
            raise UnsafeActionError(f"{what} is not an array of numbers (dtype {array.dtype})")
        return array.astype(np.float32, copy=False)

    def _check_shape(self, values: Action, expected: tuple[int | None, ...], what: str) -> None:
        """Raise unless `values` has the expected shape (None: any size above 0); the first
        well-shaped action or chunk fixes the dimension when nothing else has."""
        shape = values.shape
        fits = len(shape) == len(expected) and all(
            n >= 1 and e in (None, n) for e, n in zip(expected, shape, strict=True)
        )
        if not fits:
            origin = "" if self._dim is None else f" (action dim from {self._dim_origin})"
            raise UnsafeActionError(
                f"{what} shape {_shape(shape)}, expected {_shape(expected)}{origin}"
            )
        if self._dim is None:
            self._fix_dim(shape[-1], f"the first {what}")

    @staticmethod
    def _check_finite(values: Action, what: str) -> None:
        if not np.isfinite(values).all():
            raise UnsafeActionError(f"non-finite values (NaN or infinity) in the {what}")

    def _enforce(
        self,
        action: Action,
        allowed: Action,
        mode: OnViolation,
        describe: Callable[[Action, int], str],
    ) -> Action:
        if np.array_equal(action, allowed):
            return action
        if mode != "clip":  # "reject", the only other value the constructor lets through
            worst = int(np.argmax(np.abs(action - allowed)))
            raise UnsafeActionError(describe(action, worst))
        self.clipped += 1
        return allowed.astype(np.float32)

    def _bounds_violation(self, action: Action, dim: int) -> str:
        below = self._low is not None and action[dim] < self._low[dim]
        limit = self._low if below else self._high
        assert limit is not None  # the action is outside one of the bounds
        return f"outside bounds at dim {dim}: {_num(action[dim])}, limit {_num(limit[dim])}"


def _shape(shape: tuple[int | None, ...]) -> str:
    """A shape as ``[16, 7]``, with ``any`` for a size not fixed."""
    return "[" + ", ".join("any" if n is None else str(n) for n in shape) + "]"


def _num(value: float) -> str:
    """A float32 value written as the shortest decimal that reads back as it (0.1, not
    0.10000000149011612), so a message shows the numbers the gate compared."""
    return str(np.float32(value))
