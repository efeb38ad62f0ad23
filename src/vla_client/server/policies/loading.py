"""Find the policy a server should run: a built-in name, a plugin's name, or an import path.

``vla-client serve --policy`` takes three kinds of names:

- a built-in (``reference``, ``replay``, ``torch``);
- a name an installed package adds through the ``vla_client.policies`` entry-point group, e.g.
  in its pyproject.toml: ``[project.entry-points."vla_client.policies"] mypolicy =
  "my_package.policies:make_policy"``;
- an import path ``package.module:attribute`` (the attribute may be dotted).

Whatever the name gives is a `Policy` subclass, called with the options; a factory (any other
callable), called with the options and returning a `Policy`; or a `Policy` instance, taken as
is (then no options are allowed). Options come as ``key=value`` strings, each value read as
JSON where it parses (``horizon=8`` is the int 8, ``names=["a","b"]`` a list) and kept as text
otherwise, or from a JSON or TOML file. Every way this can fail raises `PolicyLoadError` with one
line saying why.
"""

from __future__ import annotations

import importlib
import inspect
import json
import sys
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any

if sys.version_info >= (3, 11):
    import tomllib
else:  # the server extra installs tomli there
    import tomli as tomllib

from vla_client.errors import PolicyLoadError
from vla_client.server.policy import Policy

ENTRY_POINT_GROUP = "vla_client.policies"


@dataclass(frozen=True)
class PolicyEntry:
    """One policy `--list-policies` shows: its name, where it comes from, and its first
    docstring line, or the error that keeps it from loading."""

    name: str
    origin: str
    summary: str = ""
    error: str | None = None


def load_policy(name: str, options: Mapping[str, Any] | None = None) -> Policy:
    """The policy `name` gives, built with `options`; `PolicyLoadError` naming the cause."""
    target, origin = resolve_policy(name)
    return _build(target, dict(options or {}), origin)


@dataclass(frozen=True)
class OptionNames:
    """The options a policy source takes: `accepted` (None: any, it takes ``**options``) and
    `required` (those without a default)."""

    accepted: frozenset[str] | None
    required: frozenset[str]


def option_names(target: Any) -> OptionNames:
    """What `target` (a `Policy` subclass or a factory) takes as options, read from its
    signature; a ready `Policy` takes none, and a callable without a readable signature any."""
    if isinstance(target, Policy):
        return OptionNames(frozenset(), frozenset())
    try:
        parameters = list(inspect.signature(target).parameters.values())
    except (TypeError, ValueError):  # no signature to read: let the call decide
        return OptionNames(None, frozenset())
    named = [p for p in parameters if p.kind in (p.KEYWORD_ONLY, p.POSITIONAL_OR_KEYWORD)]
    required = frozenset(p.name for p in named if p.default is inspect.Parameter.empty)
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters):
        return OptionNames(None, required)
    return OptionNames(frozenset(p.name for p in named), required)


def available_policies(builtins: Mapping[str, Callable[..., Policy]]) -> list[PolicyEntry]:
    """The built-ins and every installed plugin, each loaded to see that it can be; a plugin
    that fails to import is listed with its error, never raised."""
    entries = [
        PolicyEntry(name, "built in", _summary(factory)) for name, factory in builtins.items()
    ]
    for point in _entry_points():
        try:
            target = point.load()
        except Exception as exc:  # a broken plugin must not take the listing down
            entries.append(PolicyEntry(point.name, point.value, error=_one_line(exc)))
            continue
        problem = (
            None if _is_policy_source(target) else "not a Policy, a Policy subclass or a factory"
        )
        entries.append(PolicyEntry(point.name, point.value, _summary(target), problem))
    return entries


def parse_options(pairs: Iterable[str], file: str | None = None) -> dict[str, Any]:
    """Options from a JSON or TOML `file` (a table at its top), then ``key=value`` `pairs` on top.

    A value is read as JSON where it parses, else kept as the text it is.
    """
    options: dict[str, Any] = {}
    if file is not None:
        options.update(_read_options_file(Path(file)))
    for pair in pairs:
        key, sep, text = pair.partition("=")
        if not sep or not key.isidentifier():
            raise PolicyLoadError(f"--policy-option takes KEY=VALUE with KEY a name, got {pair!r}")
        try:
            options[key] = json.loads(text)
        except json.JSONDecodeError:
            options[key] = text
    return options


