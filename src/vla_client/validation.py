"""Checks for the options of the public API, so a wrong value fails where it is given.

A misspelt option must never fall through to some other behaviour (a safety gate told
``"raise"`` that clips instead), so every enum-like option is checked against its choices when
an object is built, and numbers against their range. The messages name the option, the valid
values and what was given, the same way everywhere.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Iterable
from typing import TypeGuard


def check_choice(option: str, value: object, choices: Iterable[str]) -> None:
    """Raise `ValueError` unless `value` is one of `choices`, naming them all."""
    allowed = tuple(choices)
    if not isinstance(value, str) or value not in allowed:
        names = ", ".join(repr(choice) for choice in allowed)
        raise ValueError(f"{option} must be one of {names}; got {value!r}")


def check_positive(
    option: str,
    value: object,
    *,
    allow_none: bool = False,
    integer: bool = False,
    finite: bool = False,
    error: type[ValueError] = ValueError,
) -> None:
    """Raise `error` unless `value` is a number above 0 (an integer when asked, a finite number
    when asked; None when allowed). `error` lets a package raise its own `ValueError` subclass.

    Ask for `finite` where infinity cannot mean anything sensible (a rate of infinite Hz is an
    unpaced loop, an infinite age limit no limit at all)."""
    if value is None and allow_none:
        return
    if not _is_number(value, integer) or not value > 0 or (finite and not math.isfinite(value)):
        kind = "an integer" if integer else "a finite number" if finite else "a number"
        raise error(f"{option} must be {kind} > 0; got {value!r}")


def check_at_least(
    option: str,
    value: object,
    minimum: float,
    *,
    integer: bool = False,
    error: type[ValueError] = ValueError,
) -> None:
    """Raise `error` unless `value` is a number no less than `minimum`."""
    if not _is_number(value, integer) or not value >= minimum:
        kind = "an integer" if integer else "a number"
        raise error(f"{option} must be {kind} >= {minimum:g}; got {value!r}")


def _is_number(value: object, integer: bool) -> TypeGuard[float]:
    # NaN passes this and then fails every comparison, so it is refused too.
    kind = numbers.Integral if integer else numbers.Real
    return isinstance(value, kind) and not isinstance(value, bool)
