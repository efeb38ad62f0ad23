"""The server, the wire and the client's fit share one metadata type, and agree on it (issue 24).

The reference server builds its document as `ActionMetadata`, a client reads a document into
`ActionMetadata` (`read_metadata`), and `FramePreprocessor.from_metadata` takes it. So a field
of the model is in the server's document and in the client's reading, and a form one path
refuses every path refuses, with the same error.
"""

from __future__ import annotations

import socket
from collections.abc import Iterator
from typing import Any

import numpy as np
import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from raw_http_server import RawHTTPServer, RawRequest
from vla_client.client import ActionClient
from vla_client.client.fit import FramePreprocessor
from vla_client.control import SafetyGate
from vla_client.errors import ContractError, ProtocolError
from vla_client.observation import Observation
from vla_client.protocol import LAYOUTS, WIRES, ActionMetadata, dumps, loads, read_metadata
from vla_client.protocol.models import MetadataInput, MetadataOutput
from vla_client.server import (
    LocalServer,
    PolicySpec,
    ReferencePolicy,
    ServerConfig,
    create_app,
    metadata_document,
)
from vla_client.transports import NO_RETRY

NAMES = st.text("abcdefgh_0123", min_size=1, max_size=12)


@st.composite
def policy_specs(draw: st.DrawFn) -> PolicySpec:
    """Specs within the bounds a client reads: any cameras (up to 16), sizes, state, aliases."""
    cameras = draw(st.lists(NAMES, max_size=16, unique=True))
    aliases = draw(st.dictionaries(NAMES, st.sampled_from(cameras), max_size=4)) if cameras else {}
    side = st.integers(8, 4096)
    return PolicySpec(
        family=draw(NAMES),
        action_horizon=draw(st.integers(1, 256)),
        action_dim=draw(st.integers(1, 64)),
        camera_names=tuple(cameras),
        image_size=draw(st.none() | st.tuples(side, side)),
        state_dim=draw(st.none() | st.integers(0, 64)),
        num_inference_steps=draw(st.none() | st.integers(1, 50)),
        extra_capabilities=draw(st.dictionaries(NAMES, st.booleans(), max_size=2)),
        camera_aliases=aliases,
        image_size_required=draw(st.booleans()),
        depth_cameras=draw(
            st.dictionaries(
                NAMES.filter(lambda name: name not in cameras),
                st.sampled_from(["uint16", "float32"]),
                max_size=2,
            )
        ),
    )


def test_the_servers_document_has_every_field_of_the_model_and_no_other() -> None:
    """A field added to the model is in the server's document with nothing more to edit: the
    server dumps the model (a server field the model lacked would be a second definition).
    The one field left out when empty is ``input.depth_cameras``: a server without depth
    announces what it announced before depth existed."""
    document = metadata_document(PolicySpec("p", 4, 2, depth_cameras={"d": "uint16"}), model="m")
    assert set(document) == set(ActionMetadata.model_fields)
    assert set(document["input"]) == set(MetadataInput.model_fields)
    assert set(document["output"]) == set(MetadataOutput.model_fields)
    plain = metadata_document(PolicySpec("p", 4, 2), model="m")
    assert set(plain["input"]) == set(MetadataInput.model_fields) - {"depth_cameras"}


@settings(max_examples=60, deadline=None)
@given(
    spec=policy_specs(),
    websockets=st.booleans(),
    layout=st.sampled_from(sorted(LAYOUTS)),
    wire=st.sampled_from(WIRES),
)
def test_server_built_metadata_reads_back_as_itself_through_the_wire(
    spec: PolicySpec, websockets: bool, layout: str, wire: Any
) -> None:
    document = metadata_document(spec, model="m", websockets=websockets, openpi_layout=layout)
    received = loads(dumps(document, wire), wire)
    metadata = read_metadata(received)
    assert metadata.model_dump(mode="json") == document  # nothing lost, added or changed
    assert metadata == ActionMetadata.model_validate(document)
    fit = FramePreprocessor.from_metadata(metadata, fit="crop")
    assert fit == FramePreprocessor.from_metadata(received, fit="crop")  # the dict, read the same
    assert fit == FramePreprocessor(
        size=spec.image_size,
        fit="crop",
        server_keys=spec.camera_names,
        aliases=spec.camera_aliases,
        size_required=spec.image_size_required,
        state_dim=spec.state_dim,
        depth_cameras=spec.depth_cameras,
    )
    gate = SafetyGate.from_metadata(received)
    assert (gate.horizon, gate.action_dim) == (spec.action_horizon, spec.action_dim)


