"""The public API changes only on purpose: its snapshot, the 0.1.0 keyword names, one version.

The snapshot (`tests/api_snapshot.json`) holds ``__all__`` and the signatures of what the public
package faces export. When a change to the API is meant, record it in the same commit with
``python tools/api_snapshot.py --write``.
"""

from __future__ import annotations

import asyncio
import importlib.metadata
import importlib.util
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
from vla_client import ActionClient, AsyncActionClient, Observation
from vla_client.client.base import ClientBase
from vla_client.protocol import METADATA_PATH
from vla_client.transports import (
    AsyncHTTPTransport,
    AsyncWebSocketTransport,
    HTTPTransport,
    WebSocketTransport,
)

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


# The 0.1.0 keyword names, renamed since: each keeps working with a warning naming the new one.
CLIENT_RENAMES = {
    "timeout": ("timeout_s", 4.0),
    "deadline": ("deadline_s", 3.0),
    "max_observation_age": ("max_observation_age_s", 0.5),
}


def _client_settings(client: ClientBase[Any, Any]) -> tuple[object, object]:
    """The options and the per-read timeout, which the client hands its HTTP transport."""
    return client.options, client._transport._client.timeout


@pytest.mark.parametrize("old", sorted(CLIENT_RENAMES))
def test_a_0_1_0_client_keyword_warns_and_means_the_new_one(old: str) -> None:
    new, value = CLIENT_RENAMES[old]
    url = "http://127.0.0.1:9"
    with pytest.warns(DeprecationWarning, match=rf"ActionClient\(\): {old}= .* use {new}=") as seen:
        old_client = ActionClient(url, **{old: value})
    assert seen[0].filename == __file__  # the warning points at the caller's line
    with ActionClient(url, **{new: value}) as new_client, old_client:
        assert _client_settings(old_client) == _client_settings(new_client)
        assert _client_settings(old_client) != _client_settings(ActionClient(url))


def test_the_async_client_takes_the_0_1_0_keywords_too() -> None:
    url = "http://127.0.0.1:9"
    old_names = {old: value for old, (_, value) in CLIENT_RENAMES.items()}
    new_names = {new: value for new, value in CLIENT_RENAMES.values()}
    with pytest.warns(DeprecationWarning) as seen:
        old_client = AsyncActionClient(url, **old_names)
    assert {str(w.message).split("=")[0] for w in seen} == {
        f"AsyncActionClient(): {old}" for old in CLIENT_RENAMES
    }
    new_client = AsyncActionClient(url, **new_names)
    assert _client_settings(old_client) == _client_settings(new_client)
    asyncio.run(old_client.close())
    asyncio.run(new_client.close())


def test_a_request_made_with_the_0_1_0_keywords_gets_its_actions(
    server_url: str, observation: Observation
) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        client = ActionClient(server_url, timeout=10.0, deadline=10.0, max_observation_age=60.0)
    with client:
        assert client.infer(observation).actions.shape == (10, 7)


@pytest.mark.parametrize("old", sorted(CLIENT_RENAMES))
def test_giving_a_keyword_by_both_names_is_refused(old: str) -> None:
    new, value = CLIENT_RENAMES[old]
    with pytest.raises(TypeError, match=rf"{old}= is the deprecated name of {new}="):
        ActionClient("http://127.0.0.1:9", **{old: value, new: value})


@pytest.mark.parametrize("transport_type", [HTTPTransport, AsyncHTTPTransport])
def test_http_transports_take_timeout_as_timeout_s(transport_type: type) -> None:
    with pytest.warns(
        DeprecationWarning, match=r"timeout= is deprecated since 0.2.0; use timeout_s="
    ):
        transport = transport_type("http://127.0.0.1:9", timeout=2.5)
    assert transport._client.timeout == httpx.Timeout(2.5)
    with pytest.raises(TypeError, match="deprecated name of timeout_s="):
        transport_type("http://127.0.0.1:9", timeout=2.5, timeout_s=2.5)


@pytest.mark.parametrize("transport_type", [WebSocketTransport, AsyncWebSocketTransport])
def test_websocket_transports_take_their_0_1_0_timeouts(transport_type: type) -> None:
    with pytest.warns(DeprecationWarning) as seen:
        transport = transport_type("ws://127.0.0.1:9", timeout=2.5, connect_timeout=1.5)
    assert (transport.timeout_s, transport.connect_timeout_s) == (2.5, 1.5)
    assert sorted(str(w.message) for w in seen) == [
        f"{transport_type.__name__}(): connect_timeout= is deprecated since 0.2.0; "
        "use connect_timeout_s=",
        f"{transport_type.__name__}(): timeout= is deprecated since 0.2.0; use timeout_s=",
    ]


