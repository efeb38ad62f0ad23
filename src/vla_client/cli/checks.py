"""What a command checks before doing any work, so that a long run never fails at its end.

Output files: the extension is checked when the command line is read (`file_type`, a usage
error), the folder when the command starts (`check_output_file`, `check_output_folder`): it
must exist and be writable. Optional libraries the run will need (matplotlib to plot, websockets
for ``ws://`` URLs) are imported up front by `require_module`. Each check raises `ValueError`
with one line that names the option and the problem.
"""

from __future__ import annotations

import argparse
import importlib
import os
from collections.abc import Callable
from pathlib import Path

INSTALL = {
    # in the 'notebooks' extra; the 'server' extra of the README's install leaves it out
    "matplotlib": "pip install matplotlib (or 'vla-client[notebooks]')",
    "websockets": "pip install 'vla-client[websocket]'",
    "rerun": "pip install 'vla-client[rerun]'",
    "rosbags": "pip install 'vla-client[ros]'",
    "zmq": "pip install 'vla-client[gr00t]'",
}


def file_type(*suffixes: str) -> Callable[[str], str]:
    """An argparse type for an output file that must end in one of `suffixes` (any case)."""

    def check(text: str) -> str:
        if not text.lower().endswith(suffixes):
            raise argparse.ArgumentTypeError(
                f"the file must end in {' or '.join(suffixes)}, got {text!r}"
            )
        return text

    return check


def check_output_file(path: str, option: str) -> None:
    """`path` can be written: not a folder, its folder exists and is writable."""
    target = Path(path)
    if target.is_dir():
        raise ValueError(f"{option} {path}: that is a folder, not a file")
    _check_folder(target.parent, f"{option} {path}")
    if target.exists() and not os.access(target, os.W_OK):
        raise ValueError(f"{option} {path}: the file is not writable")


def check_output_folder(path: str, option: str) -> None:
    """`path` is a writable folder, or can be made in a writable one."""
    target = Path(path)
    if target.exists() and not target.is_dir():
        raise ValueError(f"{option} {path}: that is a file, not a folder")
    _check_folder(target if target.exists() else target.parent, f"{option} {path}")


def require_module(name: str, needed_for: str) -> None:
    """Import `name` now, or explain how to install it; `needed_for` says what wants it."""
    try:
        importlib.import_module(name)
    except ImportError:
        install = INSTALL.get(name, f"pip install {name}")
        raise ValueError(f"{needed_for} needs {name}, which is not installed: {install}") from None


def _check_folder(folder: Path, what: str) -> None:
    if not folder.is_dir():
        raise ValueError(f"{what}: the folder {folder} does not exist")
    if not os.access(folder, os.W_OK | os.X_OK):
        raise ValueError(f"{what}: the folder {folder} is not writable")