SPEC = {
    "camera_names": ("base_0_rgb", "wrist_0_rgb"),
    "camera_aliases": {"exterior": "base_0_rgb"},
    "image_size": (48, 64),
    "image_size_required": True,
    "state_dim": 6,
    "action_horizon": 8,
    "action_dim": 5,
}


@pytest.fixture(scope="module")
def reference() -> Iterator[LocalServer]:
    app = create_app(ReferencePolicy(**SPEC), ServerConfig(in_process=True))  # type: ignore[arg-type]
    with LocalServer(app) as server:
        yield server


@pytest.mark.parametrize("scheme", ["http", "ws"])
def test_a_client_reads_what_the_server_built_on_every_transport(
    reference: LocalServer, scheme: str
) -> None:
    policy = ReferencePolicy(**SPEC)  # type: ignore[arg-type]
    built = read_metadata(metadata_document(policy.spec, model="reference"))
    with ActionClient(f"{scheme}://127.0.0.1:{reference.port}") as client:
        read = client.metadata()
        checks = client.checks(read)
        client.infer(
            Observation(
                {
                    "exterior": np.zeros((48, 64, 3), np.uint8),
                    "wrist_0_rgb": np.zeros((48, 64, 3), np.uint8),
                },
                np.zeros(6),
            )
        )
    assert read == built
    assert checks["cameras"] == ["base_0_rgb", "wrist_0_rgb"]
    assert checks["camera_aliases"] == {"exterior": "base_0_rgb"}
    assert (checks["image_size"], checks["image_size_required"]) == ([48, 64], True)
    assert checks["state_dim"] == 6


class Served:
    """A raw HTTP server whose metadata reply is whatever document the test sets."""

    def __init__(self) -> None:
        self.document: Any = {}
        self.server = RawHTTPServer(self.answer)

    def answer(self, request: RawRequest, conn: socket.socket) -> None:
        body = orjson.dumps(self.document)
        head = f"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {len(body)}"
        conn.sendall(head.encode() + b"\r\n\r\n" + body)


@pytest.fixture(scope="module")
def served() -> Iterator[Served]:
    served = Served()
    with served.server:
        yield served


# SGLang's and openpi's forms: what each path must read, and read the same.
PI05_LIKE = {  # SGLang's Pi0.5 pipeline: keys, an [H, W] size, padded actions, runtime facts
    "object": "action.metadata",
    "model": "pi05",
    "model_path": "lerobot/pi05",
    "policy_family": "pi05",
    "input": {"image_keys": ["base_0_rgb", "left_wrist_0_rgb"], "image_size": [224, 224]},
    "output": {"action_horizon": 10, "action_dim": 7, "padded_action_dim": 32},
    "runtime": {"enable_autocast": True},
    "defaults": {"num_inference_steps": 10},
}
COSMOS3_LIKE = {  # SGLang's Cosmos3: no image keys or size, input keys of its own, no action dim
    "input": {"modalities": ["image", "video"], "supported_resolutions": [[480, 640]]},
    "output": {"action_horizon": 16, "action_dim": None, "padded_action_dim": 32},
}
FLUX_LIKE = {  # SGLang's FLUX 3 Action: aliases for its cameras, a layout name of its own
    "input": {
        "image_keys": ["wrist", "left", "right"],
        "camera_aliases": {"observation.images.wrist": "wrist"},
        "camera_layout": "droid",
    },
}
ACCEPTED = [
    ({"input": {"image_size": 224}}, [224, 224], ()),
    ({"input": {"image_size": [240, 320, 3]}}, [240, 320], ()),
    ({"input": {"image_size": [3, 240, 320]}}, [240, 320], ()),
    ({"input": {"image_size": {"height": 96, "width": 128}}}, [96, 128], ()),
    ({"input": {"image_keys": None, "camera_aliases": None, "image_size": None}}, None, ()),
    ({"input": None, "output": None}, None, ()),
    (PI05_LIKE, [224, 224], ("base_0_rgb", "left_wrist_0_rgb")),
    (COSMOS3_LIKE, None, ()),
    (FLUX_LIKE, None, ("wrist", "left", "right")),
    ({"reset_pose": [0.0] * 7}, None, ()),  # an openpi server's own metadata: nothing announced
]


