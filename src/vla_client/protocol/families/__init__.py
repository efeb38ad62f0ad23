"""The documents of the server families vla-client talks to but does not serve, one module each:
what their servers send and read, with no I/O (the client's session for each family, in
`vla_client.client`, drives the calls).

- `gr00t`: NVIDIA Isaac GR00T's policy server (ZeroMQ, its own msgpack, a nested observation);
- `gr00t_rtc`: real-time chunking against GR00T N1.7 (its previous chunk and options);
- `vllm_omni`: vLLM-Omni's robot endpoint (a websocket, a config frame, openpi's messages);
- `roboarena`: RoboArena's policy server (a websocket, its config and messages).

What both sides read (SGLang's action API, openpi's layouts, real-time chunking's fields) stays
in `vla_client.protocol`; `declare_rtc` and `flat_state`, which a robot's code calls, are also
offered there.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from vla_client.protocol.models import ActionMetadata


def rtc_declaration_hint(server: ActionMetadata) -> str:
    """What a refusal of mode ``rtc`` adds for `server`, which announces no real-time chunking:
    for a family whose servers never announce it though their policies may apply it (GR00T's),
    how the user declares it; nothing for the others."""
    from vla_client.protocol.families import gr00t, gr00t_rtc  # deferred: msgpack, when refused

    return gr00t_rtc.DECLARATION_HINT if server.policy_family == gr00t.POLICY_FAMILY else ""
