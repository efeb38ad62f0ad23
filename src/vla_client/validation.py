"""Checks for the options of the public API, so a wrong value fails where it is given.

A misspelt option must never fall through to some other behaviour (a safety gate told
``"raise"`` that clips instead), so every enum-like option is checked against its choices when
an object is built, and numbers against their range. The messages name the option, the valid
values and what was given, the same way everywhere.
"""

from __future__ import annotations

import functools
import importlib
import math
import numbers
import warnings
from collections.abc import Callable, Iterable, Mapping
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


def renamed_keywords(**new_names: str) -> Callable[[Callable[P, R]], Callable[P, R]]:
    """Keep a function's old keyword names working after a rename: ``old="new"`` pairs.

    A call with an old name gets a `DeprecationWarning` naming the new one and runs as if the
    new name had been given; giving both is a `TypeError`, as for any keyword given twice.
    `inspect.signature` of the wrapped function shows only the new names.
    """

    def rename(function: Callable[P, R]) -> Callable[P, R]:
        @functools.wraps(function)
        def renamed(*args: P.args, **kwargs: P.kwargs) -> R:
            for old, new in new_names.items():
                if old not in kwargs:
                    continue
                where = _caller_name(function, args)
                if new in kwargs:
                    raise TypeError(f"{where}: {old}= is the deprecated name of {new}=; give one")
                warnings.warn(
                    f"{where}: {old}= is deprecated since 0.2.0; use {new}=",
                    DeprecationWarning,
                    stacklevel=2,
                )
                kwargs[new] = kwargs.pop(old)
            return function(*args, **kwargs)

        return renamed

    return rename


def _caller_name(function: Callable[..., object], args: tuple[object, ...]) -> str:
    """``ActionClient()`` for a constructor called through that subclass, else the qualname."""
    if function.__name__ == "__init__" and args:
        return f"{type(args[0]).__name__}()"
    return f"{getattr(function, '__qualname__', function.__name__)}()"


def moved_module(
    old: str, new: str, names: Iterable[str]
) -> tuple[Callable[[str], object], Callable[[], list[str]]]:
    """``__getattr__`` and ``__dir__`` for module `old`, whose `names` now live in `new`.

    Each name still imports from `old`, with a `DeprecationWarning` at the importing line that
    names the new module.
    """
    return moved_names(old, dict.fromkeys(names, new))


def moved_names(
    old: str, homes: Mapping[str, str]
) -> tuple[Callable[[str], object], Callable[[], list[str]]]:
    """As `moved_module`, for names of `old` that moved to different modules: `homes` maps
    each name to the module it lives in now."""
    kept = dict(homes)

    def __getattr__(name: str) -> object:
        if name not in kept:
            raise AttributeError(f"module {old!r} has no attribute {name!r}")
        warnings.warn(
            f"{old} is deprecated since 0.2.0: import {name} from {kept[name]}",
            DeprecationWarning,
            stacklevel=2,
        )
        return getattr(importlib.import_module(kept[name]), name)

    def __dir__() -> list[str]:
        return sorted(kept)

    return __getattr__, __dir__
