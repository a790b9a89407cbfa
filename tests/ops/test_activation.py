"""Sigmoid and TanH (standalone op types): CPU execution vs the reference, reference vs MNN."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import mnnpy
from mnnpy.net import OpDef, OpParameter, OpType
from mnnpy.ops import reference_of
from mnnpy.tensor_format import DimensionFormat
from tests.helpers import assert_close, make_single_op_net, run_mnn, run_op

OPS = [OpType.Sigmoid, OpType.TanH]


def reference(op_type: int, x: np.ndarray) -> np.ndarray:
    op = OpDef(0, op_type, "op", (0,), (1,), None, OpParameter.NONE, DimensionFormat.NCHW)
    return reference_of(op_type)(op, [x])[0]


def check(op_type: int, x: np.ndarray, **kw: Any) -> None:
    """1 and 2 threads give identical results, both close to the reference."""
    one, two = (run_op(op_type, [x], num_thread=t, **kw)[0] for t in (1, 2))
    assert np.array_equal(one, two)
    assert_close(one, reference(op_type, x), rtol=1e-6, atol=1e-6)


def data(shape: tuple[int, ...], seed: int = 1) -> np.ndarray:
    return (np.random.default_rng(seed).standard_normal(shape) * 4).astype(np.float32)


@pytest.mark.parametrize("c", [1, 3, 4, 5, 17])
@pytest.mark.parametrize("op_type", OPS)
def test_channels(c: int, op_type: int) -> None:
    check(op_type, data((2, c, 7, 5)))


@pytest.mark.parametrize("shape", [(7,), (3, 5), (2, 3, 4, 5, 3), (1, 2, 80, 90)])
@pytest.mark.parametrize("fmt", [DimensionFormat.NC4HW4, DimensionFormat.NCHW])
@pytest.mark.parametrize("op_type", OPS)
def test_shapes_and_layouts(shape: tuple[int, ...], fmt: DimensionFormat, op_type: int) -> None:
    check(op_type, data(shape), fmt=fmt)


@pytest.mark.parametrize("op_type", OPS)
def test_extremes(op_type: int) -> None:
    x = np.array([[-1e30, -100, -88.8, -0.0, 0, 1e-8, 20, 100, 1e30, np.inf, -np.inf]], np.float32)
    check(op_type, x, fmt=DimensionFormat.NCHW)


@pytest.mark.parametrize("op_type", OPS)
def test_padding_lanes_stay_zero(op_type: int) -> None:
    x = data((1, 3, 2, 2))
    model = make_single_op_net(op_type, [x])
    interp = mnnpy.Interpreter.from_buffer(model)
    session = interp.create_session(mnnpy.ScheduleConfig())
    interp.get_session_input(session, "in0").copy_from(x)
    interp.run_session(session)
    raw = interp.get_session_output(session, "out0").host
    assert np.all(raw.reshape(-1, 4)[:, 3] == 0)


@pytest.mark.parametrize("op_type", OPS)
def test_reference_matches_mnn(op_type: int, tmp_path: object) -> None:
    x = data((2, 5, 4, 3))
    model = make_single_op_net(op_type, [x])
    assert_close(reference(op_type, x), run_mnn(model, x, tmp_path), rtol=1e-5, atol=1e-5)
