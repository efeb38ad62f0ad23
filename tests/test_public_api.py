"""The public API changes only on purpose: its snapshot, the one way to rename, one version.

The snapshot (`tests/api_snapshot.json`) holds ``__all__`` and the signatures of what the public
package faces export. When a change to the API is meant, record it in the same commit with
``python tools/api_snapshot.py --write``.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import inspect
import json
import re
import sys
import urllib.parse
import warnings
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import httpx
import pytest

import vla_client
from vla_client import ActionClient, AsyncActionClient
from vla_client.client.base import ClientBase
from vla_client.client.fit import FramePreprocessor
from vla_client.protocol import METADATA_PATH
from vla_client.transports import (
    AsyncHTTPTransport,
    AsyncWebSocketTransport,
    HTTPTransport,
    WebSocketTransport,
)
from vla_client.validation import renamed_keywords

if sys.version_info >= (3, 11):
    import tomllib
else:  # installed with the server extra
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def snapshot_tool() -> Iterator[ModuleType]:
    path = ROOT / "tools" / "api_snapshot.py"
    spec = importlib.util.spec_from_file_location("api_snapshot_tool", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["api_snapshot_tool"] = module
    spec.loader.exec_module(module)
    yield module
    del sys.modules["api_snapshot_tool"]


def test_the_public_api_matches_its_snapshot(snapshot_tool: ModuleType) -> None:
    recorded = snapshot_tool.SNAPSHOT.read_text(encoding="utf-8")
    current = snapshot_tool.dumps(snapshot_tool.current_api())
    assert current == recorded, (
        "the public API differs from tests/api_snapshot.json; if that is meant, keep the old "
        f"names working (validation.renamed_keywords) and run `{snapshot_tool.REGENERATE}`:\n"
        + snapshot_tool.difference(recorded, current)
    )


def test_a_renamed_keyword_fails_the_snapshot(
    snapshot_tool: ModuleType, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`ActionClient(timeout_s=)` renamed to `wait_s=` (say): the comparison names both."""
    renamed_init: Any = ClientBase.__init__

    def init(self: Any, base_url: str, *, wait_s: float = 10.0) -> None:
        renamed_init(self, base_url, timeout_s=wait_s)

    monkeypatch.setattr(ClientBase, "__init__", init)
    recorded = snapshot_tool.SNAPSHOT.read_text(encoding="utf-8")
    diff = snapshot_tool.difference(recorded, snapshot_tool.dumps(snapshot_tool.current_api()))
    removed = [line for line in diff.splitlines() if line.startswith('-      "ActionClient"')]
    added = [line for line in diff.splitlines() if line.startswith('+      "ActionClient"')]
    assert len(removed) == 1 and "timeout_s" in removed[0]
    assert len(added) == 1 and "wait_s" in added[0] and "timeout_s" not in added[0]