@pytest.mark.parametrize(("document", "size", "keys"), ACCEPTED)
def test_every_path_reads_the_servers_forms_alike(
    served: Served, document: dict[str, Any], size: list[int] | None, keys: tuple[str, ...]
) -> None:
    served.document = document
    metadata = read_metadata(document)
    assert metadata.input.image_size == size
    extra = {k: v for k, v in document.items() if k not in ActionMetadata.model_fields}
    assert metadata.model_extra == extra  # kept, as SGLang's own keys are
    own_input = {k for k in document.get("input") or {} if k not in MetadataInput.model_fields}
    assert set(metadata.input.model_extra or {}) == own_input
    fit = FramePreprocessor.from_metadata(document)
    assert fit.size == (None if size is None else tuple(size))
    assert fit.server_keys == keys
    assert fit == FramePreprocessor.from_metadata(metadata)
    with ActionClient(served.server.url, retry=NO_RETRY) as client:
        assert client.metadata() == metadata
        checks = client.checks(document)
        assert (checks["image_size"], checks["cameras"]) == (size, list(keys) or "any")


# Each refused form, with the one message every path gives for it.
REFUSED = [
    ({"input": [1]}, "metadata 'input' must be an object, got list"),
    ({"output": "odd"}, "metadata 'output' must be an object, got str"),
    (
        {"input": {"image_keys": "ab"}},
        "metadata input.image_keys must be a list of names, got 'ab'",
    ),
    (
        {"input": {"camera_aliases": {"cam0": 1}}},
        "metadata input.camera_aliases must map names to names, got {'cam0': 1}",
    ),
    ({"input": {"state_dim": "8"}}, "metadata input.state_dim must be a whole number, got '8'"),
    ({"input": {"state_dim": -1}}, "metadata input.state_dim is -1, outside 0..65536"),
    ({"input": {"image_size": [224]}}, "metadata image_size [224] is not a height and width"),
    ({"input": {"image_size": "224"}}, "metadata image_size '224' must be positive whole numbers"),
    (
        {"input": {"image_size": [60000, 60000]}},
        "metadata image_size [60000, 60000] is over the limit of 16777216 pixels",
    ),
    ({"output": {"action_dim": 0}}, "metadata output.action_dim is 0, outside 1..65536"),
    # SafetyGate read this dict itself before, and took true for an action dim of 1
    (
        {"output": {"action_dim": True}},
        "metadata output.action_dim must be a whole number, got True",
    ),
    (
        {"output": {"action_horizon": 4096, "action_dim": 4096}},
        "metadata announces 4096 x 4096 action chunks, over the limit of 1048576 values",
    ),
    (
        {"model": 3},
        "the server's metadata is malformed: metadata.model: Input should be a valid string",
    ),
]


def refusal(call: Any) -> str:
    with pytest.raises(ProtocolError) as caught:
        call()
    return str(caught.value)


@pytest.mark.parametrize(("document", "message"), REFUSED)
def test_every_path_refuses_a_bad_document_the_same_way(
    served: Served, document: dict[str, Any], message: str
) -> None:
    served.document = document
    frame = Observation({"a": np.zeros((16, 16, 3), np.uint8)})
    with ActionClient(served.server.url, retry=NO_RETRY) as client:
        paths = {
            "read_metadata": lambda: read_metadata(document),
            "FramePreprocessor.from_metadata": lambda: FramePreprocessor.from_metadata(document),
            "SafetyGate.from_metadata": lambda: SafetyGate.from_metadata(document),
            "ActionClient.metadata": client.metadata,
            "ActionClient.infer": lambda: client.infer(frame),
            "ActionClient.checks": lambda: client.checks(document),
        }
        messages = {path: refusal(call) for path, call in paths.items()}
    assert messages == dict.fromkeys(paths, message)
    if message.startswith("the server's metadata is malformed"):
        with pytest.raises(ValidationError):  # pydantic's own check, for a model built in code
            ActionMetadata.model_validate(document)
    else:
        assert refusal(lambda: ActionMetadata.model_validate(document)) == message


def test_the_server_refuses_to_announce_what_a_client_would_refuse() -> None:
    for spec, message in [
        (PolicySpec("p", 4, 2, state_dim=-1), "metadata input.state_dim is -1, outside 0..65536"),
        (PolicySpec("p", 4096, 4096), "over the limit of 1048576 values"),
        (PolicySpec("p", 4, 2, image_size=(8192, 8192)), "over the limit of 16777216 pixels"),
        (PolicySpec("p", 4, 2, camera_names=tuple("abcdefghijklmnopq")), "17 cameras, over"),
    ]:
        with pytest.raises(ProtocolError, match=message):
            metadata_document(spec, model="m")


def test_a_size_under_the_fits_least_side_is_the_fits_contract_error_on_every_path() -> None:
    document = {"input": {"image_size": [7, 64]}}
    assert read_metadata(document).input.image_size == [7, 64]  # the protocol allows it
    for metadata in (document, read_metadata(document)):
        with pytest.raises(ContractError, match=">= 8 pixels a side"):
            FramePreprocessor.from_metadata(metadata)
