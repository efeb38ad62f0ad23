"""Moved to `vla_client.cameras.scene` in 0.2.0: these 0.1.0 imports still work, with a warning."""

from vla_client.validation import moved_module

__getattr__, __dir__ = moved_module(
    __name__,
    "vla_client.cameras.scene",
    ("DEFAULT_CAMERAS", "SyntheticScene", "camera_names", "synthetic_frames"),
)
