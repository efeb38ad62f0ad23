"""The public API as data, to pin it: `tests/test_public_api.py` compares it with the snapshot.

For each public package face (``vla_client`` and the subpackages a robot program imports from)
the snapshot holds its ``__all__`` and, for every exported class and function, its signature
(``inspect.signature``: parameter names, kinds, defaults and annotations) and those of the
class's public methods and properties defined in vla_client. A rename or removal therefore
changes the snapshot, and the test fails until the snapshot is updated in the same change:

    python tools/api_snapshot.py           # show what differs from tests/api_snapshot.json
    python tools/api_snapshot.py --write   # record the current API as the snapshot

Run it with the interpreter the tests use (Python 3.11: signatures are written as the
annotations read there).
"""

from __future__ import annotations

import argparse
import difflib
import importlib
import inspect
import json
import re
import sys
import typing
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
SNAPSHOT = ROOT / "tests" / "api_snapshot.json"
PACKAGES = (
    "vla_client", "vla_client.cameras", "vla_client.control", "vla_client.lerobot",
    "vla_client.transports", "vla_client.viz",
)  # fmt: skip
REGENERATE = "python tools/api_snapshot.py --write"


def current_api() -> dict[str, Any]:
    """``{package: {"__all__": [...], "signatures": {name: signature}}}`` as imported now."""
    api: dict[str, Any] = {}
    for package in PACKAGES:
        module = importlib.import_module(package)
        names = sorted(module.__all__)
        signatures: dict[str, str] = {}
        for name in names:
            value = getattr(module, name)
            if typing.get_origin(value) is not None:  # Action = NDArray[np.float32], say
                signatures[name] = "alias"
            elif inspect.isclass(value):
                signatures[name] = _signature(value)
                signatures.update(_members(name, value))
            elif inspect.isroutine(value):
                signatures[name] = _signature(value)
            else:  # a type alias or constant: its name is what is pinned
                signatures[name] = "alias" if callable(value) else "value"
        api[package] = {"__all__": names, "signatures": signatures}
    return api


def _signature(value: Any) -> str:
    """`value`'s signature, without the memory addresses of default values (``<function f>``)."""
    try:
        text = str(inspect.signature(value))
    except (TypeError, ValueError):  # a builtin without one (never a vla_client function)
        return "(no signature)"
    return re.sub(r" at 0x[0-9a-fA-F]+>", ">", text)


def _members(class_name: str, cls: type) -> dict[str, str]:
    """The public methods and properties `cls` has from vla_client's classes (not those of
    pydantic, Exception or other bases outside the package)."""
    members: dict[str, str] = {}
    for name in sorted(dir(cls)):
        if name.startswith("_"):
            continue
        owner = next((base for base in cls.__mro__ if name in vars(base)), None)
        if owner is None or not owner.__module__.startswith("vla_client"):
            continue
        raw = vars(owner)[name]
        if isinstance(raw, property):
            members[f"{class_name}.{name}"] = "property"
        elif isinstance(raw, staticmethod | classmethod) or inspect.isfunction(raw):
            members[f"{class_name}.{name}"] = _signature(getattr(cls, name))
    return members


def dumps(api: dict[str, Any]) -> str:
    return json.dumps(api, indent=2, sort_keys=True) + "\n"


def difference(recorded: str, current: str) -> str:
    """A unified diff of the snapshot (``-``) against the current API (``+``)."""
    lines = difflib.unified_diff(
        recorded.splitlines(), current.splitlines(), "api_snapshot.json", "current API", lineterm=""
    )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", action="store_true", help=f"write {SNAPSHOT.name}")
    args = parser.parse_args(argv)
    current = dumps(current_api())
    if args.write:
        SNAPSHOT.write_text(current, encoding="utf-8")
        print(f"wrote {SNAPSHOT.relative_to(ROOT)}")
        return 0
    recorded = SNAPSHOT.read_text(encoding="utf-8") if SNAPSHOT.exists() else ""
    if recorded == current:
        print("the public API matches the snapshot")
        return 0
    print(difference(recorded, current))
    return 1


if __name__ == "__main__":
    sys.exit(main())
