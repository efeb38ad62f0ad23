"""Resize camera frames to a policy's image size, on the robot.

Resizing before sending means fewer bytes on the wire and no guessing on the server. The resize
is never a stretch: `resize_with_pad` keeps the aspect ratio and pads with black, exactly like
openpi's `image_tools.resize_with_pad` (the geometry is copied expression for expression and the
resampling is PIL's bilinear filter, which antialiases when shrinking where OpenCV's does not), so
a policy trained on openpi-preprocessed frames sees the same pixels. `center_crop_resize` is the
alternative for policies trained on cropped frames. Depth frames are resized with ``nearest=True``:
each pixel is one of the camera's own measurements (a blend of a near edge and a far wall is a
distance nothing was at), and the padding is 0, the unknown depth.

PIL is imported by the first resize, not with this module: a client whose frames already have
the server's size never loads it. Fitting frames to what a server announced (`FramePreprocessor`,
`parse_image_size`, `check_camera_map`) is `vla_client.client.fit`'s work.
"""

from __future__ import annotations

import numpy as np


def resize_with_pad(
    image: np.ndarray, height: int, width: int, *, nearest: bool = False
) -> np.ndarray:
    """Scale `image` (HxWxC uint8) to fit `height` x `width`, keeping its aspect, on black;
    with `nearest`, a depth frame (HxW) by nearest neighbour, on zeros."""
    cur_height, cur_width = image.shape[:2]
    if (cur_height, cur_width) == (height, width):
        return image
    ratio = max(cur_width / width, cur_height / height)
    resized_height = max(1, int(cur_height / ratio))
    resized_width = max(1, int(cur_width / ratio))
    resized = _resample(image, resized_height, resized_width, nearest)
    padded = np.zeros((height, width, *image.shape[2:]), dtype=image.dtype)
    top = max(0, int((height - resized_height) / 2))
    left = max(0, int((width - resized_width) / 2))
    padded[top : top + resized_height, left : left + resized_width] = resized
    return padded


def center_crop_resize(
    image: np.ndarray, height: int, width: int, *, nearest: bool = False
) -> np.ndarray:
    """Crop the centre of `image` to the aspect of `height` x `width`, then scale it to fit
    (with `nearest`, by nearest neighbour: for depth frames)."""
    cur_height, cur_width = image.shape[:2]
    if (cur_height, cur_width) == (height, width):
        return image
    if cur_width * height > cur_height * width:
        crop_height, crop_width = cur_height, max(1, round(cur_height * width / height))
    else:
        crop_height, crop_width = max(1, round(cur_width * height / width)), cur_width
    top = (cur_height - crop_height) // 2
    left = (cur_width - crop_width) // 2
    cropped = image[top : top + crop_height, left : left + crop_width]
    return _resample(np.ascontiguousarray(cropped), height, width, nearest)


def _resample(image: np.ndarray, height: int, width: int, nearest: bool) -> np.ndarray:
    if nearest:
        return _nearest(image, height, width)
    return _bilinear(image, height, width)


def _nearest(image: np.ndarray, height: int, width: int) -> np.ndarray:
    """Each output pixel the input pixel under its centre: values copied, never blended."""
    rows = ((np.arange(height) + 0.5) * image.shape[0] / height).astype(np.intp)
    columns = ((np.arange(width) + 0.5) * image.shape[1] / width).astype(np.intp)
    return np.ascontiguousarray(image[rows[:, None], columns[None, :]])


def _bilinear(image: np.ndarray, height: int, width: int) -> np.ndarray:
    from PIL import Image  # deferred: see the module's docstring

    resized = Image.fromarray(image).resize((width, height), resample=Image.Resampling.BILINEAR)
    return np.asarray(resized).reshape(height, width, *image.shape[2:])
