"""Constants stored in NC4HW4 (channels padded to 4, ``[c/4][n][spatial][4]`` as MNN's CPU backend
lays NC4HW4 out: the batch inside each channel block): loaded into their
logical values, run, and checked against MNN's runtime on the same bytes.

MNN 3.6.1's ONNX converter did not write such a constant for any graph tried (constant-folded
convolutions, Conv / BinaryOp / PRelu constants, --saveStaticModel: all NCHW); its
``--transformerFuseC4`` pass writes ``{1, C, 1, 1}`` ones for fused LLM attention. These models are
built with ``mnnpy.testing.builders`` and a hand-made Blob.
"""

from __future__ import annotations

import numpy as np
import pytest

import mnnpy
from mnnpy._schema.MNN.BinaryOp import BinaryOpT
from mnnpy._schema.MNN.Blob import BlobT
from mnnpy._schema.MNN.Net import NetT
from mnnpy._schema.MNN.OpParameter import OpParameter
from mnnpy._schema.MNN.OpType import OpType
from mnnpy.errors import ErrorCode, MNNError
from mnnpy.net import pack_net
from mnnpy.tensor_format import DataType, DimensionFormat
from mnnpy.testing.builders import input_op, make_op
from tests.helpers import assert_close, run_mnn

NC4HW4 = DimensionFormat.NC4HW4


def packed(logical: np.ndarray) -> np.ndarray:
    """MNN's NC4HW4 storage of an NCHW-ordered array, padding lanes set to 99 (ignored)."""
    n, c, rest = logical.shape[0], logical.shape[1], logical.shape[2:]
    blocks = (c + 3) // 4
    out = np.full((blocks, n, *rest, 4), 99, logical.dtype)
    for ch in range(c):
        out[ch // 4, ..., ch % 4] = logical[:, ch]
    return out.ravel()


def const_blob(name: str, index: int, dims, values: np.ndarray, fmt=NC4HW4):
    blob = BlobT()
    blob.dims, blob.dataFormat = list(dims), int(fmt)
    if values.dtype == np.int32:
        blob.dataType, blob.int32s = int(DataType.DT_INT32), values
    else:
        blob.dataType, blob.float32s = int(DataType.DT_FLOAT), values.astype(np.float32)
    return make_op(OpType.Const, name, [], [index], blob, OpParameter.Blob)


def add_net(x_shape, dims, values: np.ndarray, in_fmt=NC4HW4) -> bytes:
    """out0 = in0 + a constant (tensor ``c``) given by its stored ``values``."""
    net = NetT()
    net.tensorName = ["in0", "c", "out0"]
    p = BinaryOpT()
    p.opType = 0  # ADD
    net.oplists = [
        input_op("in0", 0, x_shape, np.float32, in_fmt),
        const_blob("c", 1, dims, values),
        make_op(OpType.BinaryOp, "add", [0, 1], [2], p, OpParameter.BinaryOp),
    ]
    net.outputName, net.tensorNumber = ["out0"], 3
    return pack_net(net)


def run(data: bytes, x: np.ndarray, threads: int = 1) -> np.ndarray:
    net = mnnpy.Interpreter.from_buffer(data)
    session = net.create_session(mnnpy.ScheduleConfig(num_thread=threads))
    net.get_session_input(session, "in0").copy_from(x)
    net.run_session(session)
    return net.get_session_output(session, "out0").numpy()


@pytest.mark.parametrize(
    "shape", [(1, 5, 3, 4), (2, 3, 2, 2), (1, 4, 3), (2, 17, 2), (1, 1, 2, 3, 2), (3, 6)]
)
@pytest.mark.parametrize("in_fmt", [NC4HW4, DimensionFormat.NCHW])
def test_nc4hw4_constant_added(shape, in_fmt):
    rng = np.random.default_rng(len(shape))
    x = rng.standard_normal(shape).astype(np.float32)
    c = rng.standard_normal(shape).astype(np.float32)
    y = run(add_net(shape, shape, packed(c), in_fmt), x)
    assert_close(y, x + c)


@pytest.mark.parametrize("shape", [(1, 5, 3, 4), (2, 7, 2, 3), (1, 8, 1, 1)])
def test_nc4hw4_constant_vs_mnn(shape, tmp_path):
    """MNN's runtime reads the same padded blob the same way."""
    rng = np.random.default_rng(7)
    x = rng.standard_normal(shape).astype(np.float32)
    c = rng.standard_normal(shape).astype(np.float32)
    data = add_net(shape, shape, packed(c), DimensionFormat.NCHW)
    mnn = run_mnn(data, x, tmp_path)
    assert_close(mnn, x + c)
    assert_close(run(data, x), mnn)


def test_nc4hw4_broadcast_and_int32():
    """A per-channel ``1xCx1x1`` constant (the shape ``--transformerFuseC4`` writes) and int32."""
    x = np.random.default_rng(3).standard_normal((2, 6, 3, 3)).astype(np.float32)
    bias = np.arange(6, dtype=np.float32).reshape(1, 6, 1, 1) / 7
    assert_close(run(add_net(x.shape, bias.shape, packed(bias)), x), x + bias)
    schedule_const = mnnpy.Interpreter.from_buffer(
        add_net((1, 3, 2), (1, 3, 2), packed(np.arange(6, dtype=np.int32).reshape(1, 3, 2)))
    )
    (const,) = [c for c in schedule_const.net.ops if c.type == OpType.Const]
    from mnnpy.schedule import _const_info

    info = _const_info(const)
    np.testing.assert_array_equal(info.data, np.arange(6, dtype=np.int32).reshape(1, 3, 2))
    assert info.dimension_format == NC4HW4


@pytest.mark.parametrize("count", [30, 0, 41])  # logical 5x3x2 = 30; padded 8x3x2 = 48
def test_nc4hw4_constant_wrong_count(count):
    data = add_net((1, 5, 3, 2), (1, 5, 3, 2), np.zeros(count, np.float32))
    with pytest.raises(MNNError) as e:
        run(data, np.zeros((1, 5, 3, 2), np.float32))
    assert e.value.code == ErrorCode.INVALID_VALUE
    assert "'c'" in str(e.value) and "expected 48" in str(e.value)
