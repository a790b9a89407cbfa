"""Build one-op models in code and run them through the whole runtime.

``make_single_op_net`` writes real model bytes with the generated FlatBuffers object API (the
same format MNN's converter writes), so a run exercises loading, scheduling, shape functions,
creators, placement, memory planning and kernels together. The test suite (``tests/helpers.py``)
and the conformance kit both build their models here.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from mnnpy._schema.MNN.Blob import BlobT
from mnnpy._schema.MNN.Input import InputT
from mnnpy._schema.MNN.Net import NetT
from mnnpy._schema.MNN.Op import OpT
from mnnpy._schema.MNN.OpParameter import OpParameter
from mnnpy._schema.MNN.OpType import OpType
from mnnpy.config import ScheduleConfig
from mnnpy.interpreter import Interpreter
from mnnpy.net import pack_net
from mnnpy.session import Session
from mnnpy.tensor_format import DataType, DimensionFormat

__all__ = [
    "ATOL",
    "RTOL",
    "assert_close",
    "const_op",
    "input_op",
    "make_op",
    "make_single_op_net",
    "run_net",
    "run_op",
]

# float32 tolerances of op and model comparisons (integers compare exactly).
RTOL, ATOL = 1e-3, 1e-4

_DATA_TYPES = {
    np.dtype(np.float32): (DataType.DT_FLOAT, "float32s"),
    np.dtype(np.int32): (DataType.DT_INT32, "int32s"),
    np.dtype(np.uint8): (DataType.DT_UINT8, "uint8s"),
    np.dtype(np.int8): (DataType.DT_INT8, "int8s"),
}


def make_op(
    op_type: int,
    name: str,
    inputs: Sequence[int],
    outputs: Sequence[int],
    param: Any = None,
    param_type: int = OpParameter.NONE,
) -> OpT:
    """An ``OpT`` reading tensors ``inputs`` and writing tensors ``outputs``."""
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
    return make_op(OpType.Const, name, [], [index], blob, OpParameter.Blob)


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
    return make_op(OpType.Input, name, [], [index], param, OpParameter.Input)


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

    Inputs are tensors ``in0..`` with layout ``fmt``; outputs are ``out0..``; the op is ``op``.
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
    op = make_op(op_type, "op", range(n_in), range(n_in, n_in + num_outputs), param, param_type)
    op.defaultDimentionFormat = int(default_format)
    ops.append(op)
    net.oplists = ops
    net.outputName = [f"out{i}" for i in range(num_outputs)]
    net.tensorNumber = len(net.tensorName)
    return pack_net(net)


def run_net(
    data: bytes,
    inputs: Mapping[str, np.ndarray],
    config: ScheduleConfig | None = None,
    *,
    quiet_fallback: bool = False,
) -> tuple[Session, dict[str, np.ndarray]]:
    """Run model bytes once on ``inputs`` (by tensor name, logical layout).

    Args:
        data: the model.
        inputs: values to feed; inputs not named keep the zeros they are created with.
        config: the session's schedule config (default: CPU).
        quiet_fallback: silence the warning about ops that fell back to another backend
            (callers that read ``session.placement()`` themselves).

    Returns:
        The session (for ``placement()`` and ``copy_stats()``) and every output by name.
    """
    interp = Interpreter.from_buffer(data)
    with warnings.catch_warnings():
        if quiet_fallback:
            warnings.filterwarnings("ignore", message=r".*fell back", category=RuntimeWarning)
        session = interp.create_session(config or ScheduleConfig())
    for name, value in inputs.items():
        interp.get_session_input(session, name).copy_from(np.asarray(value))
    interp.run_session(session)
    outputs = {n: t.numpy() for n, t in interp.get_session_output_all(session).items()}
    return session, outputs


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
    config: ScheduleConfig | None = None,
) -> list[np.ndarray]:
    """Run a one-op model on ``inputs`` (logical arrays); returns the outputs (logical layout).

    ``config`` replaces the default CPU config (then ``num_thread`` is ignored).
    """
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
    feed = {f"in{i}": x for i, x in enumerate(inputs) if not (consts and i in consts)}
    _, outputs = run_net(data, feed, config or ScheduleConfig(num_thread=num_thread))
    return [outputs[f"out{i}"] for i in range(num_outputs)]


def assert_close(
    actual: np.ndarray, expected: np.ndarray, rtol: float = RTOL, atol: float = ATOL
) -> None:
    """Equal shapes; float32 within tolerance, integers exact (raises AssertionError)."""
    actual, expected = np.asarray(actual), np.asarray(expected)
    if actual.shape != expected.shape:  # not ``assert``: this must also check under -O
        raise AssertionError(f"shape {actual.shape} != {expected.shape}")
    if np.issubdtype(expected.dtype, np.integer):
        np.testing.assert_array_equal(actual, expected)
    else:
        np.testing.assert_allclose(actual, expected, rtol=rtol, atol=atol)
