"""ROIAlign: CPU execution vs the sample-by-sample reference."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from mnnpy._schema.MNN.Net import NetT
from mnnpy._schema.MNN.RoiParameters import RoiParametersT
from mnnpy.errors import ErrorCode, MNNError
from mnnpy.interpreter import ScheduleConfig
from mnnpy.net import OpDef, OpParameter, OpType, pack_net
from mnnpy.ops import reference_of
from mnnpy.tensor_format import DimensionFormat
from tests.helpers import _op, assert_close, input_op, run_net

MAXPOOL, AVEPOOL = 0, 1
NCHW, NC4HW4 = DimensionFormat.NCHW, DimensionFormat.NC4HW4


def param(
    ph: int = 3,
    pw: int = 4,
    ratio: int = 2,
    aligned: bool = False,
    pool: int = AVEPOOL,
    scale: float = 0.5,
) -> RoiParametersT:
    p = RoiParametersT()
    p.pooledHeight, p.pooledWidth, p.samplingRatio = ph, pw, ratio
    p.aligned, p.poolType, p.spatialScale = aligned, pool, scale
    return p


def reference(p: RoiParametersT, inputs: list[np.ndarray]) -> np.ndarray:
    ins = tuple(range(len(inputs)))
    op = OpDef(0, OpType.ROIAlign, "op", ins, (9,), p, OpParameter.RoiParameters, NCHW)
    return reference_of(OpType.ROIAlign)(op, inputs)[0]


def run(p: RoiParametersT, inputs: list[np.ndarray], fmt: Any = NC4HW4, threads: int = 1) -> Any:
    """Feature map in ``fmt``, ROIs and indices plain, as MNN's converter writes them."""
    n = len(inputs)
    net = NetT()
    net.tensorName = [f"in{i}" for i in range(n)] + ["out0"]
    net.oplists = [
        input_op(f"in{i}", i, a.shape, a.dtype, fmt if i == 0 else NCHW)
        for i, a in enumerate(inputs)
    ]
    net.oplists.append(_op(OpType.ROIAlign, "op", range(n), [n], p, OpParameter.RoiParameters))
    net.outputName, net.tensorNumber = ["out0"], n + 1
    feed = {f"in{i}": a for i, a in enumerate(inputs)}
    _, out = run_net(pack_net(net), feed, ScheduleConfig(num_thread=threads))
    return out["out0"]


def check(p: RoiParametersT, inputs: list[np.ndarray], fmt: Any = NC4HW4) -> np.ndarray:
    one, two = (run(p, inputs, fmt, t) for t in (1, 2))
    assert np.array_equal(one, two)
    assert_close(one, reference(p, inputs), rtol=1e-5, atol=1e-5)
    return one


def data(c: int, seed: int = 1) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((2, c, 9, 11)).astype(np.float32)
    rois = np.array(
        [
            [0, 0, 20, 16],
            [3.3, 2.1, 9.7, 12.4],
            [-4, -3, 30, 25],
            [5, 5, 5.5, 5.2],
            [21, 17, 25, 19],
        ],
        np.float32,
    )
    return [x, rois, np.array([0, 1, 1, 0, 1], np.int32)]


@pytest.mark.parametrize("c", [1, 3, 4, 5, 17])
@pytest.mark.parametrize("pool", [AVEPOOL, MAXPOOL])
def test_channels(c: int, pool: int) -> None:
    check(param(pool=pool), data(c))


@pytest.mark.parametrize("aligned", [False, True])
@pytest.mark.parametrize("ratio", [0, 1, 3])
@pytest.mark.parametrize("fmt", [NCHW, NC4HW4])
def test_parameters(aligned: bool, ratio: int, fmt: Any) -> None:
    check(param(2, 5, ratio, aligned, scale=0.75), data(5, seed=2), fmt)


def test_batch_index_in_rois() -> None:
    """Without input 2 each ROI row is (batch, x1, y1, x2, y2)."""
    x, rois, idx = data(3)
    five = np.concatenate([idx[:, None].astype(np.float32), rois], 1)
    out = check(param(), [x, five])
    np.testing.assert_array_equal(out, run(param(), [x, rois, idx]))


@pytest.mark.parametrize("bad", [2, -1])
def test_batch_index_out_of_range(bad: int) -> None:
    x, rois, idx = data(3)
    idx[2] = bad
    with pytest.raises(MNNError) as info:
        run(param(), [x, rois, idx])
    assert info.value.code == ErrorCode.INVALID_VALUE


def test_non_finite_rois_stay_in_bounds() -> None:
    x, rois, idx = data(4)
    rois[0] = [np.nan, 0, 3, np.inf]
    rois[1] = [-1e30, -1e30, 1e30, 1e30]
    out = run(param(ratio=2), [x, rois, idx])
    assert out.shape == (5, 4, 3, 4)
    out = run(param(ratio=0), [x, rois[2:], idx[2:]])
    assert out.shape == (3, 4, 3, 4)
