"""Real-time chunking in GR00T's terms: the executor's prefix, d and s as GR00T N1.7 takes them.

GR00T N1.7's action head (``Gr00tN1d7ActionHead.get_action_with_features`` in Isaac-GR00T's
``gr00t/model/gr00t_n1d7/gr00t_n1d7.py``, as read at commit 8cb8bd7) continues a previous
chunk when its input holds one (``action``, normalised by GR00T's processor from robot units)
and ``get_action``'s options say how:

- ``action_horizon``: how many rows of the previous chunk are meant (its length before padding);
- ``rtc_overlap_steps`` (K): the new chunk's rows ``0..K-1`` start from the previous chunk's
  last K meant rows instead of noise;
- ``rtc_frozen_steps`` (F <= K): of those, rows ``0..F-1`` are never updated (their flow
  velocity is multiplied by 0), so they come back equal to the previous chunk: "the latency of
  the policy inference", the paper's d;
- ``rtc_ramp_rate`` (r > 0): rows ``F..K-1`` are updated with a strength rising from 0 to 1 as
  ``1 - e^(-r t)`` (normalised, t evenly spaced in (0, 1)); rows from K on are planned afresh.

The previous chunk reaches the model the way Isaac-GR00T's pull request #520 sends it (open; its
``scripts/test_piper_client_RTC.py``): as ``observation["action"]``, one float32 ``(1, H, D)``
array per action key, meant rows first, zero-padded to the horizon. GR00T's ``Gr00tPolicy``
(``gr00t/policy/gr00t_policy.py``, as read at commit be889e7) passes neither that key nor the
options to the model, so a stock ``run_gr00t_server.py`` drops both without a word; it takes
them once its policy passes them on (as PR #520's policy layer and the deployments that call
``model.get_action(..., options=options)`` do).

`rtc_request` maps `vla_client.protocol.rtc.RTCRequest` onto that: the prefix (the rows of the
current chunk not yet executed, robot units) is the previous chunk, ``K = min(P, H - s)`` (at
least the frozen rows) and ``F = min(d, P)``, as Isaac-GR00T's pull request #320 (open, for
N1.5) sets them (``rtc_overlap_steps = action_horizon - execution_horizon``,
``rtc_frozen_steps`` = the inference latency in steps). GR00T announces none of this and says
nothing of what it applied, so RTC against it is the user's word: `declare_rtc`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np

from vla_client.protocol.families.gr00t import POLICY_FAMILY, Gr00tConfig
from vla_client.protocol.models import ActionMetadata
from vla_client.protocol.rtc import CAPABILITY, PARAMETER, RTCRequest

RTC_OPTIONS = ("action_horizon", "rtc_overlap_steps", "rtc_frozen_steps", "rtc_ramp_rate")
"""The ``get_action`` options GR00T N1.7 reads for real-time chunking."""
RAMP_RATE_OPTION = "rtc_ramp_rate"
RAMP_RATE = 5.0
"""The ramp rate sent unless the call gives ``rtc_ramp_rate`` itself."""
PREVIOUS_KEY = "action"
"""The observation key the previous chunk travels under, one array per action key."""
DECLARATION_HINT = (
    " (GR00T's server announces nothing: if its policy applies GR00T's rtc_* options, pass "
    "server=vla_client.protocol.declare_rtc(client.metadata()))"
)
"""What a refusal of mode ``rtc`` adds for a GR00T server: how the user declares it."""


def rtc_request(
    parameters: Any,
    config: Gr00tConfig,
    action_columns: Mapping[str, slice] | None,
    options: Mapping[str, Any],
) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
    """An ``rtc`` call option (`RTCRequest.parameters`'s object) as GR00T takes it: the
    previous chunk for ``observation["action"]`` and `options` with GR00T's ``rtc_*`` options.

    The prefix's columns are cut per action key by `action_columns` (the key -> columns of the
    server's last reply: GR00T's config names the action keys but not their sizes). A
    ``rtc_ramp_rate`` in `options` is kept (a finite number > 0); the other RTC options come
    from the request alone. `ValueError` for a request that does not fit the server, options
    that contradict it, or no reply yet to cut the prefix by.
    """
    rtc = RTCRequest.from_parameters(parameters)
    given = sorted(set(RTC_OPTIONS[:-1]) & set(options))
    if given:
        raise ValueError(f"give {PARAMETER}= or GR00T's own {given}, not both")
    ramp_rate = _ramp_rate(options)
    horizon = config.action_horizon
    if action_columns is None or list(action_columns) != list(config.action_keys):
        raise ValueError(
            "GR00T announces its action keys but not their sizes: real-time chunking cuts the "
            "prefix by the sizes of the server's last reply, so send one request without it first"
        )
    _check_fits(rtc, action_columns, horizon)
    prefix = rtc.prefix_actions
    frozen = min(rtc.inference_delay_steps, rtc.prefix_steps)
    overlap = max(frozen, min(rtc.prefix_steps, horizon - rtc.execution_horizon))
    previous = {}
    for key, columns in action_columns.items():
        part = np.zeros((1, horizon, columns.stop - columns.start), np.float32)
        part[0, : rtc.prefix_steps] = prefix[:, columns]
        previous[key] = part
    sent = {key: value for key, value in options.items() if key != RAMP_RATE_OPTION}
    sent.update(action_horizon=overlap, rtc_overlap_steps=overlap, rtc_frozen_steps=frozen,
                rtc_ramp_rate=float(ramp_rate))  # fmt: skip
    return previous, sent


def _ramp_rate(options: Mapping[str, Any]) -> float:
    """The ``rtc_ramp_rate`` `options` give (a finite number > 0), else `RAMP_RATE`."""
    ramp_rate = options.get(RAMP_RATE_OPTION, RAMP_RATE)
    if isinstance(ramp_rate, bool) or not isinstance(ramp_rate, int | float) or not (
        math.isfinite(ramp_rate) and ramp_rate > 0
    ):  # fmt: skip
        raise ValueError(f"{RAMP_RATE_OPTION} must be a finite number > 0, got {ramp_rate!r}")
    return ramp_rate


def _check_fits(rtc: RTCRequest, action_columns: Mapping[str, slice], horizon: int) -> None:
    """`ValueError` unless the prefix has the server's action width and at most its horizon
    of rows, and the execution horizon is within it."""
    width = sum(part.stop - part.start for part in action_columns.values())
    if rtc.prefix_actions.shape[1] != width or rtc.prefix_steps > horizon:
        raise ValueError(
            f"prefix_actions must be [P, {width}] with P in 1..{horizon} (the server's "
            f"actions), got {list(rtc.prefix_actions.shape)}"
        )
    if rtc.execution_horizon > horizon:
        raise ValueError(
            f"execution_horizon must be in 1..{horizon} (the server's action horizon), "
            f"got {rtc.execution_horizon}"
        )


def declare_rtc(metadata: ActionMetadata) -> ActionMetadata:
    """`metadata` (a GR00T server's, from ``client.metadata()``) announcing real-time chunking,
    on the user's word that the server applies GR00T's RTC options (see the module's text):
    pass it as ``ChunkExecutor(..., mode="rtc", server=declare_rtc(client.metadata()))``.

    GR00T announces nothing and echoes nothing, so the announcement says ``"echo": false`` and
    the executor checks no reply for an echo; against a server that drops the options the
    robot runs unguided chunks, played as in ``aligned`` mode. `ValueError` for another
    server's metadata (those announce RTC themselves).
    """
    if metadata.policy_family != POLICY_FAMILY:
        raise ValueError(
            f"declare_rtc is for GR00T's server, whose metadata says policy_family "
            f"{POLICY_FAMILY!r}; "
            f"got {metadata.policy_family!r} (other servers announce real-time chunking)"
        )
    declared = {
        "supported": True,
        "echo": False,
        "declared": "by the client: GR00T's server announces nothing",
        "options": list(RTC_OPTIONS),
        "previous_chunk": f"observation.{PREVIOUS_KEY}",
    }
    capabilities = {**metadata.capabilities, CAPABILITY: declared}
    return metadata.model_copy(update={"capabilities": capabilities})
