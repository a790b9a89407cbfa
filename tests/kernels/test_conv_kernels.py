"""The conv kernels directly: buffer checks, padding lanes, thread independence."""

from __future__ import annotations

import numpy as np
import pytest

from mnnpy import layout
from mnnpy.backend.cpu.executions.convolution import CPUConvolution, CPUConvolutionDepthwise
from mnnpy.backend.cpu.kernels import conv as K

FLT_MAX = float(np.finfo(np.float32).max)


def packed(x: np.ndarray, garbage: float = np.nan) -> np.ndarray:
    """NC4HW4 storage of ``x`` whose padding lanes hold ``garbage``."""
    n, c, h, w = x.shape
    buf = layout.pack_nc4hw4(x)
    view = buf.reshape(n, layout.c4(c), h * w, 4)
    if c % 4:
        view[:, -1, :, c % 4 :] = garbage
    return buf


def direct(
    x: np.ndarray,
    weight: np.ndarray,
    bias: np.ndarray,
    window: tuple[int, ...],
    depthwise: bool = False,
    threads: int = 1,
) -> np.ndarray:
    n, c, h, w = x.shape
    oc, ky, kx = weight.shape[0], weight.shape[2], weight.shape[3]
    sy, sx, dy, dx, top, left = window
    oh = (h + 2 * top - dy * (ky - 1) - 1) // sy + 1
    ow = (w + 2 * left - dx * (kx - 1) - 1) // sx + 1
    dst = np.full(n * layout.c4(oc) * 4 * oh * ow, 7, np.float32)
    cls = CPUConvolutionDepthwise if depthwise else CPUConvolution
    kernel = K.conv2d_depthwise if depthwise else K.conv2d
    b = np.zeros(layout.c4(oc) * 4, np.float32)
    b[:oc] = bias
    kernel(
        packed(x),
        dst,
        cls.pack_weight(weight),
        b,
        (n, c, h, w, oc, oh, ow),
        (ky, kx, *window),
        -FLT_MAX,
        FLT_MAX,
        threads,
    )
    return dst


@pytest.mark.parametrize("depthwise", [False, True])
def test_padding_lanes_ignored_and_zeroed(depthwise: bool) -> None:
    rng = np.random.default_rng(0)
    x = rng.standard_normal((2, 5, 6, 7)).astype(np.float32)
    weight = rng.standard_normal((5, 1 if depthwise else 5, 3, 3)).astype(np.float32)
    dst = direct(x, weight, np.ones(5, np.float32), (1, 1, 1, 1, 1, 1), depthwise)
    lanes = dst.reshape(2, 2, -1, 4)
    assert not np.isnan(dst).any()
    assert np.all(lanes[:, -1, :, 1:] == 0)


@pytest.mark.parametrize("depthwise", [False, True])
def test_threads_identical(depthwise: bool) -> None:
    rng = np.random.default_rng(1)
    x = rng.standard_normal((2, 9, 13, 11)).astype(np.float32)
    weight = rng.standard_normal((9, 1 if depthwise else 9, 3, 3)).astype(np.float32)
    bias = rng.standard_normal(9).astype(np.float32)
    runs = [direct(x, weight, bias, (2, 1, 1, 2, 1, 2), depthwise, t) for t in (1, 2, 3)]
    assert np.array_equal(runs[0], runs[1]) and np.array_equal(runs[0], runs[2])


def test_buffer_and_window_checks() -> None:
    src, dst = np.zeros(4 * 25, np.float32), np.zeros(4 * 9, np.float32)
    weight, bias = np.zeros(16 * 9, np.float32), np.zeros(4, np.float32)
    shape, window = (1, 3, 5, 5, 2, 3, 3), (3, 3, 1, 1, 1, 1, 0, 0)
    K.conv2d(src, dst, weight, bias, shape, window, 0.0, 6.0)
    with pytest.raises(ValueError, match="too small"):
        K.conv2d(src, dst, weight[:-1], bias, shape, window, 0.0, 6.0)
    with pytest.raises(ValueError, match="too small"):
        K.conv2d(src[:-1], dst, weight, bias, shape, window, 0.0, 6.0)
    with pytest.raises(ValueError, match="positive"):
        K.conv2d(src, dst, weight, bias, shape, (3, 3, 1, 0, 1, 1, 0, 0), 0.0, 6.0)
    with pytest.raises(ValueError, match="ic == oc"):
        K.conv2d_depthwise(src, dst, weight, bias, shape, window, 0.0, 6.0)
