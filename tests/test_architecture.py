"""The rules of the house, checked on the code: which part may import which, at run time and in
the source, and the one error tree.

Run-time rules import a module in a fresh interpreter and look at `sys.modules`, because a
package's ``__init__`` can pull in far more than its import lines show.
"""

from __future__ import annotations

import ast
import builtins
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import numpy as np
import pytest

import vla_client
import vla_client.server
from vla_client import errors
from vla_client.observation import Observation
from vla_client.server import LocalServer, ServerConfig, create_app

SRC = Path(vla_client.__file__).parent
HEAVY = ("torch", "fastapi", "starlette", "uvicorn", "jupyter", "IPython", "matplotlib", "zmq")
OPTIONAL_READERS = ("rerun", "rosbags", "pyarrow", "zenoh")
"""Rerun, ROS bags and Zenoh load when a command logs to Rerun, reads a bag or joins a ROS 2
graph, never on import."""
HTTP_STACK = ("httpx", "fastapi", "starlette", "uvicorn", "websockets", "h11")
SERVER_DECODERS = (
    "vla_client.codecs.image_decode",
    "vla_client.codecs.png_read",
    "vla_client.server.wire.decode",
)
"""The server's sides of codecs and protocol that read requests and their images."""
SERVER_HALVES = (*SERVER_DECODERS, "vla_client.server.wire.reply_build")
"""All the server's sides of the shared layers: with the reply builders."""


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
        (
            "import vla_client",
            (*HEAVY, *HTTP_STACK, *OPTIONAL_READERS, "numpy", "lerobot", "vla_client.client"),
        ),
        (
            "import vla_client.cli, vla_client.control, vla_client.viz, vla_client.cameras.ros_bag",
            OPTIONAL_READERS,
        ),
        (
            "from vla_client import ActionClient, Observation, ActionResult, VLAClientError",
            (*HEAVY, "websockets", "vla_client.server", "vla_client.cli", *SERVER_HALVES),
        ),
        (
            "import vla_client.control",
            (*HTTP_STACK, "vla_client.server", "vla_client.client.request_book"),
        ),
        ("from vla_client.control import ChunkExecutor, SafetyGate, Watchdog", HTTP_STACK),
        ("import vla_client.codecs", (*HTTP_STACK, "vla_client.protocol", "vla_client.client")),
        ("from vla_client.codecs import encode_png, packb", (*HTTP_STACK, "vla_client.client")),
        (
            "from vla_client.protocol import encode_request, read_reply",
            (*HTTP_STACK, *SERVER_HALVES, "vla_client.server"),
        ),
        ("from vla_client.server.wire.decode import decode_request", HTTP_STACK),
        ("from vla_client.cameras import CameraRig, open_cameras", ("vla_client.server",)),
        ("from vla_client.client import ActionClient", ("vla_client.server", "vla_client.cli")),
        (
            "from vla_client.server import create_app, LocalServer",
            ("vla_client.cli", "vla_client.client", "httpx", "torch"),
        ),
        ("import vla_client.sim", (*HEAVY, *HTTP_STACK, "vla_client.client", "vla_client.server")),
        (
            "from vla_client.tasks import ReachTask",
            (*HTTP_STACK, "vla_client.client", "vla_client.transports", "vla_client.server"),
        ),
        (
            "import vla_client.server.worker.process, vla_client.server.policies.reference",
            (*HTTP_STACK, "vla_client.client", "vla_client.transports", "torch", "pydantic"),
        ),
        # The LeRobot adapter and export: LeRobot and torch load when an export runs, never here.
        (
            "from vla_client.lerobot import LeRobotRobot, export_lerobot_dataset",
            (*HEAVY, *HTTP_STACK, "lerobot", "vla_client.server", "vla_client.client.request_book"),
        ),
        ("import vla_client.cli.export", ("lerobot", "torch", "vla_client.server")),
    ],
)
def test_importing_loads_only_what_it_needs(statement: str, forbidden: tuple[str, ...]) -> None:
    loaded = loaded_after(statement)
    assert not loaded & set(forbidden), f"{statement!r} loads {sorted(loaded & set(forbidden))}"


# What the worker imports to serve the reference policy: its own code, then the policy's module
# as unpacking the policy imports it (the policies' package face loads no other policy).
REFERENCE_WORKER = "import vla_client.server.worker.process, vla_client.server.policies.reference"
IMAGE_CODECS = ("PIL", "isal", "fpng")


def test_the_reference_worker_loads_no_other_policy_and_no_image_codec() -> None:
    loaded = loaded_after(REFERENCE_WORKER)
    unwanted = {
        *IMAGE_CODECS, "vla_client.recording", "vla_client.server.engine.device_decode",
        "vla_client.server.policies.torch_cnn", "vla_client.server.policies.replay",
        "vla_client.server.policies.openpi", "vla_client.server.policies.loading",
    }  # fmt: skip
    assert not loaded & unwanted, sorted(loaded & unwanted)


