"""GridSample: CPU execution vs the reference, reference vs a scalar loop of MNN's rules."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest

from mnnpy._schema.MNN.GridSample import GridSampleT
from mnnpy._schema.MNN.Net import NetT
from mnnpy.errors import ErrorCode, MNNError
from mnnpy.interpreter import ScheduleConfig
from mnnpy.net import OpDef, OpParameter, OpType, pack_net
from mnnpy.ops import reference_of
from mnnpy.tensor_format import DimensionFormat
from tests.helpers import _op, input_op, run_net

BILINEAR, NEAREST = 0, 1
ZEROS, CLAMP, REFLECTION = 0, 1, 2


def param(mode: int, padding: int, align: bool) -> GridSampleT:
    p = GridSampleT()
    p.mode, p.paddingMode, p.alignCorners = mode, padding, align
    return p


def reference(p: GridSampleT, x: np.ndarray, grid: np.ndarray) -> np.ndarray:
    fmt = DimensionFormat.NCHW
    op = OpDef(0, OpType.GridSample, "op", (0, 1), (2,), p, OpParameter.GridSample, fmt)
    return reference_of(OpType.GridSample)(op, [x, grid])[0]


def run(p: GridSampleT, x: np.ndarray, grid: np.ndarray, fmt: Any, threads: int) -> np.ndarray:
    """Input 0 in ``fmt``, the grid plain NCHW, as MNN's converter writes them."""
    net = NetT()
    net.tensorName = ["in0", "in1", "out0"]
    op = _op(OpType.GridSample, "op", [0, 1], [2], p, OpParameter.GridSample)
    net.oplists = [
        input_op("in0", 0, x.shape, np.float32, fmt),
        input_op("in1", 1, grid.shape, np.float32, DimensionFormat.NCHW),
        op,
    ]
    net.outputName, net.tensorNumber = ["out0"], 3
    _, out = run_net(pack_net(net), {"in0": x, "in1": grid}, ScheduleConfig(num_thread=threads))
    return out["out0"]


def check(p: GridSampleT, x: np.ndarray, grid: np.ndarray, fmt: Any = None) -> np.ndarray:
    """1 and 2 threads identical, both bit-equal to the reference (same float32 operations)."""
    fmt = DimensionFormat.NC4HW4 if fmt is None else fmt
    one, two = (run(p, x, grid, fmt, t) for t in (1, 2))
    assert np.array_equal(one, two)
    np.testing.assert_array_equal(one, reference(p, x, grid))
    return one


def data(shape: tuple[int, ...], seed: int = 1, scale: float = 1.0) -> np.ndarray:
    return (np.random.default_rng(seed).standard_normal(shape) * scale).astype(np.float32)


def loop_2d(p: GridSampleT, x: np.ndarray, grid: np.ndarray) -> np.ndarray:
    """MNN's GridSampler.hpp rules, one value at a time, in float64."""
    n, c, ih, iw = x.shape
    _, oh, ow, _ = grid.shape
    out = np.zeros((n, c, oh, ow))

    def at(b: int, ch: int, y: int, xx: int) -> float:
        if not (0 <= y < ih and 0 <= xx < iw):
            if p.paddingMode == ZEROS:
                return 0.0
            y, xx = min(max(y, 0), ih - 1), min(max(xx, 0), iw - 1)
        return float(x[b, ch, y, xx])

    for b, ch, i, j in np.ndindex(n, c, oh, ow):
        gx, gy = float(grid[b, i, j, 0]), float(grid[b, i, j, 1])
        if p.alignCorners:  # PyTorch's unnormalize
            u, v = (gx + 1) / 2 * (iw - 1), (gy + 1) / 2 * (ih - 1)
        else:
            u, v = ((gx + 1) * iw - 1) / 2, ((gy + 1) * ih - 1) / 2
        if p.mode == NEAREST:
            out[b, ch, i, j] = at(b, ch, math.floor(v + 0.5), math.floor(u + 0.5))
            continue
        x0, y0, x1, y1 = math.floor(u), math.floor(v), math.ceil(u), math.ceil(v)
        fx, fy = x1 - u, y1 - v
        top = at(b, ch, y0, x0) * fx + at(b, ch, y0, x1) * (1 - fx)
        bottom = at(b, ch, y1, x0) * fx + at(b, ch, y1, x1) * (1 - fx)
        out[b, ch, i, j] = top * fy + bottom * (1 - fy)
    return out


@pytest.mark.parametrize("c", [1, 3, 4, 5, 17])
@pytest.mark.parametrize("mode", [BILINEAR, NEAREST])
def test_channels(c: int, mode: int) -> None:
    x, grid = data((2, c, 5, 7)), data((2, 3, 6, 2), seed=2, scale=0.7)
    check(param(mode, ZEROS, False), x, grid)


@pytest.mark.parametrize("padding", [ZEROS, CLAMP, REFLECTION])
@pytest.mark.parametrize("align", [False, True])
@pytest.mark.parametrize("mode", [BILINEAR, NEAREST])
def test_modes_vs_scalar_loop(mode: int, padding: int, align: bool) -> None:
    x, grid = data((2, 3, 4, 5)), data((2, 5, 3, 2), seed=3, scale=1.3)
    grid[0, 0, 0] = [1.0, -1.0]  # exact corners and integer coordinates
    grid[0, 0, 1] = [0.25, 0.5]
    p = param(mode, padding, align)
    np.testing.assert_allclose(check(p, x, grid), loop_2d(p, x, grid), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("fmt", [DimensionFormat.NCHW, DimensionFormat.NC4HW4])
@pytest.mark.parametrize("mode", [BILINEAR, NEAREST])
def test_3d_and_nchw(fmt: Any, mode: int) -> None:
    x, grid = data((2, 5, 3, 4, 5)), data((2, 2, 3, 4, 3), seed=4, scale=1.2)
    check(param(mode, ZEROS, False), x, grid, fmt)
    check(param(mode, CLAMP, True), x, grid, fmt)
    check(param(mode, CLAMP, False), x[:, :, 0], grid[:, 0, ..., :2], fmt)


def test_3d_reference_reduces_to_2d() -> None:
    """A depth-1 volume sampled at z = 0 with align_corners is the 2-D result."""
    x, grid = data((1, 3, 4, 5)), data((1, 2, 3, 2), seed=5)
    p = param(BILINEAR, CLAMP, True)
    grid3 = np.concatenate([grid, np.zeros((1, 2, 3, 1), np.float32)], -1)[:, None]
    out3 = reference(p, x[:, :, None], grid3)[:, :, 0]
    np.testing.assert_allclose(out3, reference(p, x, grid), rtol=1e-6)


def test_non_finite_grid_stays_in_bounds() -> None:
    x = data((1, 5, 3, 3))
    grid = np.array([[[[np.nan, 0], [np.inf, -np.inf], [1e30, -1e30]]]], np.float32)
    for padding in (ZEROS, CLAMP):
        out = run(param(BILINEAR, padding, False), x, grid, DimensionFormat.NC4HW4, 1)
        assert out.shape == (1, 5, 1, 3)


def test_mismatched_grid() -> None:
    with pytest.raises(MNNError) as info:
        run(
            param(BILINEAR, ZEROS, False),
            data((2, 3, 4, 4)),
            data((1, 2, 2, 2)),
            DimensionFormat.NC4HW4,
            1,
        )
    assert info.value.code == ErrorCode.COMPUTE_SIZE_ERROR
