"""Check actions before they reach the robot.

None of the common VLA clients validates what comes back: a NaN from a diverged policy, a chunk
for a different robot (wrong action dim), or a jump far outside the workspace goes straight to
the motors. `SafetyGate` is the last step before `apply_action`; it never lets an unchecked
action through, and says why with an `UnsafeActionError`.
"""

from __future__ import annotations

import numbers
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Literal, NoReturn

import numpy as np
import numpy.typing as npt

from vla_client.control.types import Action
from vla_client.errors import UnsafeActionError
from vla_client.validation import check_choice

if TYPE_CHECKING:
    from vla_client.protocol import ActionMetadata

OnViolation = Literal["clip", "reject"]
ON_VIOLATION: tuple[OnViolation, ...] = ("clip", "reject")
Limit = float | npt.ArrayLike


class SafetyGate:
    """Finite values, shape and dims always; bounds and per-step deltas when configured.

    Bounds and delta violations are either clipped (`"clip"`) or raised (`"reject"`, the default:
    a policy that leaves its envelope is worth stopping for); any other value is a `ValueError`
    here, never a silent clip. Non-finite values and wrong shapes
    are always raised, since there is nothing sensible to clip them to. The delta limit is taken
    from the last action this gate passed; `reset()` forgets it (after re-homing, say).
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
    ) -> None:
        check_choice("on_bounds", on_bounds, ON_VIOLATION)
        check_choice("on_delta", on_delta, ON_VIOLATION)
        for option, size in (("action_dim", action_dim), ("horizon", horizon)):
            if size is not None and (not isinstance(size, numbers.Integral) or size < 1):
                raise ValueError(f"{option} must be a positive integer or None; got {size!r}")
        self.action_dim = action_dim
        self.horizon = horizon
        self._low = self._limit("low", low)
        self._high = self._limit("high", high)
        if self._low is not None and self._high is not None and (self._low > self._high).any():
            raise ValueError("low must not exceed high")
        self._max_delta = self._limit("max_delta", max_delta)
        if self._max_delta is not None and (self._max_delta < 0).any():
            raise ValueError("max_delta must be >= 0")
        self._on_bounds = on_bounds
        self._on_delta = on_delta
        self._last: Action | None = None
        self.clipped = 0
        self.rejected = 0

    @classmethod
    def from_metadata(
        cls, metadata: ActionMetadata | Mapping[str, Any], **options: Any
    ) -> SafetyGate:
        """A gate expecting the horizon and action dim the server's metadata announces.

        Takes `ActionClient.metadata()` or the raw document (``{"output": {"action_horizon",
        "action_dim"}}``); either may leave them out, and then they are not checked.
        """
        if isinstance(metadata, Mapping):
            output = metadata.get("output") or {}
            horizon, action_dim = output.get("action_horizon"), output.get("action_dim")
        else:
            horizon, action_dim = metadata.output.action_horizon, metadata.output.action_dim
        return cls(horizon=horizon, action_dim=action_dim, **options)

    def _limit(self, option: str, value: Limit | None) -> Action | None:
        """`value` as float32, checked: NaN would turn every comparison off, and a vector must
        have one entry per dimension (a scalar applies to all)."""
        if value is None:
            return None
        limit = np.asarray(value, dtype=np.float32)
        if np.isnan(limit).any():
            raise ValueError(f"{option} must not contain NaN")
        if limit.ndim > 1 or (
            limit.ndim == 1 and self.action_dim is not None and limit.size != self.action_dim
        ):
            raise ValueError(
                f"{option} must be a number or one value per dimension "
                f"({self.action_dim or 'any'}); got shape {limit.shape}"
            )
        return limit

    @property
    def last_action(self) -> Action | None:
        """The last action this gate passed."""
        return self._last

    def reset(self, last_action: npt.ArrayLike | None = None) -> None:
        """Forget the last action, or set it (the robot's current command) for the delta check."""
        self._last = None if last_action is None else np.asarray(last_action, dtype=np.float32)

    def check_chunk(self, actions: Action) -> None:
        """Raise unless `actions` is a finite ``[H, D]`` chunk of the expected size."""
        if actions.ndim != 2 or not _matches(actions.shape, (self.horizon, self.action_dim)):
            self._reject(
                f"chunk shape {actions.shape}, expected [{self.horizon}, {self.action_dim}]"
            )
        self._check_finite(actions)

    def check(self, action: npt.ArrayLike) -> Action:
        """The action to execute: `action` itself or clipped, else `UnsafeActionError`."""
        checked = np.array(action, dtype=np.float32)
        if checked.ndim != 1 or not _matches(checked.shape, (self.action_dim,)):
            self._reject(f"action shape {checked.shape}, expected [{self.action_dim}]")
        self._check_finite(checked)
        if self._low is not None or self._high is not None:
            bounded = np.clip(checked, self._low, self._high)
            checked = self._enforce(checked, bounded, self._on_bounds, "outside bounds")
        if self._max_delta is not None and self._last is not None:
            step = checked - self._last
            # Only steps over the limit are replaced: last + step is not exactly the action in
            # float32, and rounding must not count (or, with "reject", stop) as a violation.
            limited = np.where(
                np.abs(step) > self._max_delta,
                self._last + np.clip(step, -self._max_delta, self._max_delta),
                checked,
            )
            checked = self._enforce(checked, limited, self._on_delta, "step too large")
        self._last = checked
        return checked

    def _check_finite(self, values: Action) -> None:
        if not np.isfinite(values).all():
            self._reject("non-finite values (NaN or infinity)")

    def _enforce(self, action: Action, allowed: Action, mode: OnViolation, what: str) -> Action:
        if np.array_equal(action, allowed):
            return action
        if mode != "clip":  # "reject", the only other value the constructor lets through
            worst = int(np.argmax(np.abs(action - allowed)))
            self._reject(f"{what} at dim {worst}: {action[worst]:.4g}, limit {allowed[worst]:.4g}")
        self.clipped += 1
        return allowed.astype(np.float32)

    def _reject(self, reason: str) -> NoReturn:
        self.rejected += 1
        raise UnsafeActionError(reason)


def _matches(shape: tuple[int, ...], expected: tuple[int | None, ...]) -> bool:
    """Whether `shape` has the expected sizes; None matches any size."""
    return all(e is None or e == n for e, n in zip(expected, shape, strict=True))