@pytest.mark.xfail(
    strict=True, reason="server/policies/reference.py imports cv2 for cv2.mean of each image"
)
def test_the_reference_worker_loads_no_opencv() -> None:
    assert "cv2" not in loaded_after(REFERENCE_WORKER)


def test_the_action_client_loads_no_image_decoder() -> None:
    """The robot's encoders and the server's decoders live apart (codecs.image_encode and
    image_decode), the fit's resizes and fpng load Pillow on first use only."""
    loaded = loaded_after("from vla_client import ActionClient, Observation")
    assert not loaded & {"PIL", "isal"}, sorted(loaded & {"PIL", "isal"})


SERIALISERS = ("msgpack", "msgspec", "orjson", "pybase64", "ormsgpack", "ujson", "simplejson")
"""Third-party msgpack, JSON and base64 libraries, one per job (docs/install.md, "Serialisers"):
msgspec writes msgpack and types the worker's messages, msgpack reads the wire's msgpack (its
`Unpacker` says where each value ends, which the zero-copy array walk steps by), orjson does
JSON and pybase64 base64."""


@pytest.mark.parametrize(
    ("statement", "serialisers"),
    [
        (
            "from vla_client import ActionClient, Observation",
            {"msgpack", "msgspec", "orjson", "pybase64"},
        ),
        (REFERENCE_WORKER, {"msgspec"}),  # its messages; it reads no body and writes no JSON
    ],
    ids=["action client", "reference worker"],
)
def test_each_part_loads_the_serialisers_of_its_jobs(statement: str, serialisers: set[str]) -> None:
    assert loaded_after(statement) & set(SERIALISERS) == serialisers


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
    "vla_client.client": ("vla_client.server", "vla_client.cli", "vla_client.control",
                          *SERVER_HALVES),
    "vla_client.cameras": ("vla_client.server", "vla_client.client", "vla_client.transports",
                           "vla_client.cli"),
    "vla_client.server": ("vla_client.cli", "vla_client.client", "vla_client.transports"),
    "vla_client.sim": ("vla_client.server", "vla_client.cli"),
    "vla_client.tasks": ("vla_client.client", "vla_client.transports", "vla_client.server",
                         "vla_client.cli", "vla_client.sim"),
    # Robot-side: a LeRobot robot drives the loop and its recordings export; no server code.
    "vla_client.lerobot": ("vla_client.server", "vla_client.cli", "vla_client.client.request_book",
                           "vla_client.transports"),
    # A live ROS 2 node drives the loop with the client; it needs no server code.
    "vla_client.ros2": ("vla_client.server", "vla_client.cli"),
    # Shared memory both sides map: no knowledge of requests, transports or either side.
    "vla_client.segments": ("vla_client.codecs", "vla_client.protocol", "vla_client.client",
                            "vla_client.transports", "vla_client.server", "vla_client.cli"),
    # The robot's halves of the shared layers never reach for the server's halves.
    "vla_client.protocol.ipc": SERVER_HALVES,
    "vla_client.transports.ipc": SERVER_HALVES,
    "vla_client.transports.ipc_memory": SERVER_HALVES,
    "vla_client.codecs.image_encode": SERVER_HALVES,
    "vla_client.protocol.image_forms": SERVER_HALVES,
    "vla_client.protocol.request": SERVER_HALVES,
    "vla_client.protocol.reply_read": SERVER_HALVES,
    "vla_client.client.fit": SERVER_HALVES,
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


def load_map_tool() -> ModuleType:
    """tools/architecture.py, which draws docs/architecture.md's map from the imports."""
    path = Path(__file__).resolve().parents[1] / "tools" / "architecture.py"
    spec = importlib.util.spec_from_file_location("architecture_map", path)
    assert spec is not None and spec.loader is not None
    tool = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tool)
    return tool


MAP = load_map_tool()


def imports_of(path: Path, *, with_type_checking: bool) -> Iterator[str]:
    """The vla_client modules `path` imports at import time (and in TYPE_CHECKING blocks)."""
    kinds = ("import", "type_checking") if with_type_checking else ("import",)
    return (module for module, kind in MAP.imports(path) if kind in kinds)


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


def test_zenoh_is_imported_only_by_the_ros2_package() -> None:
    """The ``ros2`` extra's session library stays behind vla_client.ros2 (and so out of every
    other part's import time and requirements)."""
    outside = []
    for name, path in MODULES.items():
        if within(name, ("vla_client.ros2",)):
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                imported = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and not node.level:
                imported = [node.module or ""]
            else:
                continue
            outside += [f"{name}: {m}" for m in imported if m.split(".")[0] == "zenoh"]
    assert outside == []


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


