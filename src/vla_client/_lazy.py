"""Package faces that import a module only when one of its names is first used.

A package's ``__init__.py`` names what it offers twice, side by side: in an
``if TYPE_CHECKING:`` block of ``from module import Name as Name`` lines, which type checkers
and editors read as plain imports, and in a table of name to module that the package hands to
`lazy_face`::

    _FACE = {"Name": "package.module", ...}
    __getattr__, __dir__, __all__ = lazy_face(__name__, _FACE)

At run time nothing in the block is imported: the package's module ``__getattr__`` imports a
name's module the first time the name is asked for (then keeps it, so the second use costs
nothing). ``import vla_client`` therefore costs almost nothing, and a process that only needs
the codecs (an inference worker, say) never loads the HTTP client. The table is plain data, so
a package works where no source file is installed (only ``.pyc`` files, as frozen or embedded
installs ship); ``tests/test_architecture.py`` checks that every face's table and block name
the same names from the same modules.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Mapping
from typing import Any


def lazy_face(
    package: str, names: Mapping[str, str]
) -> tuple[Callable[[str], Any], Callable[[], list[str]], list[str]]:
    """``__getattr__``, ``__dir__`` and ``__all__`` for `package`, which offers each of `names`
    from the module the table gives."""
    if not isinstance(names, Mapping):  # the old call passed the face's __file__ here
        raise TypeError(f"lazy_face takes a table of name -> module, not {names!r}")
    exported = sorted(names)

    def __getattr__(name: str) -> Any:
        try:
            module = names[name]
        except KeyError:
            raise AttributeError(f"module {package!r} has no attribute {name!r}") from None
        value = getattr(importlib.import_module(module), name)
        setattr(sys.modules[package], name, value)
        return value

    def __dir__() -> list[str]:
        return sorted({*vars(sys.modules[package]), *exported})

    return __getattr__, __dir__, exported
