"""Decode JPEG frames where a torch policy runs: on its CUDA device when a GPU decoder is
installed, else on the CPU with the entrypoint's own decoder.

A policy on a GPU can take JPEG frames undecoded (`Policy.decodes_jpeg`): the entrypoint then
hands it each frame's bytes, and `frame_decoder` turns a batch of them into HxWx3 uint8 tensors
on the device. Which decoder runs is its `path`:

- ``cuda``: nvJPEG, through torchvision's ``decode_jpeg(device="cuda")`` (one call for the
  whole batch) or else NVIDIA's nvImageCodec, whichever is installed (neither is a dependency;
  each is imported only here, only for a CUDA device);
- ``cpu``: `vla_client.codecs.decode_image_bytes` (OpenCV), the same pixels the entrypoint
  would have decoded, then moved to the device.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from vla_client.codecs import decode_image_bytes

DecodePath = Literal["cuda", "cpu"]


@dataclass(frozen=True)
class FrameDecoder:
    """Decodes a batch of JPEG files (1-D uint8 arrays) to HxWx3 uint8 tensors on `device`."""

    path: DecodePath
    device: Any
    decode: Callable[[list[np.ndarray]], list[Any]]

    def __call__(self, jpegs: list[np.ndarray]) -> list[Any]:
        return self.decode(jpegs)


def frame_decoder(device: Any) -> FrameDecoder:
    """The fastest decoder for `device` (a ``torch.device``): a GPU one on CUDA where one is
    installed, else the CPU one."""
    if device.type == "cuda":
        for make in (_torchvision, _nvimagecodec):
            decoder = make(device)
            if decoder is not None:
                return decoder
    return FrameDecoder("cpu", device, lambda jpegs: _cpu_decode(jpegs, device))


def _cpu_decode(jpegs: list[np.ndarray], device: Any) -> list[Any]:
    import torch

    return [torch.from_numpy(decode_image_bytes(jpeg.tobytes())).to(device) for jpeg in jpegs]


def _torchvision(device: Any) -> FrameDecoder | None:
    try:
        from torchvision.io import ImageReadMode, decode_jpeg
    except ImportError:
        return None

    def decode(jpegs: list[np.ndarray]) -> list[Any]:
        import torch

        files = [torch.from_numpy(np.array(jpeg)) for jpeg in jpegs]  # writable CPU copies
        images = decode_jpeg(files, mode=ImageReadMode.RGB, device=device)  # CHW each
        return [image.permute(1, 2, 0) for image in images]

    return FrameDecoder("cuda", device, decode)


def _nvimagecodec(device: Any) -> FrameDecoder | None:
    try:
        from nvidia import nvimgcodec
    except ImportError:
        return None
    decoder = nvimgcodec.Decoder(device_id=device.index or 0)

    def decode(jpegs: list[np.ndarray]) -> list[Any]:
        import torch

        images = decoder.decode([jpeg.tobytes() for jpeg in jpegs])  # HWC RGB on the device
        return [torch.as_tensor(image, device=device) for image in images]

    return FrameDecoder("cuda", device, decode)
