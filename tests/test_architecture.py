"""The rules of the house, checked on the code: which part may import which, at run time and in
the source, and the one error tree.

Run-time rules import a module in a fresh interpreter and look at `sys.modules`, because a
package's ``__init__`` can pull in far more than its import lines show.
"""

from __future__ import annotations

import ast
import builtins
import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

import vla_client
from vla_client import errors
from vla_client.observation import Observation
from vla_client.server import LocalServer, ServerConfig, create_app

SRC = Path(vla_client.__file__).parent
HEAVY = ("torch", "fastapi", "starlette", "uvicorn", "jupyter", "IPython", "matplotlib")
HTTP_STACK = ("httpx", "fastapi", "starlette", "uvicorn", "websockets", "h11")


def loaded_after(statement: str) -> set[str]:
    """Top-level package names and vla_client modules in `sys.modules` after `statement`."""
    code = (
        "import json, sys\n"
        f"{statement}\n"
        "names = {m.split('.')[0] for m in sys.modules} | "
        "{m for m in sys.modules if m.startswith('vla_client')}\n"
        "print(json.dumps(sorted(names)))"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120
    )
    return set(json.loads(result.stdout))


def test_the_probe_sees_what_a_statement_loads() -> None:
    assert "fastapi" in loaded_after("import vla_client.server.app")


@pytest.mark.parametrize(
    ("statement", "forbidden"),
    [
        ("import vla_client", (*HEAVY, *HTTP_STACK, "numpy", "vla_client.client")),
        (
            "from vla_client import ActionClient, Observation, ActionResult, VLAClientError",
            (*HEAVY, "websockets", "vla_client.server", "vla_client.cli"),
        ),
        ("import vla_client.control", (*HTTP_STACK, "vla_client.server", "vla_client.client.core")),
        ("from vla_client.control import ChunkExecutor, SafetyGate, Watchdog", HTTP_STACK),
        ("import vla_client.codecs", (*HTTP_STACK, "vla_client.protocol", "vla_client.client")),
        ("from vla_client.codecs import encode_png, packb", (*HTTP_STACK, "vla_client.client")),
        ("from vla_client.protocol import decode_request, encode_request", HTTP_STACK),
        ("from vla_client.cameras import CameraRig, open_cameras", ("vla_client.server",)),
        ("from vla_client.client import ActionClient", ("vla_client.server", "vla_client.cli")),
        (
            "from vla_client.server import create_app, LocalServer",
            ("vla_client.cli", "vla_client.client", "httpx", "torch"),
        ),
        ("import vla_client.sim", (*HEAVY, *HTTP_STACK, "vla_client.client", "vla_client.server")),
        (
            "from vla_client.sim.reach import ReachTask",
            (*HTTP_STACK, "vla_client.client", "vla_client.transports", "vla_client.server"),
        ),
        (
            "import vla_client.server.worker.process",
            (*HTTP_STACK, "vla_client.client", "vla_client.transports", "torch"),
        ),
    ],
)
def test_importing_loads_only_what_it_needs(statement: str, forbidden: tuple[str, ...]) -> None:
    loaded = loaded_after(statement)
    assert not loaded & set(forbidden), f"{statement!r} loads {sorted(loaded & set(forbidden))}"


def test_the_worker_process_never_loads_the_http_stack() -> None:
    """Asked from inside a real worker process: the policy reports what is loaded there."""
    from module_report_policy import WATCHED, ModuleReportPolicy

    policy = ModuleReportPolicy()
    with LocalServer(create_app(policy, ServerConfig())) as server:
        from vla_client import ActionClient

        frame = np.zeros((8, 8, 3), np.uint8)
        with ActionClient(server.url, encoding="raw", wire="msgpack") as client:
            loaded = client.infer(Observation({"cam": frame})).actions[0]
    assert dict(zip(WATCHED, loaded.tolist(), strict=True)) == dict.fromkeys(WATCHED, 0.0)
    # The same policy in the entrypoint's own process sees the HTTP stack: the probe works.
    in_process = policy.infer(None)  # type: ignore[arg-type]
    assert in_process[0][WATCHED.index("fastapi")] == 1.0


# --- the same rules read from the source: no module may import across them ---------------

RULES: dict[str, tuple[str, ...]] = {
    "vla_client.errors": ("vla_client",),
    "vla_client.codecs": (
        "vla_client.protocol", "vla_client.client", "vla_client.transports", "vla_client.server",
        "vla_client.cli", "vla_client.control", "vla_client.cameras",
    ),
    "vla_client.protocol": (
        "vla_client.client", "vla_client.transports", "vla_client.server", "vla_client.cli",
        "vla_client.control", "vla_client.cameras",
    ),
    "vla_client.transports": ("vla_client.client", "vla_client.server", "vla_client.cli"),
    "vla_client.client": ("vla_client.server", "vla_client.cli", "vla_client.control"),
    "vla_client.cameras": ("vla_client.server", "vla_client.client", "vla_client.transports",
                           "vla_client.cli"),
    "vla_client.server": ("vla_client.cli", "vla_client.client", "vla_client.transports"),
    "vla_client.sim": ("vla_client.server", "vla_client.cli"),
    "vla_client.sim.reach": ("vla_client.client", "vla_client.transports", "vla_client.cli"),
}  # fmt: skip
ALWAYS_ALLOWED = ("vla_client.errors", "vla_client._lazy", "vla_client.validation")
ONLY: dict[str, tuple[str, ...]] = {
    # The control loop works with any transport: it knows results and observations, no more.
    "vla_client.control": (
        "vla_client.client.result",
        "vla_client.observation",
        "vla_client.protocol",
    ),
}


