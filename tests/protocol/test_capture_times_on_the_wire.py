"""Non-finite capture times are refused by a real server reading them, on every wire (and by
`Observation` where it is built: tests/test_observation.py).

Before, a NaN time was refused over JSON (which has no NaN) but taken over msgpack, and
`Observation(capture_times={"a": nan, "b": <10 s old>})` passed `max_observation_age_s=0.1`:
the age check used `min()`, whose answer with a NaN depends on the order.
"""

from __future__ import annotations

import json
import math

import httpx
import pytest
from pydantic import ValidationError

from vla_client import Observation, encode_request
from vla_client.codecs import msgpack_numpy
from vla_client.protocol.models import ObservationPayload
from vla_client.protocol.wire import NOT_FINITE

GENERATIONS = "/v1/actions/generations"


PLACEHOLDER = 12345.5
"""A capture time put in the request, then replaced by the bad value."""


def body_with_time(observation: Observation, wire: str, value: float | str) -> bytes:
    """A request for `observation` whose first camera's capture time is `value`: a number, or
    (JSON only) the text of one, as a client that writes NaN or a 400-digit integer sends it."""
    name = next(iter(observation.images))
    body, _ = encode_request(observation, encoding="raw", wire=wire)
    if wire == "json":
        document = json.loads(body)
        document["input"]["observation"]["capture_times"] = {name: PLACEHOLDER}
        text = json.dumps(document)
        return text.replace(str(PLACEHOLDER), str(value)).encode()
    document = msgpack_numpy.unpackb(body)
    document["input"]["observation"]["capture_times"] = {name: value}
    return msgpack_numpy.packb(document)


@pytest.mark.parametrize(
    ("wire", "value", "detail"),
    [
        ("msgpack", math.nan, "capture_times must be finite seconds (no NaN or infinity)"),
        ("msgpack", math.inf, "capture_times must be finite seconds (no NaN or infinity)"),
        ("json", "NaN", f"input.observation.capture_times.{{camera}}: {NOT_FINITE}"),
        ("json", "-Infinity", f"input.observation.capture_times.{{camera}}: {NOT_FINITE}"),
        ("json", "1" + "0" * 400, f"input.observation.capture_times.{{camera}}: {NOT_FINITE}"),
        ("json", "1e999", f"input.observation.capture_times.{{camera}}: {NOT_FINITE}"),
    ],
    ids=["msgpack-nan", "msgpack-inf", "json-nan", "json-inf", "json-huge", "json-1e999"],
)
def test_the_server_refuses_non_finite_capture_times_on_both_wires(
    server_url, observation, wire, value, detail
) -> None:
    """Refused with a 400 naming the field, and the server goes on serving."""
    headers = {"content-type": f"application/{wire}", "accept": "application/json"}
    with httpx.Client(base_url=server_url, timeout=10) as http:
        good = http.post(
            GENERATIONS, content=body_with_time(observation, wire, 1.5), headers=headers
        )
        refused = http.post(
            GENERATIONS, content=body_with_time(observation, wire, value), headers=headers
        )
        after = http.post(
            GENERATIONS, content=body_with_time(observation, wire, 1.5), headers=headers
        )
    assert good.status_code == after.status_code == 200
    assert refused.status_code == 400
    assert detail.format(camera=next(iter(observation.images))) in refused.json()["detail"]


@pytest.mark.parametrize("value", [math.nan, math.inf, -math.inf])
def test_the_request_model_refuses_non_finite_capture_times(value: float) -> None:
    with pytest.raises(ValidationError, match=r"capture_times\.wrist"):
        ObservationPayload(capture_times={"wrist": value})
    assert ObservationPayload(capture_times={"wrist": 1.5}).capture_times == {"wrist": 1.5}
