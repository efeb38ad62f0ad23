"""Moved to `vla_client.server.recorder` in 0.2.0 (the recorder is a server part): these 0.1.0
imports still work, with a warning."""

from vla_client.validation import moved_module

_MOVED = ("DEFAULT_MAX_BYTES", "DEFAULT_MAX_FILES", "DEFAULT_QUEUE_SIZE", "ON_FULL")
__getattr__, __dir__ = moved_module(
    __name__, "vla_client.server.recorder", (*_MOVED, "RecorderStats", "RequestRecorder")
)
