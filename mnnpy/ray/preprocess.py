"""Per-row preprocessing for image files and arrays, picklable so Ray can ship it to workers."""

from __future__ import annotations

import io
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = ["ImagePreprocess", "image_layout"]

_NPY_MAGIC = b"\x93NUMPY"
_MODES = {1: "L", 3: "RGB", 4: "RGBA"}


def image_layout(shape: Sequence[int], layout: str = "auto") -> tuple[bool, int, tuple[int, int]]:
    """(channels first, channels, (height, width)) of a 4-D image input of shape ``shape``.

    ``layout`` is ``"nchw"``, ``"nhwc"`` or ``"auto"``: NCHW when axis 1 has 1, 3 or 4 channels,
    else NHWC when the last axis has (a converted TensorFlow model keeps NHWC data).
    """
    if len(shape) != 4:
        raise ValueError(f"an image input is 4-D (N, C, H, W or N, H, W, C), got {tuple(shape)!r}")
    layout = layout.lower()
    if layout == "auto":
        layout = "nchw" if shape[1] in _MODES or shape[3] not in _MODES else "nhwc"
    if layout == "nchw":
        return True, int(shape[1]), (int(shape[2]), int(shape[3]))
    if layout == "nhwc":
        return False, int(shape[3]), (int(shape[1]), int(shape[2]))
    raise ValueError(f"layout must be nchw, nhwc or auto, got {layout!r}")


@dataclass(frozen=True)
class ImagePreprocess:
    """Turns one row into a model input row: ``(pixel - mean) * norm`` as float32.

    A row may be encoded image bytes (PNG, JPEG... decoded with Pillow, converted to ``channels``
    and resized to ``size``), ``.npy`` bytes (loaded and returned unchanged: the array is the
    input row), or an array as ``ray.data.read_images`` gives (HWC or HW, used at its size).
    ``mean`` and ``norm`` follow MNN's ``ImageProcess`` (one value per channel).

    Attributes:
        size: (height, width) to resize decoded images to; None keeps their size.
        channels: 1, 3 or 4.
        channels_first: return CHW (for NCHW inputs) instead of HWC.
        mean: subtracted per channel.
        norm: multiplied per channel after the mean is subtracted.
    """

    size: tuple[int, int] | None = None
    channels: int = 3
    channels_first: bool = True
    mean: tuple[float, ...] = (0.0,)
    norm: tuple[float, ...] = (1.0,)

    def __call__(self, value: Any) -> np.ndarray:
        """One row's input array, from image bytes, ``.npy`` bytes or an array (see above)."""
        if isinstance(value, (bytes, bytearray, memoryview)):
            data = bytes(value)
            if data.startswith(_NPY_MAGIC):
                return np.load(io.BytesIO(data), allow_pickle=False)
            pixels = self._decode(data)
        else:
            pixels = np.asarray(value)
        if pixels.ndim == 2:
            pixels = pixels[:, :, None]
        if pixels.ndim != 3 or pixels.shape[2] != self.channels:
            raise ValueError(f"expected an HxWx{self.channels} image, got {pixels.shape!r}")
        mean = np.asarray(self.mean, np.float32)
        norm = np.asarray(self.norm, np.float32)
        out = (pixels.astype(np.float32) - mean) * norm
        return np.ascontiguousarray(out.transpose(2, 0, 1)) if self.channels_first else out

    def _decode(self, data: bytes) -> np.ndarray:
        try:
            from PIL import Image
        except ImportError as e:
            raise ImportError("decoding images needs Pillow: pip install pillow") from e
        with Image.open(io.BytesIO(data)) as file:
            image = file.convert(_MODES[self.channels])
        if self.size is not None and image.size != (self.size[1], self.size[0]):
            image = image.resize((self.size[1], self.size[0]), Image.Resampling.BILINEAR)
        return np.asarray(image)