@pytest.mark.parametrize("transport_type", [WebSocketTransport, AsyncWebSocketTransport])
def test_websocket_transports_take_max_size_as_max_reply_bytes(transport_type: type) -> None:
    with pytest.warns(
        DeprecationWarning, match=r"max_size= is deprecated since 0.2.0; use max_reply_bytes="
    ):
        transport = transport_type("ws://127.0.0.1:9", max_size=4096)
    assert transport.max_reply_bytes == 4096
    with pytest.raises(TypeError, match="deprecated name of max_reply_bytes="):
        transport_type("ws://127.0.0.1:9", max_size=4096, max_reply_bytes=4096)


def test_the_new_names_alone_warn_of_nothing() -> None:
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        client = ActionClient("http://127.0.0.1:9", timeout_s=1.0, deadline_s=1.0)
        client.close()
    assert [str(w.message) for w in seen] == []
    assert client.options.deadline_s == 1.0


MOVED = [
    ("vla_client.scene", "vla_client.cameras.scene", "synthetic_frames"),
    ("vla_client.scene", "vla_client.cameras.scene", "SyntheticScene"),
    ("vla_client.scene", "vla_client.cameras.scene", "camera_names"),
    ("vla_client.scene", "vla_client.cameras.scene", "DEFAULT_CAMERAS"),
    ("vla_client.preprocess", "vla_client.client.fit", "FramePreprocessor"),
    ("vla_client.preprocess", "vla_client.cameras.preprocess", "resize_with_pad"),
    ("vla_client.preprocess", "vla_client.cameras.preprocess", "center_crop_resize"),
    ("vla_client.preprocess", "vla_client.client.fit", "parse_image_size"),
    # 0.2.0 moved the fit to the server's metadata from the cameras to the client
    ("vla_client.cameras.preprocess", "vla_client.client.fit", "FramePreprocessor"),
    ("vla_client.cameras.preprocess", "vla_client.client.fit", "parse_image_size"),
    ("vla_client.cameras.preprocess", "vla_client.client.fit", "check_camera_map"),
    ("vla_client.cameras.preprocess", "vla_client.client.fit", "MIN_SIDE"),
    ("vla_client.cameras.preprocess", "vla_client.client.fit", "FITS"),
    # 0.2.0 moved the server's image decoding out of the forms the robot writes
    ("vla_client.protocol.image_forms", "vla_client.protocol.decode", "decode_image_value"),
    # 0.2.0 split the replies into the server's builders and the client's readers
    ("vla_client.protocol.response", "vla_client.protocol.reply_build", "build_envelope"),
    ("vla_client.protocol.response", "vla_client.protocol.reply_build", "new_request_id"),
    ("vla_client.protocol.response", "vla_client.protocol.reply_read", "read_reply"),
    ("vla_client.protocol.response", "vla_client.protocol.reply_read", "Reply"),
    ("vla_client.protocol.response", "vla_client.protocol.reply_read", "reply_size_limit"),
]


@pytest.mark.parametrize(("old", "new", "name"), MOVED)
def test_a_0_1_0_module_still_gives_its_names(old: str, new: str, name: str) -> None:
    """The docs of 0.1.0 imported ``from vla_client.scene import synthetic_frames``."""
    module = importlib.import_module(old)
    with pytest.warns(
        DeprecationWarning, match=rf"{old} is deprecated .*: import {name} from {new}"
    ):
        value = getattr(module, name)
    assert value is getattr(importlib.import_module(new), name)
    assert name in dir(module)
    with pytest.raises(AttributeError):
        module.no_such_name  # noqa: B018


@pytest.mark.parametrize(
    ("name", "home"),
    [
        ("encode_jpeg", "vla_client.codecs.image_encode"),
        ("encode_png", "vla_client.codecs.image_encode"),
        ("DEFAULT_JPEG_QUALITY", "vla_client.codecs.image_encode"),
        ("decode_image_bytes", "vla_client.codecs.image_decode"),
        ("DEFAULT_MAX_PIXELS", "vla_client.codecs.image_decode"),
        ("map_frames", "vla_client.codecs.parallel"),
    ],
)
def test_the_split_image_codecs_keep_their_0_1_0_module(name: str, home: str) -> None:
    """Codecs are shared: ``vla_client.codecs.images`` still gives each name, as it is."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        old = getattr(importlib.import_module("vla_client.codecs.images"), name)
    assert old is getattr(importlib.import_module(home), name)


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


def test_the_fit_takes_its_0_1_0_names_keyword() -> None:
    """0.1.0's ``vla_client.preprocess.FramePreprocessor(names=...)`` is ``camera_map=`` now."""
    from vla_client.client.fit import FramePreprocessor

    with pytest.warns(DeprecationWarning, match=r"FramePreprocessor\(\): names= .* camera_map="):
        built = FramePreprocessor(names={"front": "base_0_rgb"})
    with pytest.warns(DeprecationWarning, match=r"from_metadata\(\): names= .* camera_map="):
        read = FramePreprocessor.from_metadata({}, names={"front": "base_0_rgb"})
    assert built.camera_map == read.camera_map == {"front": "base_0_rgb"}
    with pytest.raises(TypeError, match="deprecated name of camera_map="):
        FramePreprocessor(names={}, camera_map={})
