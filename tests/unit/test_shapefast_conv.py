"""The convolution shape of the shape stage's C twin (``mnnpy._shapefast``) against Python.

The oracle is ``shape_op_python`` (``ops.convolution.shape``: ``conv_geometry``) on a copy of
the same tensors: the same outputs or the same error, and the same geometry kept for the creator
(``conv_memo``), over random parameters (valid and not), formats and input shapes.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import mnnpy.shape_stage as stage
from mnnpy._schema.MNN.Convolution2D import Convolution2DT
from mnnpy._schema.MNN.Convolution2DCommon import Convolution2DCommonT
from mnnpy._schema.MNN.PadMode import PadMode
from mnnpy.net import OpDef, OpParameter, OpType
from mnnpy.ops import conv_memo
from mnnpy.ops.convolution import conv_geometry
from mnnpy.tensor_format import DimensionFormat as F
from tests.ops.test_small_folds import _squeeze, _tensors
from tests.unit.test_shapefast import _outcome, check_c

fast = pytest.importorskip("mnnpy._shapefast")
FORMATS = [F.NCHW, F.NHWC, F.NC4HW4]


def _conv(rng: np.random.Generator, depthwise: bool, channels: int = 4) -> OpDef:
    """A convolution with random parameters: mostly valid, some not (zero, negative, odd pads)."""
    c = Convolution2DCommonT()
    small = [1, 1, 1, 2, 3, 5, 7]
    c.kernelY, c.kernelX = int(rng.choice(small)), int(rng.choice(small))
    c.strideY, c.strideX = int(rng.choice(small[:5])), int(rng.choice(small[:5]))
    c.dilateY, c.dilateX = int(rng.choice(small[:4])), int(rng.choice(small[:4]))
    c.padY, c.padX = int(rng.integers(0, 4)), int(rng.integers(0, 4))
    c.padMode = int(rng.choice([PadMode.CAFFE, PadMode.SAME, PadMode.VALID]))
    c.outputCount = int(rng.choice([1, 2, 4, 6, 8, 12]))
    c.group = int(rng.choice([1, 1, 1, 2, 3]))
    c.inputCount = int(rng.choice([0, 0, 0, 0, 1, 2, 4, 6, channels]))
    if rng.random() < 0.8:  # channels the group divides
        c.outputCount = channels * int(rng.choice([1, 2])) if depthwise else c.group * 4
    pads = rng.integers(-1, 4, int(rng.choice([0, 2, 3, 4, 4, 4, 4, 4])))
    c.pads = (
        None if rng.random() < 0.5 else rng.choice([pads.astype(np.int32), list(map(int, pads))])
    )
    if rng.random() < 0.1:  # what the shape function refuses
        setattr(c, str(rng.choice(["kernelY", "strideX", "dilateY", "outputCount"])), 0)
    p = Convolution2DT()
    p.common = None if rng.random() < 0.02 else c
    kind = OpType.ConvolutionDepthwise if depthwise else OpType.Convolution
    return OpDef(0, kind, "conv", (), (), p, OpParameter.Convolution2D, F.NCHW)


def _geometry(impl: Any, op: OpDef, shape: tuple[int, ...], fmt: F) -> tuple[Any, Any]:
    """What ``impl`` answered, and the geometry it kept for the creator."""
    conv_memo.take(op, (), None)  # forget what an earlier case kept
    got = _outcome(impl, op, _tensors([shape], fmt), True)
    return got, conv_memo.take(op, _nchw(shape, fmt), None) if len(shape) == 4 else None


def test_conv_shape_as_python() -> None:
    rng = np.random.default_rng(11)
    answered = 0
    for _ in range(3000):
        rank = 4 if rng.random() < 0.95 else int(rng.choice([3, 5]))
        shape = tuple(int(d) for d in rng.integers(0 if rng.random() < 0.1 else 1, 12, rank))
        fmt = FORMATS[int(rng.integers(0, 3))]
        channels = _nchw(shape, fmt)[1] if rank == 4 else 1
        op = _conv(rng, bool(rng.random() < 0.3), channels)
        c, c_geo = _geometry(stage.shape_op, op, shape, fmt)
        py, py_geo = _geometry(stage.shape_op_python, op, shape, fmt)
        assert c == py
        assert c_geo == py_geo
        if c_geo is not None:
            assert c_geo == conv_geometry(op, _nchw(shape, fmt))
            answered += 1
    assert answered > 800  # valid: about a third


def _nchw(shape: tuple[int, ...], fmt: F) -> tuple[int, ...]:
    return (shape[0], shape[3], shape[1], shape[2]) if fmt == F.NHWC else shape


def test_conv_shape_in_c(monkeypatch: pytest.MonkeyPatch) -> None:
    """The common case is answered in C; a weight input, huge values: the Python function."""

    def refuse(*args: Any) -> None:
        raise AssertionError("the general path ran")

    rng = np.random.default_rng(12)
    op = _conv(rng, False)
    c = op.param.common
    c.kernelY = c.kernelX = 3
    c.strideY = c.strideX = c.dilateY = c.dilateX = c.group = 1
    c.padMode, c.pads, c.padY, c.padX, c.outputCount, c.inputCount = PadMode.CAFFE, None, 1, 1, 8, 0
    with monkeypatch.context() as m:
        m.setattr(fast, "compute_shape", refuse)
        for fmt in (F.NCHW, F.NHWC):
            got, geo = _geometry(
                fast.shape_op, op, (2, 5, 7, 9) if fmt == F.NHWC else (2, 9, 5, 7), fmt
            )
            want = (2, 5, 7, 8) if fmt == F.NHWC else (2, 8, 5, 7)
            assert got == (want, np.dtype(np.float32), fmt, None, False)
            assert geo == conv_geometry(op, (2, 9, 5, 7))
    calls = []
    real = fast.compute_shape
    monkeypatch.setattr(fast, "compute_shape", lambda *a: calls.append(1) or real(*a))
    c.outputCount = 2**33  # past int32: left to Python, which computes it
    assert _geometry(fast.shape_op, op, (1, 9, 5, 7), F.NCHW) == _geometry(
        stage.shape_op_python, op, (1, 9, 5, 7), F.NCHW
    )
    assert calls


def test_squeeze_dims_array() -> None:
    """squeezeDims as the loader gives it (an int32 array) or not: as the general path."""
    rng = np.random.default_rng(13)
    for _ in range(300):
        shape = tuple(int(d) for d in rng.choice([1, 1, 2, 3], int(rng.integers(0, 4))))
        value = rng.integers(-9, 9, shape).astype(np.int32)
        axes = rng.integers(-20, 20, int(rng.integers(0, 4)))
        for op_type in (OpType.Squeeze, OpType.Unsqueeze):
            strided = np.repeat(axes, 2).astype(np.int32)[::2]
            for dims in (
                axes.astype(np.int32),
                axes.astype(np.int64),
                axes.astype(np.uint8),
                strided,
            ):
                assert check_c(_squeeze(op_type, dims), [value]) == check_c(
                    _squeeze(op_type, list(map(int, dims))), [value]
                )
