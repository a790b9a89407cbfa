"""Shape functions declare the inputs whose values they read (MNN's ``needInputContent``).

``compute_shape`` checks those values before calling the shape function and answers with the
missing tensor instead; nothing is raised for that. ``content_of`` on an undeclared, unknown input
is a ``ComputeSizeError`` (a registration bug), not a status.
"""

from __future__ import annotations

import numpy as np
import pytest

from mnnpy._schema.MNN.Convolution2D import Convolution2DT
from mnnpy._schema.MNN.Convolution2DCommon import Convolution2DCommonT
from mnnpy._schema.MNN.Reshape import ReshapeT
from mnnpy.errors import ComputeSizeError, ErrorCode
from mnnpy.net import OpDef, OpParameter, OpType
from mnnpy.ops import compute_shape, content_inputs, content_of
from mnnpy.tensor import Tensor
from mnnpy.tensor_format import DimensionFormat

NCHW = DimensionFormat.NCHW


def _op(op_type: int, param: object = None, param_type: int = 0) -> OpDef:
    return OpDef(0, op_type, "op", (), (), param, param_type, NCHW)


def _deconv(has_output_shape: bool) -> OpDef:
    p = Convolution2DT()
    p.common = Convolution2DCommonT()
    p.common.hasOutputShape = has_output_shape
    return _op(OpType.Deconvolution, p, OpParameter.Convolution2D)


def test_declared_indexes() -> None:
    assert content_inputs(_op(OpType.Reshape), 2) == (1,)
    assert content_inputs(_op(OpType.Reshape), 1) == ()  # the optional input is absent
    assert content_inputs(_op(OpType.SliceTf), 3) == (2,)  # the begin only for a size of -1
    assert content_inputs(_op(OpType.Range), 3) == (0, 1, 2)
    assert content_inputs(_op(OpType.Where), 1) == (0,)
    assert content_inputs(_op(OpType.ReLU), 1) == ()
    assert content_inputs(_deconv(True), 3) == (2,)  # the last input, when it is a shape
    assert content_inputs(_deconv(False), 3) == ()


def test_unknown_values_are_an_answer_and_the_shape_function_is_not_called() -> None:
    x = Tensor((2, 3), np.float32, NCHW, name="x")
    shape = Tensor((2,), np.int32, NCHW, name="shape")
    out = Tensor(name="out")
    op = _op(OpType.Reshape, ReshapeT(), OpParameter.Reshape)
    assert compute_shape(op, [x, shape], [out]) is shape
    assert out.shape == ()  # untouched
    shape.describe.content = np.array([3, 2], np.int32)
    assert compute_shape(op, [x, shape], [out]) is None
    assert out.shape == (3, 2)


def test_reading_an_unknown_undeclared_input_is_a_compute_size_error() -> None:
    t = Tensor((2,), np.int32, NCHW, name="sizes")
    with pytest.raises(ComputeSizeError) as e:
        content_of(t, "Slice's sizes")
    assert e.value.code == ErrorCode.COMPUTE_SIZE_ERROR
    assert "'sizes'" in str(e.value) and "content=" in str(e.value)
    t.describe.content = np.array([1, 1], np.int32)
    np.testing.assert_array_equal(content_of(t), [1, 1])


def test_a_shape_function_may_answer_with_the_tensor_it_needs(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Values found needed while computing (a subgraph's shapes) are a return value too."""
    from mnnpy import ops

    ops.load_all()
    x = Tensor((2, 3), np.float32, NCHW, name="x")
    out = Tensor(name="out")

    def needs_own_output(op: OpDef, inputs: list, outputs: list) -> Tensor | None:
        return outputs[0]

    monkeypatch.setitem(ops._SHAPES, OpType.ReLU, needs_own_output)
    assert compute_shape(_op(OpType.ReLU), [x], [out]) is out


def test_run_time_values_are_evaluated_again_only_when_the_inputs_they_read_change(
    monkeypatch,
) -> None:
    """A loop body re-runs with the same shape vector at every iteration: the session checks the
    inputs the values were computed from instead of evaluating them again."""
    import mnnpy
    from mnnpy import session as session_module
    from tests.helpers import make_single_op_net

    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    net = make_single_op_net(
        OpType.Reshape, [x, np.array([3, 2], np.int32)], ReshapeT(), OpParameter.Reshape, fmt=NCHW
    )
    interp = mnnpy.Interpreter.from_buffer(net)
    session = interp.create_session(mnnpy.ScheduleConfig(num_thread=1))
    calls: list[int] = []
    plain = session_module.evaluate
    monkeypatch.setattr(session_module, "evaluate", lambda *a: (calls.append(1), plain(*a))[1])
    shape_in, x_in = (interp.get_session_input(session, n) for n in ("in1", "in0"))
    # new values: evaluated, planned with them, evaluated again to see they settled
    for shape, value, evaluated in (
        ([3, 2], x, 2),
        ([3, 2], x + 1, 0),
        ([6, 1], x, 2),
        ([6, 1], x, 0),
        ([3, 2], x, 2),
    ):
        calls.clear()
        shape_in.copy_from(np.array(shape, np.int32))
        x_in.copy_from(value)
        interp.run_session(session)
        got = interp.get_session_output(session, "out0").numpy()
        np.testing.assert_array_equal(got, value.reshape(shape))
        assert len(calls) == evaluated, (shape, calls)