SERVER_WINGS = ("vla_client.server.edge", "vla_client.server.engine", "vla_client.server.wire")
"""The server's own rooms: no module outside `vla_client.server` imports them, in any way."""
SERVER_USERS = ("vla_client.server", "vla_client.cli")
"""The server and the commands that start one (``serve``, ``demo``, ``bench``, ``eval``)."""


@pytest.mark.parametrize("module", sorted(MODULES))
def test_nothing_outside_the_server_imports_a_server_module(module: str) -> None:
    """So the server could ship as a wheel of its own by packaging alone: no part but the
    command line reaches into `vla_client.server` (and it only inside the commands that serve),
    and none but the server itself into its wings, not even inside a function."""
    if within(module, ("vla_client.server",)):
        return
    for imported, kind in MAP.imports(MODULES[module]):
        assert not within(imported, SERVER_WINGS), f"{module} imports {imported}"
        if within(imported, ("vla_client.server",)):
            assert within(module, SERVER_USERS), f"{module} imports {imported}"
            assert kind in ("function", "type_checking"), f"{module} imports {imported} at once"


FAMILY_MODULES = tuple(name for name in MODULES if name.startswith("vla_client.protocol.families."))
"""The documents of the server families the client talks to (GR00T, vLLM-Omni, RoboArena)."""
GENERIC = (
    "vla_client.control",
    "vla_client.client.request_book",
    "vla_client.client.base",
    "vla_client.client.session",
    "vla_client.protocol.rtc",
    "vla_client.protocol.models",
)
"""What works with every server family, and so names none."""


@pytest.mark.parametrize("module", sorted(m for m in MODULES if within(m, GENERIC)))
def test_the_generic_parts_name_no_server_family(module: str) -> None:
    """A family's documents are read by its own session and transport; the executor, the
    client's options and its request book ask the families' package, never a family."""
    for imported, _kind in MAP.imports(MODULES[module]):
        assert not within(imported, FAMILY_MODULES), f"{module} imports {imported}"


def test_the_map_in_the_architecture_page_is_drawn_from_todays_imports() -> None:
    """docs/architecture.md shows what tools/architecture.py draws; on a difference, run
    ``python tools/architecture.py --write`` and read the new map before committing it."""
    page = (Path(__file__).resolve().parents[1] / "docs" / "architecture.md").read_text()
    assert MAP.in_page(page) == MAP.block(MAP.drawing())


def test_the_map_draws_each_kind_of_import_and_every_part() -> None:
    """Arrows the code has, of each kind it has, and a part for every folder and module.

    (The one ``types only`` arrow, control/ to protocol/, became deferred when
    `SafetyGate.from_metadata` took to reading a metadata dict with `read_metadata`.)"""
    graph = MAP.arrows()
    assert graph["server/"]["protocol/"] == "import"
    assert graph["cli/"]["server/"] == "deferred"  # only the commands that serve import it
    assert graph["control/"]["protocol/"] == "deferred"  # control/safety.py, on first use
    assert graph["__init__.py"]["client/"] == "deferred"  # the front door's lazy face
    assert "server/" not in graph["client/"]
    parts = {MAP.part_of(name) for name in MODULES}
    assert set(graph) == parts


def test_the_path_of_a_request_field_names_files_and_names_that_exist() -> None:
    """docs/architecture.md's table of the path of `seed`: each file is there, with the name."""
    page = (Path(__file__).resolve().parents[1] / "docs" / "architecture.md").read_text()
    table = page.split("<!-- the path of seed -->", 1)[1].split("<!-- end of the path -->", 1)[0]
    rows = re.findall(r"^\| [^|]+ \| `([\w/]+\.py)` \| `([^`]+)` \|$", table, re.MULTILINE)
    assert len(rows) >= 10
    for file, name in rows:
        assert name in (SRC / file).read_text(encoding="utf-8"), (file, name)


# --- one error tree ---------------------------------------------------------------------------

ERROR_CLASSES = [
    value
    for value in vars(errors).values()
    if isinstance(value, type) and issubclass(value, BaseException)
]


SERVER_ERRORS = {
    "InferenceError", "PolicyFailedError", "WorkerStartError", "PolicyLoadError",
    "PolicyStartError", "PolicyOutputError", "PolicyInputError",
}  # fmt: skip


