"""Option checks the simulation's settings share: finite numbers, where infinity makes no sense."""

from __future__ import annotations

import math

from vla_client.validation import check_at_least, check_positive


def check_finite_positive(option: str, value: object) -> None:
    """`ValueError` unless `value` is a finite number above 0."""
    check_positive(option, value)
    if not math.isfinite(value):  # type: ignore[arg-type]
        raise ValueError(f"{option} must be a finite number > 0; got {value!r}")


def check_finite_at_least(option: str, value: object, minimum: float) -> None:
    """`ValueError` unless `value` is a finite number no less than `minimum`."""
    check_at_least(option, value, minimum)
    if not math.isfinite(value):  # type: ignore[arg-type]
        raise ValueError(f"{option} must be a finite number >= {minimum:g}; got {value!r}")
