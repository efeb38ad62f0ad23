"""Package faces that import a module only when one of its names is first used.

A package's ``__init__.py`` names what it offers in an ``if TYPE_CHECKING:`` block of
``from module import Name as Name`` lines, which type checkers and editors read as plain
imports, and ends with::

    __getattr__, __dir__, __all__ = lazy_face(__name__, __file__)

At run time nothing in that block is imported: `lazy_face` reads the block from the file
itself, and the package's module ``__getattr__`` imports a name's module the first time the
name is asked for (then keeps it, so the second use costs nothing). ``import vla_client``
therefore costs almost nothing, and a process that only needs the codecs (an inference worker,
say) never loads the HTTP client. The block is the one list of the package's names, so the two
cannot disagree.
"""

from __future__ import annotations

import ast
import importlib
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any


def lazy_face(
    package: str, init_file: str
) -> tuple[Callable[[str], Any], Callable[[], list[str]], list[str]]:
    """``__getattr__``, ``__dir__`` and ``__all__`` for `package`, from its ``TYPE_CHECKING``
    imports in `init_file`."""
    table = _type_checking_imports(Path(init_file).read_text(encoding="utf-8"))
    names = sorted(table)

    def __getattr__(name: str) -> Any:
        try:
            module, original = table[name]
        except KeyError:
            raise AttributeError(f"module {package!r} has no attribute {name!r}") from None
        value = getattr(importlib.import_module(module), original)
        setattr(sys.modules[package], name, value)
        return value

    def __dir__() -> list[str]:
        return sorted({*vars(sys.modules[package]), *names})

    return __getattr__, __dir__, names


def _type_checking_imports(source: str) -> dict[str, tuple[str, str]]:
    """Exported name -> (module, name in that module), from ``if TYPE_CHECKING:`` blocks."""
    table: dict[str, tuple[str, str]] = {}
    for node in ast.parse(source).body:
        if not (isinstance(node, ast.If) and _is_type_checking(node.test)):
            continue
        for statement in node.body:
            if isinstance(statement, ast.ImportFrom) and statement.module and not statement.level:
                for alias in statement.names:
                    table[alias.asname or alias.name] = (statement.module, alias.name)
    return table


def _is_type_checking(test: ast.expr) -> bool:
    return isinstance(test, ast.Name) and test.id == "TYPE_CHECKING"
