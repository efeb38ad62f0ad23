"""Checks for the options of the public API, so a wrong value fails where it is given.

A misspelt option must never fall through to some other behaviour (a safety gate told
``"raise"`` that clips instead), so every enum-like option is checked against its choices when
an object is built, and numbers against their range. The messages name the option, the valid
values and what was given, the same way everywhere.
"""

from __future__ import annotations

import functools
import math
import numbers
import warnings
from collections.abc import Callable, Iterable
from typing import ParamSpec, TypeGuard, TypeVar

P = ParamSpec("P")
R = TypeVar("R")


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


def renamed_keywords(
    *, since: str, removed_in: str | None = None, **new_names: str
) -> Callable[[Callable[P, R]], Callable[P, R]]:
    """A function's old keyword names after a rename (``old="new"`` pairs): warned of for one
    minor release, then refused with the new name for one more.

    This is how vla-client renames a public keyword, and its only deprecation mechanism:

    1. The release that renames ``old`` to ``new`` (say 0.4.0) renames the parameter, decorates
       the function with ``@renamed_keywords(since="0.4.0", old="new")``, bumps
       ``vla_client/_version.py``, lists the rename under "Deprecated" in docs/changelog.md (the
       old name goes in the next minor release) and records the API with
       ``python tools/api_snapshot.py --write``. A call with the old name gets a
       `DeprecationWarning` naming the new one, at the caller's line, and runs as if the new
       name had been given; giving both is a `TypeError`.
    2. The next minor release (0.5.0) adds ``removed_in="0.5.0"`` and lists the old name under
       "Removed": the old name is then a `TypeError` that names the new one, so a program
       written for the old release fails at once and says what to write instead.
    3. The minor release after that (0.6.0) drops the decorator and lists that under "Removed":
       the old name is then Python's own `TypeError` (an unexpected keyword argument), like any
       name the function never had.

    `inspect.signature` of the wrapped function shows only the new names. No old name can be
    ``since`` or ``removed_in``.
    """

    def rename(function: Callable[P, R]) -> Callable[P, R]:
        @functools.wraps(function)
        def renamed(*args: P.args, **kwargs: P.kwargs) -> R:
            for old, new in new_names.items():
                if old not in kwargs:
                    continue
                where = _caller_name(function, args)
                if removed_in is not None:
                    raise TypeError(
                        f"{where}: {old}= is now {new}= (renamed in {since}; "
                        f"the old name went in {removed_in})"
                    )
                if new in kwargs:
                    raise TypeError(f"{where}: {old}= is the deprecated name of {new}=; give one")
                warnings.warn(
                    f"{where}: {old}= is deprecated since {since}; use {new}=",
                    DeprecationWarning,
                    stacklevel=2,
                )
                kwargs[new] = kwargs.pop(old)
            return function(*args, **kwargs)

        return renamed

    return rename


def _caller_name(function: Callable[..., object], args: tuple[object, ...]) -> str:
    """``ActionClient()`` for a constructor called through that subclass, else the qualified
    name (``FramePreprocessor.from_metadata()``)."""
    if function.__name__ == "__init__" and args:
        return f"{type(args[0]).__name__}()"
    return f"{function.__qualname__}()"
