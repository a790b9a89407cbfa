"""The creation fast paths give what the general paths give: the CPU convolution creator's
inline float32 weights (``inline_weights``) and the per-op ``Placement`` (``_placement``)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from mnnpy.backend.cpu.executions.convolution_fast import inline_weights as _weights
from mnnpy.ops.convolution import conv_geometry, conv_weights
from mnnpy.placement import Placement, _placement
from tests.unit.test_weights import conv_op, quan


@pytest.mark.parametrize("oc, ic, k", [(16, 8, 1), (5, 3, 3), (1, 1, 1)])
@pytest.mark.parametrize("with_bias", [True, False])
def test_inline_float_weights_as_conv_weights(oc: int, ic: int, k: int, with_bias: bool) -> None:
    rng = np.random.default_rng(oc * 100 + ic * 10 + k)
    weight = rng.standard_normal(oc * ic * k * k).astype(np.float32)
    bias = rng.standard_normal(oc).astype(np.float32) if with_bias else None
    op = conv_op(oc, ic, k, weight=weight, bias=bias)
    geo = conv_geometry(op, (1, ic, 8, 8))
    dims = (oc, ic, k, k)
    w, b = _weights(op, geo, dims)
    ref_w, ref_b = conv_weights(op, geo)
    assert (w.shape, w.dtype, b.shape, b.dtype) == (
        ref_w.shape,
        ref_w.dtype,
        ref_b.shape,
        ref_b.dtype,
    )
    assert w.tobytes() == ref_w.tobytes() and b.tobytes() == ref_b.tobytes()


def test_other_tables_take_the_general_path() -> None:
    op = conv_op(4, 2, 1, weight=np.ones(8), bias=np.ones(3))  # bias of the wrong length
    geo = conv_geometry(op, (1, 2, 4, 4))
    with pytest.raises(Exception, match="bias has 3 floats"):
        _weights(op, geo, (4, 2, 1, 1))
    op = conv_op(4, 2, 1, weight=np.ones(7), bias=np.ones(4))  # weight of the wrong length
    with pytest.raises(Exception, match="weight has 7 values"):
        _weights(op, geo, (4, 2, 1, 1))
    codes = np.arange(-4, 4, dtype=np.int8).tobytes()  # raw int8 codes (IDST type 4), one scale
    op = conv_op(4, 2, 1, quan=quan(codes, np.full(4, 0.5, np.float32), kind=4), bias=np.ones(4))
    w, b = _weights(op, geo, (4, 2, 1, 1))
    ref_w, ref_b = conv_weights(op, geo)
    assert np.array_equal(w, ref_w) and np.array_equal(b, ref_b)


def test_placement_as_the_dataclass_makes_it() -> None:
    fast = _placement("conv1", "Convolution", "CPU", True, "OpenCL: no")
    slow = Placement("conv1", "Convolution", "CPU", True, "OpenCL: no")
    assert fast == slow and hash(fast) == hash(slow) and repr(fast) == repr(slow)
    assert dataclasses.replace(fast, group="g").group == "g"
    with pytest.raises(dataclasses.FrozenInstanceError):
        fast.backend = "OpenCL"  # type: ignore[misc]