def within(module: str, packages: tuple[str, ...]) -> bool:
    """Whether `module` is one of `packages` or inside one (``vla_client.cli`` is not inside
    ``vla_client.client``)."""
    return any(module == p or module.startswith(p.rstrip(".") + ".") for p in packages)


def module_name(path: Path) -> str:
    parts = list(path.relative_to(SRC.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imports_of(path: Path, *, with_type_checking: bool) -> Iterator[str]:
    """The vla_client modules `path` imports at module level (and in TYPE_CHECKING blocks)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    nodes: list[ast.stmt] = list(tree.body)
    for node in tree.body:
        if isinstance(node, ast.If) and getattr(node.test, "id", "") == "TYPE_CHECKING":
            nodes.remove(node)
            if with_type_checking:
                nodes.extend(node.body)
    for node in nodes:
        if (
            isinstance(node, ast.ImportFrom)
            and node.module
            and node.module.startswith("vla_client")
        ):
            yield node.module
        elif isinstance(node, ast.Import):
            yield from (a.name for a in node.names if within(a.name, ("vla_client",)))


MODULES = {module_name(p): p for p in SRC.rglob("*.py")}


@pytest.mark.parametrize("module", sorted(MODULES))
def test_imports_point_one_way(module: str) -> None:
    for package, forbidden in RULES.items():
        if not within(module, (package,)):
            continue
        for imported in imports_of(MODULES[module], with_type_checking=True):
            if within(imported, (*ALWAYS_ALLOWED, package)):
                continue
            assert not within(imported, forbidden), f"{module} imports {imported}"
    for package, allowed in ONLY.items():
        if within(module, (package,)):
            for imported in imports_of(MODULES[module], with_type_checking=True):
                assert within(imported, (*ALWAYS_ALLOWED, package, *allowed)), imported


def test_no_import_circles() -> None:
    """Module-level imports between our modules form no loop (lazy faces excluded: they import
    nothing at run time)."""
    graph = {
        name: {
            target
            for imported in imports_of(path, with_type_checking=False)
            for target in (imported, imported.rsplit(".", 1)[0])
            if target in MODULES and target != name
        }
        for name, path in MODULES.items()
    }
    state: dict[str, int] = {}

    def visit(node: str, trail: list[str]) -> None:
        state[node] = 1
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                raise AssertionError(" -> ".join([*trail[trail.index(nxt) :], nxt]))
            if nxt not in state:
                visit(nxt, [*trail, nxt])
        state[node] = 2

    for name in sorted(graph):
        if name not in state:
            visit(name, [name])


# --- one error tree ---------------------------------------------------------------------------

ERROR_CLASSES = [
    value
    for value in vars(errors).values()
    if isinstance(value, type) and issubclass(value, BaseException)
]


def test_every_error_is_under_the_base_and_exported_at_the_top() -> None:
    assert len(ERROR_CLASSES) >= 20
    for error in ERROR_CLASSES:
        assert issubclass(error, errors.VLAClientError), error
        assert error.__name__ in vla_client.__all__, error
        assert getattr(vla_client, error.__name__) is error


def test_every_name_of_every_package_face_exists() -> None:
    faces = [p for p in SRC.rglob("__init__.py") if "lazy_face" in p.read_text(encoding="utf-8")]
    assert len(faces) >= 8
    for path in faces:
        package = __import__(module_name(path), fromlist=["_"])
        for name in package.__all__:
            assert getattr(package, name) is not None, f"{package.__name__}.{name}"
        with pytest.raises(AttributeError, match="no attribute 'nope'"):
            package.nope  # noqa: B018


def test_every_exception_raised_is_a_builtin_or_from_errors_py() -> None:
    """No error class is defined anywhere but errors.py, and every one raised is exported."""
    ours = {error.__name__ for error in ERROR_CLASSES}
    for name, path in MODULES.items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef) and name != "vla_client.errors":
                bases = {getattr(b, "id", getattr(b, "attr", "")) for b in node.bases}
                assert not bases & (ours | {"Exception", "BaseException"}), (name, node.name)
            if isinstance(node, ast.Raise) and isinstance(node.exc, ast.Call):
                raised = getattr(node.exc.func, "id", None)
                if raised is not None and raised[0].isupper() and raised.endswith("Error"):
                    assert raised in ours or hasattr(builtins, raised), (name, raised)
