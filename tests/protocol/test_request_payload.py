"""`request_payload`, every request's document, is `build_request(...).to_payload()` without the
models: the same document key for key (the same bytes on each wire) and the same refusals."""

import numpy as np
import pytest
from pydantic import ValidationError

from vla_client import Observation
from vla_client.errors import CodecError
from vla_client.protocol import ENCODINGS, WIRES
from vla_client.protocol.request import build_request, request_payload, runtime_document
from vla_client.protocol.wire import dumps

RUNTIMES = [
    None,
    {},
    {"return_timing": True},
    {"return_timing": False, "response_format": "RAW", "return_digest": True},
    {"output_format": "numpy", "cache": {"ttl": 3}},  # a value that is not plain: not remembered
    {"x": 1},
    {"x": True},
    {"x": 1.0},
    {"x": float("nan")},
]
PARAMETERS = [None, {}, {"action_horizon": 5, "rtc": {"prefix": [[0.0]]}}]


def observations(frames):
    depth = {"depth": np.full((24, 32), 900, np.uint16)}
    yield Observation(frames)
    yield Observation(frames, state=[0.5, -1, 2], task="pick", capture_times={"wrist": 3.25})
    yield Observation(frames, state=np.arange(7.0), depth=depth, capture_times={"depth": 1.0})


@pytest.fixture
def frames():
    rng = np.random.default_rng(0)
    return {
        "wrist": rng.integers(0, 256, (24, 32, 3), dtype=np.uint8),
        "top": rng.integers(0, 256, (24, 32, 3), dtype=np.uint8),
    }


@pytest.mark.parametrize("encoding", ["raw", "png"])
@pytest.mark.parametrize("wire", WIRES)
def test_the_document_is_the_models_one_byte_for_byte(frames, encoding, wire):
    for observation in observations(frames):
        for runtime in RUNTIMES:
            for parameters in PARAMETERS:
                for request_id in (None, "act_1"):
                    options = dict(
                        encoding=encoding, wire=wire, request_id=request_id,
                        parameters=parameters, runtime=runtime,
                    )  # fmt: skip
                    expected = build_request(observation, **options).to_payload()
                    for _ in range(2):  # the second time, a remembered runtime block
                        got = request_payload(observation, **options)
                        assert dumps(got, wire) == dumps(expected, wire), options


@pytest.mark.parametrize("encoding", ENCODINGS)
def test_every_encoding_gives_the_models_document(frames, encoding):
    observation = Observation(frames, state=[1.0, 2.0])
    expected = build_request(observation, encoding=encoding, wire="msgpack").to_payload()
    got = request_payload(observation, encoding=encoding, wire="msgpack")
    assert dumps(got, "msgpack") == dumps(expected, "msgpack")


@pytest.mark.parametrize(
    ("options", "error"),
    [
        ({"runtime": {"response_format": "nope"}}, CodecError),
        ({"runtime": {"return_timing": "sometimes"}}, CodecError),
        ({"request_id": 5}, CodecError),
        ({"parameters": {1: 2}}, ValidationError),
    ],
)
def test_it_refuses_what_the_models_refuse(frames, options, error):
    observation = Observation(frames)
    for build in (
        lambda: build_request(observation, **options),
        lambda: request_payload(observation, **options),
        lambda: request_payload(observation, **options),  # a refusal is not remembered
    ):
        with pytest.raises(error):
            build()


def test_a_remembered_runtime_block_keeps_one_and_true_apart_and_is_not_shared():
    assert runtime_document({"x": 1}) == {"x": 1}
    block = runtime_document({"x": True})
    assert block == {"x": True} and type(block["x"]) is bool
    block["x"] = "changed"
    assert runtime_document({"x": True}) == {"x": True}
    assert runtime_document({"return_timing": True}) == {}  # its default, left out
