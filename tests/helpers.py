"""Build one-op models in code and run them through the whole runtime.

``make_single_op_net`` writes real model bytes with the generated FlatBuffers object API (the
same format MNN's converter writes), so op tests exercise loading, scheduling, shape functions,
creators, memory planning and kernels together.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

import mnnpy
from mnnpy._schema.MNN.Blob import BlobT
from mnnpy._schema.MNN.Input import InputT
from mnnpy._schema.MNN.Net import NetT
from mnnpy._schema.MNN.Op import OpT
from mnnpy._schema.MNN.OpParameter import OpParameter
from mnnpy._schema.MNN.OpType import OpType
from mnnpy.net import pack_net
from mnnpy.tensor_format import DataType, DimensionFormat

RTOL, ATOL = 1e-3, 1e-4

_DATA_TYPES = {
    np.dtype(np.float32): (DataType.DT_FLOAT, "float32s"),
    np.dtype(np.int32): (DataType.DT_INT32, "int32s"),
    np.dtype(np.uint8): (DataType.DT_UINT8, "uint8s"),
    np.dtype(np.int8): (DataType.DT_INT8, "int8s"),
}


def _op(
    op_type: int,
    name: str,
    inputs: Sequence[int],
    outputs: Sequence[int],
    param: Any = None,
    param_type: int = OpParameter.NONE,
) -> OpT:
    op = OpT()
    op.type, op.name = op_type, name
    op.inputIndexes, op.outputIndexes = list(inputs), list(outputs)
    op.main, op.mainType = param, param_type
    return op


def const_op(
    name: str, index: int, value: np.ndarray, fmt: DimensionFormat = DimensionFormat.NCHW
) -> OpT:
    """A Const op writing ``value`` to tensor ``index``."""
    value = np.asarray(value)
    blob = BlobT()
    blob.dims = list(value.shape)
    blob.dataFormat = int(fmt)
    blob.dataType, field = _DATA_TYPES[value.dtype]
    setattr(blob, field, value.ravel())
    return _op(OpType.Const, name, [], [index], blob, OpParameter.Blob)


def input_op(
    name: str,
    index: int,
    shape: Sequence[int],
    dtype: Any = np.float32,
    fmt: DimensionFormat = DimensionFormat.NC4HW4,
) -> OpT:
    """An Input op for tensor ``index``."""
    param = InputT()
    param.dims = list(shape)
    param.dtype = int(_DATA_TYPES[np.dtype(dtype)][0])
    param.dformat = int(fmt)
    return _op(OpType.Input, name, [], [index], param, OpParameter.Input)


def make_single_op_net(
    op_type: int,
    inputs: Sequence[np.ndarray],
    param: Any = None,
    param_type: int = OpParameter.NONE,
    *,
    consts: Mapping[int, np.ndarray] | None = None,
    fmt: DimensionFormat = DimensionFormat.NC4HW4,
    num_outputs: int = 1,
    default_format: DimensionFormat = DimensionFormat.NHWC,
) -> bytes:
    """Model bytes: one Input (or Const, for indexes in ``consts``) per input, then the op.

    Inputs are tensors ``in0..`` with layout ``fmt``; outputs are ``out0..``.
    """
    consts = dict(consts or {})
    net = NetT()
    n_in = len(inputs)
    net.tensorName = [f"in{i}" for i in range(n_in)] + [f"out{i}" for i in range(num_outputs)]
    ops = []
    for i, arr in enumerate(inputs):
        if i in consts:
            ops.append(const_op(f"in{i}", i, consts[i]))
        else:
            ops.append(input_op(f"in{i}", i, np.shape(arr), np.asarray(arr).dtype, fmt))
    op = _op(op_type, "op", range(n_in), range(n_in, n_in + num_outputs), param, param_type)
    op.defaultDimentionFormat = int(default_format)
    ops.append(op)
    net.oplists = ops
    net.outputName = [f"out{i}" for i in range(num_outputs)]
    net.tensorNumber = len(net.tensorName)
    return pack_net(net)


def run_op(
    op_type: int,
    inputs: Sequence[np.ndarray],
    param: Any = None,
    param_type: int = OpParameter.NONE,
    *,
    consts: Mapping[int, np.ndarray] | None = None,
    fmt: DimensionFormat = DimensionFormat.NC4HW4,
    num_outputs: int = 1,
    num_thread: int = 1,
    default_format: DimensionFormat = DimensionFormat.NHWC,
) -> list[np.ndarray]:
    """Run a one-op model on ``inputs`` (logical NCHW arrays); returns the outputs (NCHW)."""
    data = make_single_op_net(
        op_type,
        inputs,
        param,
        param_type,
        consts=consts,
        fmt=fmt,
        num_outputs=num_outputs,
        default_format=default_format,
    )
    interp = mnnpy.Interpreter.from_buffer(data)
    session = interp.create_session(mnnpy.ScheduleConfig(num_thread=num_thread))
    for i, arr in enumerate(inputs):
        if consts and i in consts:
            continue
        interp.get_session_input(session, f"in{i}").copy_from(np.asarray(arr))
    interp.run_session(session)
    return [interp.get_session_output(session, f"out{i}").numpy() for i in range(num_outputs)]


def assert_close(
    actual: np.ndarray, expected: np.ndarray, rtol: float = RTOL, atol: float = ATOL
) -> None:
    """Equal shapes; float32 within tolerance, integers exact."""
    actual, expected = np.asarray(actual), np.asarray(expected)
    assert actual.shape == expected.shape, f"shape {actual.shape} != {expected.shape}"
    if np.issubdtype(expected.dtype, np.integer):
        np.testing.assert_array_equal(actual, expected)
    else:
        np.testing.assert_allclose(actual, expected, rtol=rtol, atol=atol)


def run_mnn(model: bytes, x: np.ndarray, tmp_path: Any) -> np.ndarray:
    """A one-op model (input ``in0``, output ``out0``) run by MNN's own runtime, NCHW in and out.

    Skips the test when the ``mnn`` wheel is not installed. Only ``MNN`` is imported, never
    ``MNN.tools`` (whose logger installs packages and uploads usage logs).
    """
    import pytest

    MNN = pytest.importorskip("MNN")
    path = str(tmp_path / "op.mnn")
    with open(path, "wb") as f:
        f.write(model)
    interp = MNN.Interpreter(path)
    sess = interp.createSession({"numThread": 1})
    caffe = MNN.Tensor_DimensionType_Caffe
    interp.getSessionInput(sess, "in0").copyFrom(
        MNN.Tensor(list(x.shape), MNN.Halide_Type_Float, np.ascontiguousarray(x), caffe)
    )
    interp.runSession(sess)
    out = interp.getSessionOutput(sess, "out0")
    shape = list(out.getShape())
    host = MNN.Tensor(shape, MNN.Halide_Type_Float, np.zeros(shape, np.float32), caffe)
    out.copyToHostTensor(host)
    return np.array(host.getNumpyData(), dtype=np.float32).reshape(shape)