def test_a_removed_name_fails_the_snapshot(
    snapshot_tool: ModuleType, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(vla_client, "__all__", [n for n in vla_client.__all__ if n != "Backoff"])
    recorded = json.loads(snapshot_tool.SNAPSHOT.read_text(encoding="utf-8"))
    current = snapshot_tool.current_api()
    assert "Backoff" in recorded["vla_client"]["__all__"]
    assert "Backoff" not in current["vla_client"]["__all__"]
    assert "Backoff" not in current["vla_client"]["signatures"]


def test_the_snapshot_tool_writes_what_it_compares(
    snapshot_tool: ModuleType, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = tmp_path / "api_snapshot.json"
    monkeypatch.setattr(snapshot_tool, "SNAPSHOT", target)
    monkeypatch.setattr(snapshot_tool, "ROOT", tmp_path)
    assert snapshot_tool.main([]) == 1  # no snapshot yet: everything differs
    assert snapshot_tool.main(["--write"]) == 0
    assert snapshot_tool.main([]) == 0
    assert json.loads(target.read_text())["vla_client"]["__all__"] == sorted(vla_client.__all__)


# The one way to rename a keyword (`renamed_keywords`), on a made-up rename: release 0.9.0
# renames `force=` to `force_n=`, and 0.10.0 removes the old name.


class Gripper:
    @renamed_keywords(since="0.9.0", force="force_n")
    def __init__(self, width_m: float, *, force_n: float = 1.0) -> None:
        self.setting = (width_m, force_n)


@renamed_keywords(since="0.9.0", removed_in="0.10.0", force="force_n")
def grip(width_m: float, *, force_n: float = 1.0) -> tuple[float, float]:
    return width_m, force_n


def test_a_renamed_keyword_warns_at_the_callers_line_and_means_the_new_one() -> None:
    with pytest.warns(DeprecationWarning) as seen:
        gripper = Gripper(0.04, force=5.0)
    assert [str(w.message) for w in seen] == [
        "Gripper(): force= is deprecated since 0.9.0; use force_n="
    ]
    assert seen[0].filename == __file__
    assert gripper.setting == Gripper(0.04, force_n=5.0).setting == (0.04, 5.0)


def test_a_renamed_keyword_given_by_both_names_is_refused() -> None:
    with pytest.raises(TypeError, match=r"^Gripper\(\): force= is the deprecated name of force_n="):
        Gripper(0.04, force=5.0, force_n=5.0)


def test_the_new_name_alone_warns_of_nothing_and_the_signature_shows_only_it() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert Gripper(0.04, force_n=2.0).setting == (0.04, 2.0)
        assert grip(0.04, force_n=2.0) == (0.04, 2.0)
    assert list(inspect.signature(Gripper).parameters) == ["width_m", "force_n"]
    assert list(inspect.signature(grip).parameters) == ["width_m", "force_n"]


@pytest.mark.parametrize("keywords", [{"force": 5.0}, {"force": 5.0, "force_n": 5.0}])
def test_a_removed_name_is_a_type_error_that_names_the_new_one(keywords: dict[str, float]) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(TypeError) as raised:
            grip(0.04, **keywords)
    assert str(raised.value) == (
        "grip(): force= is now force_n= (renamed in 0.9.0; the old name went in 0.10.0)"
    )


# What 0.2.0 deprecated went in 0.3.0 (a TypeError naming the new name) and its tombstones in
# 0.4.0: an old keyword is now refused as any keyword the function never had.
REMOVED_KEYWORDS = [
    (ActionClient, "http://127.0.0.1:9", "timeout"),
    (ActionClient, "http://127.0.0.1:9", "deadline"),
    (ActionClient, "http://127.0.0.1:9", "max_observation_age"),
    (AsyncActionClient, "http://127.0.0.1:9", "timeout"),
    (AsyncActionClient, "http://127.0.0.1:9", "deadline"),
    (AsyncActionClient, "http://127.0.0.1:9", "max_observation_age"),
    (HTTPTransport, "http://127.0.0.1:9", "timeout"),
    (AsyncHTTPTransport, "http://127.0.0.1:9", "timeout"),
    (WebSocketTransport, "ws://127.0.0.1:9", "timeout"),
    (WebSocketTransport, "ws://127.0.0.1:9", "connect_timeout"),
    (WebSocketTransport, "ws://127.0.0.1:9", "max_size"),
    (AsyncWebSocketTransport, "ws://127.0.0.1:9", "timeout"),
    (AsyncWebSocketTransport, "ws://127.0.0.1:9", "connect_timeout"),
    (AsyncWebSocketTransport, "ws://127.0.0.1:9", "max_size"),
]


@pytest.mark.parametrize(("kind", "url", "old"), REMOVED_KEYWORDS)
def test_a_keyword_removed_in_0_3_0_is_gone_in_0_4_0(kind: type, url: str, old: str) -> None:
    with pytest.raises(TypeError, match=rf"unexpected keyword argument '{old}'$"):
        kind(url, **{old: 4096})


def test_the_fit_has_no_names_keyword_any_more() -> None:
    with pytest.raises(TypeError, match=r"unexpected keyword argument 'names'$"):
        FramePreprocessor(names={"front": "base_0_rgb"})  # type: ignore[call-arg]
    with pytest.raises(TypeError, match=r"unexpected keyword argument 'names'$"):
        FramePreprocessor.from_metadata({}, names={"front": "base_0_rgb"})  # type: ignore[call-arg]


@pytest.mark.parametrize(
    "module",
    ["vla_client.scene", "vla_client.preprocess", "vla_client.recorder",
     "vla_client.protocol.response", "vla_client.codecs.images"],
)  # fmt: skip
def test_a_module_removed_in_0_3_0_or_0_4_0_is_not_found(module: str) -> None:
    with pytest.raises(ModuleNotFoundError, match=re.escape(module)):
        importlib.import_module(module)


REMOVED_NAMES = [
    *(("vla_client.cameras.preprocess", name) for name in
      ("FITS", "MIN_SIDE", "Fit", "FramePreprocessor", "check_camera_map", "parse_image_size")),
    ("vla_client.protocol.image_forms", "decode_image_value"),
    *(("vla_client", name) for name in
      ("DecodedRequest", "decode_request", "InferenceError", "PolicyLoadError",
       "PolicyOutputError", "PolicyStartError", "WorkerStartError")),
]  # fmt: skip


@pytest.mark.parametrize(("module", "name"), REMOVED_NAMES)
def test_a_name_removed_from_its_0_1_0_home_in_0_3_0_is_not_there(module: str, name: str) -> None:
    """Each lives only in its new home now: the fit in `vla_client.client.fit`, the decoding in
    `vla_client.server.wire.decode`, the server's names in `vla_client.server`."""
    old_home = importlib.import_module(module)
    with pytest.raises(AttributeError, match=f"has no attribute {name!r}"):
        getattr(old_home, name)
    assert name not in dir(old_home)


# One version: the package, its metadata source, the server and the changelog agree.


def test_pyproject_takes_the_version_from_the_package() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    assert "version" not in project["project"]
    assert project["project"]["dynamic"] == ["version"]
    attr = project["tool"]["setuptools"]["dynamic"]["version"]["attr"]
    module, name = attr.rsplit(".", 1)
    assert getattr(importlib.import_module(module), name) == vla_client.__version__


def test_the_installed_metadata_has_this_version() -> None:
    """What pip recorded at install time (``pip show vla-client``), where this tree is installed."""
    distribution = importlib.metadata.distribution("vla-client")
    origin = json.loads(distribution.read_text("direct_url.json") or "{}").get("url", "")
    from_here = origin.startswith("file:") and Path(urllib.parse.urlsplit(origin).path) == ROOT
    built_here = Path(str(distribution.locate_file(""))).resolve().is_relative_to(ROOT)
    if not (from_here or built_here):
        pytest.skip(f"the installed vla-client is not this tree's ({origin or 'no origin'})")
    assert distribution.version == vla_client.__version__, "reinstall: pip install -e ."


def test_the_changelog_leads_with_this_version() -> None:
    changelog = (ROOT / "docs" / "changelog.md").read_text(encoding="utf-8")
    versions = re.findall(r"^## (\d+\.\d+\.\d+)\b", changelog, flags=re.MULTILINE)
    assert versions[:1] == [vla_client.__version__]


def test_the_server_announces_the_package_version(server_url: str) -> None:
    info = httpx.get(f"{server_url}/openapi.json", timeout=10).json()["info"]
    assert info["version"] == vla_client.__version__
    metadata = httpx.get(f"{server_url}{METADATA_PATH}", timeout=10).json()
    assert metadata["server"] == {"name": "vla-client", "version": vla_client.__version__}
    assert re.fullmatch(r"\d+\.\d+\.\d+", vla_client.__version__)
