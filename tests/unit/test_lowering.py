"""Lowering (mnnpy/lowering.py): decompositions against the composite's NumPy reference."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from mnnpy._schema.MNN.Axis import AxisT
from mnnpy._schema.MNN.LayerNorm import LayerNormT
from mnnpy._schema.MNN.UnaryOp import UnaryOpT
from mnnpy._schema.MNN.UnaryOpOperation import UnaryOpOperation as Un
from mnnpy.backend.cpu.backend import CPUBackend
from mnnpy.config import ScheduleConfig
from mnnpy.lowering import lowerable
from mnnpy.net import OpDef, OpParameter, OpType
from mnnpy.ops import reference_of
from mnnpy.tensor_format import DimensionFormat
from mnnpy.testing.builders import assert_close, make_single_op_net, run_net

NCHW, NC4HW4 = DimensionFormat.NCHW, DimensionFormat.NC4HW4


def _layer_norm(axis: list[int], affine: bool, rms: bool = False) -> LayerNormT:
    p = LayerNormT()
    p.axis, p.epsilon, p.useRmsnorm = axis, 1e-5, rms
    if affine:
        rng = np.random.default_rng(1)
        p.gamma = rng.standard_normal(7).astype(np.float32)
        p.beta = rng.standard_normal(7).astype(np.float32)
    return p


def _axis(a: int) -> AxisT:
    p = AxisT()
    p.axis = a
    return p


def _unary(code: int) -> UnaryOpT:
    p = UnaryOpT()
    p.opType = code
    return p


CASES = [
    ("ln_last", OpType.LayerNorm, _layer_norm([-1], True), OpParameter.LayerNorm, (2, 5, 7), NCHW),
    (
        "ln_plain",
        OpType.LayerNorm,
        _layer_norm([1, 2], False),
        OpParameter.LayerNorm,
        (3, 4, 7),
        NCHW,
    ),
    (
        "rms",
        OpType.LayerNorm,
        _layer_norm([-1], True, True),
        OpParameter.LayerNorm,
        (2, 5, 7),
        NCHW,
    ),
    ("softmax_last", OpType.Softmax, _axis(-1), OpParameter.Axis, (2, 3, 9), NCHW),
    ("softmax_c", OpType.Softmax, _axis(1), OpParameter.Axis, (2, 5, 3, 3), NC4HW4),
    ("gelu_erf", OpType.UnaryOp, _unary(Un.GELU_STANDARD), OpParameter.UnaryOp, (4, 17), NCHW),
    ("gelu_tanh", OpType.UnaryOp, _unary(Un.GELU), OpParameter.UnaryOp, (4, 17), NCHW),
]


@pytest.mark.parametrize(("name", "op_type", "param", "ptype", "shape", "fmt"), CASES)
def test_lowered_op_matches_the_composite_reference(
    monkeypatch: pytest.MonkeyPatch,
    name: str,
    op_type: int,
    param: Any,
    ptype: int,
    shape: tuple[int, ...],
    fmt: DimensionFormat,
) -> None:
    x = (np.random.default_rng(7).standard_normal(shape) * 3).astype(np.float32)
    data = make_single_op_net(op_type, [x], param, ptype, fmt=fmt, default_format=NCHW)
    _, whole = run_net(data, {"in0": x})
    monkeypatch.setattr(CPUBackend, "should_lower", lambda self, op: True)
    session, lowered = run_net(data, {"in0": x}, ScheduleConfig())
    kinds = {p.op_type for p in session.placement()}
    assert kinds <= {"BinaryOp", "UnaryOp", "Reduction"} and len(session.placement()) >= 3, kinds
    op = OpDef(0, op_type, "op", (0,), (1,), param, ptype, NCHW)
    expected = reference_of(op_type)(op, [x])[0]
    assert_close(lowered["out0"], expected)
    assert_close(whole["out0"], expected)


def test_only_lowerable_ops_are_offered(monkeypatch: pytest.MonkeyPatch) -> None:
    asked: list[str] = []

    def should_lower(self: CPUBackend, op: OpDef) -> bool:
        asked.append(op.type_name)
        return False

    monkeypatch.setattr(CPUBackend, "should_lower", should_lower)
    x = np.ones((2, 3), np.float32)
    relu = make_single_op_net(OpType.ReLU, [x], fmt=NCHW)
    session, _ = run_net(relu, {"in0": x})
    assert asked == [] and [p.op_type for p in session.placement()] == ["ReLU"]
    sm = make_single_op_net(OpType.Softmax, [x], _axis(-1), OpParameter.Axis, fmt=NCHW)
    session, _ = run_net(sm, {"in0": x})
    assert asked == ["Softmax"] and [p.op_type for p in session.placement()] == ["Softmax"]


def test_lowerable_refuses_what_it_cannot_decompose() -> None:
    grouped = _layer_norm([-1], False)
    grouped.group = 2
    ln = OpParameter.LayerNorm
    assert not lowerable(OpDef(0, OpType.LayerNorm, "ln", (0,), (1,), grouped, ln, NCHW))
    positive = _layer_norm([2], True)  # gamma broadcast over axis 2 needs the rank
    assert not lowerable(OpDef(0, OpType.LayerNorm, "ln", (0,), (1,), positive, ln, NCHW))
    plain = _layer_norm([-1], True)
    assert lowerable(OpDef(0, OpType.LayerNorm, "ln", (0,), (1,), plain, ln, NCHW))
    assert not lowerable(OpDef(0, OpType.UnaryOp, "u", (0,), (1,), _unary(Un.EXP), 0, NCHW))
    assert lowerable(OpDef(0, OpType.UnaryOp, "u", (0,), (1,), _unary(Un.GELU), 0, NCHW))
    assert not lowerable(OpDef(0, OpType.ReLU, "r", (0,), (1,), None, 0, NCHW))


@pytest.mark.parametrize("code", [Un.GELU, Un.GELU_STANDARD])
def test_lowered_gelu_equals_mnn_definition_over_the_whole_range(
    monkeypatch: pytest.MonkeyPatch, code: int
) -> None:
    """Both GELU forms against MNN's definition (``unary_op._gelu``: the clamped rational tanh)
    from -12 to 12, through both clamps (|0.798 (x + 0.045 x^3)| = 5 near |x| = 3.9), and where
    plain ``tanh`` is 2e-4 off MNN's (x near -4)."""
    x = np.linspace(-12, 12, 24001, dtype=np.float32).reshape(1, -1)
    data = make_single_op_net(OpType.UnaryOp, [x], _unary(code), OpParameter.UnaryOp, fmt=NCHW)
    monkeypatch.setattr(CPUBackend, "should_lower", lambda self, op: True)
    session, lowered = run_net(data, {"in0": x}, ScheduleConfig())
    kinds = [p.op_type for p in session.placement()]
    assert "UnaryOp" not in kinds if code == Un.GELU else kinds.count("UnaryOp") == 1, kinds
    op = OpDef(0, OpType.UnaryOp, "u", (0,), (1,), _unary(code), OpParameter.UnaryOp, NCHW)
    expected = reference_of(OpType.UnaryOp)(op, [x])[0]
    assert_close(lowered["out0"], expected)
    if code == Un.GELU:  # the reason plain tanh would not do: it misses MNN's by > atol
        x64 = x.astype(np.float64)
        plain = 0.5 * x64 * (1 + np.tanh(np.sqrt(2 / np.pi) * (x64 + 0.044715 * x64**3)))
        assert np.abs(plain - expected).max() > 1e-4