def resolve_policy(name: str) -> tuple[Any, str]:
    """What `name` names (a class, a factory or an instance, not yet called) and how to name
    it in a message; `PolicyLoadError` if it names nothing."""
    from vla_client.server.policies import POLICIES

    if name in POLICIES:
        return POLICIES[name], f"policy {name!r}"
    if ":" in name:
        return _import(name), name
    for point in _entry_points():
        if point.name == name:
            try:
                return point.load(), point.value
            except Exception as exc:
                raise PolicyLoadError(
                    f"policy plugin {name!r} ({point.value}) failed to import: {_one_line(exc)}"
                ) from exc
    known = ", ".join([*POLICIES, *(point.name for point in _entry_points())])
    raise PolicyLoadError(
        f"unknown policy {name!r}; choose one of {known}, or give package.module:attribute"
    )


def _import(path: str) -> Any:
    module_name, _, attribute = path.partition(":")
    if not module_name or not attribute:
        raise PolicyLoadError(
            f"a policy import path looks like package.module:attribute, got {path!r}"
        )
    try:
        target: Any = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        raise PolicyLoadError(f"cannot import {module_name!r} for policy {path!r}: {exc}") from exc
    except Exception as exc:
        raise PolicyLoadError(f"importing {module_name!r} failed: {_one_line(exc)}") from exc
    for part in attribute.split("."):
        try:
            target = getattr(target, part)
        except AttributeError:
            raise PolicyLoadError(f"{module_name!r} has no attribute {attribute!r}") from None
    return target


def _build(target: Any, options: dict[str, Any], origin: str) -> Policy:
    if isinstance(target, Policy):
        if options:
            raise PolicyLoadError(
                f"{origin} is a ready Policy; it takes no options ({sorted(options)})"
            )
        return target
    if not _is_policy_source(target):
        raise PolicyLoadError(
            f"{origin} is {type(target).__name__}, not a Policy, a Policy subclass or a factory"
        )
    _check_options(target, options, origin)
    try:
        policy = target(**options)
    except Exception as exc:
        raise PolicyLoadError(f"{origin} raised {_one_line(exc)}") from exc
    if not isinstance(policy, Policy):
        raise PolicyLoadError(f"{origin} returned {type(policy).__name__}, not a Policy")
    return policy


def _check_options(target: Any, options: dict[str, Any], origin: str) -> None:
    """Refuse an option the factory does not take, naming the ones it does."""
    accepted = option_names(target).accepted
    unknown = sorted(set(options) - accepted) if accepted is not None else []
    if unknown:
        takes = ", ".join(sorted(accepted or ())) or "none"
        raise PolicyLoadError(f"{origin} takes no option {unknown[0]!r}; it takes {takes}")


def _is_policy_source(target: Any) -> bool:
    return (
        isinstance(target, Policy)
        or (isinstance(target, type) and issubclass(target, Policy))
        or (callable(target) and not isinstance(target, type))
    )


def _entry_points() -> list[metadata.EntryPoint]:
    return sorted(metadata.entry_points(group=ENTRY_POINT_GROUP), key=lambda point: point.name)


def _read_options_file(path: Path) -> dict[str, Any]:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise PolicyLoadError(f"cannot read policy options {path}: {exc.strerror or exc}") from None
    except UnicodeDecodeError as exc:  # a ValueError: no line naming the file without this
        raise PolicyLoadError(
            f"policy options {path} are not UTF-8 text: {exc.reason} at byte {exc.start}"
        ) from None
    try:
        document = tomllib.loads(text) if path.suffix == ".toml" else json.loads(text)
    except (tomllib.TOMLDecodeError, json.JSONDecodeError) as exc:
        raise PolicyLoadError(
            f"policy options {path} are not valid {path.suffix[1:].upper() or 'JSON'}: {exc}"
        ) from None
    if not isinstance(document, dict):
        raise PolicyLoadError(f"policy options {path} must hold a table of options")
    return document


def _summary(target: Any) -> str:
    doc = inspect.getdoc(target) or ""
    return doc.strip().splitlines()[0] if doc.strip() else ""


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0]}" if text else type(exc).__name__