def test_every_error_is_under_the_base_and_exported_on_its_side() -> None:
    """The robot's errors at the top, the server's from `vla_client.server` alone."""
    assert len(ERROR_CLASSES) >= 20
    for error in ERROR_CLASSES:
        assert issubclass(error, errors.VLAClientError), error
        face = vla_client.server if error.__name__ in SERVER_ERRORS else vla_client
        assert error.__name__ in face.__all__, error
        assert getattr(face, error.__name__) is error
    assert not SERVER_ERRORS & set(vla_client.__all__)


def drawn_tree() -> dict[str, tuple[str | None, set[str]]]:
    """errors.py's drawn tree: each class -> (its parent in the tree, the builtin bases drawn
    beside it in parentheses)."""
    doc = errors.__doc__ or ""
    lines = doc.split("::\n\n", 1)[1].split("\n\n", 1)[0].splitlines()
    tree: dict[str, tuple[str | None, set[str]]] = {}
    trail: list[str] = []
    for line in lines:
        match = re.match(r"(?P<lead>[ │├└─]*)(?P<name>\w+)(?: \((?P<bases>[\w, ]+)\))?", line)
        assert match, line
        depth = (len(match["lead"]) - 4) // 4
        trail[depth:] = [match["name"]]
        bases = {b.strip() for b in (match["bases"] or "").split(",") if b.strip()}
        tree[match["name"]] = (trail[depth - 1] if depth else None, bases)
    return tree


def test_the_drawn_error_tree_is_the_class_tree() -> None:
    """Every class is drawn once, under its parent, with its builtin bases beside it."""
    tree = drawn_tree()
    assert set(tree) == {error.__name__ for error in ERROR_CLASSES}
    for error in ERROR_CLASSES:
        ours = [b.__name__ for b in error.__bases__ if issubclass(b, errors.VLAClientError)]
        builtin = {b.__name__ for b in error.__bases__} - set(ours) - {"Exception"}
        assert tree[error.__name__] == (ours[0] if ours else None, builtin), error


FACES = [p for p in SRC.rglob("__init__.py") if "lazy_face" in p.read_text(encoding="utf-8")]


def test_every_name_of_every_package_face_exists() -> None:
    assert len(FACES) >= 9
    for path in FACES:
        package = __import__(module_name(path), fromlist=["_"])
        for name in package.__all__:
            assert getattr(package, name) is not None, f"{package.__name__}.{name}"
        with pytest.raises(AttributeError, match="no attribute 'nope'"):
            package.nope  # noqa: B018


def test_a_face_built_the_old_way_from_its_file_name_is_refused() -> None:
    from vla_client._lazy import lazy_face

    with pytest.raises(TypeError, match="table of name -> module"):
        lazy_face("vla_client", vla_client.__file__)  # type: ignore[arg-type]


@pytest.mark.parametrize("path", FACES, ids=module_name)
def test_a_face_table_names_what_its_type_checking_block_imports(path: Path) -> None:
    """The run-time table (read without the source) and the block editors read agree."""
    block = {}
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.If) and getattr(node.test, "id", "") == "TYPE_CHECKING":
            for statement in node.body:
                assert isinstance(statement, ast.ImportFrom) and statement.module, statement
                for alias in statement.names:
                    assert alias.asname == alias.name, f"{alias.name} is not re-exported as is"
                    block[alias.name] = statement.module
    package = __import__(module_name(path), fromlist=["_"])
    assert block == package._FACE
    assert package.__all__ == sorted(block)


def test_the_package_imports_and_serves_from_compiled_files_alone(tmp_path: Path) -> None:
    """An install that ships only ``.pyc`` files (frozen or embedded images do): the faces need
    no source, the worker starts from ``__main__.pyc``, and a request is answered."""
    site = tmp_path / "site"
    shutil.copytree(SRC, site / "vla_client", ignore=shutil.ignore_patterns("__pycache__"))
    compiled = subprocess.run(
        [sys.executable, "-m", "compileall", "-b", "-q", str(site)],
        capture_output=True,
        timeout=120,
    )
    assert compiled.returncode == 0, compiled.stdout
    for source in site.rglob("*.py"):
        source.unlink()
    code = (
        "import vla_client\n"
        "from vla_client import ActionClient, Observation\n"
        "from vla_client.server import LocalServer, ReferencePolicy, ServerConfig, create_app\n"
        "import numpy as np\n"
        "assert vla_client.__file__.endswith('.pyc'), vla_client.__file__\n"
        "app = create_app(ReferencePolicy(), ServerConfig())\n"
        "with LocalServer(app) as server, ActionClient(server.url) as client:\n"
        "    frame = np.zeros((8, 8, 3), np.uint8)\n"
        "    print(client.infer(Observation({'cam': frame})).actions.shape)\n"
    )
    env = {**os.environ, "PYTHONPATH": str(site)}
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=env
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "(16, 7)"


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
