"""Moved in 0.2.0: the resizes to `vla_client.cameras.preprocess`, the fit to the server's
metadata to `vla_client.client.fit`. These 0.1.0 imports still work, with a warning."""

from vla_client.validation import moved_names

__getattr__, __dir__ = moved_names(
    __name__,
    {
        "FramePreprocessor": "vla_client.client.fit",
        "parse_image_size": "vla_client.client.fit",
        "center_crop_resize": "vla_client.cameras.preprocess",
        "resize_with_pad": "vla_client.cameras.preprocess",
    },
)
