"""The CPU convolution creator's common path (``convolution_fast.create_common``) against the
generic one (``convolution.create`` without it, the reference): the same execution, the same
packed weight and bias bytes, the same plan after resize, the same output bits."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from mnnpy.backend.cpu.executions import convolution as C
from mnnpy.backend.cpu.executions.convolution_direct import CPUConvolutionDirect
from mnnpy.backend.cpu.executions.convolution_gemm import CPUConvolutionGemm
from tests.ops.test_convolution import CONV, DW, conv, execution_of, run

# what on_resize plans: every attribute a run reads, besides the weights
_PLAN = ("_shape", "_window", "_tile", "_gather", "_linear", "_shift", "lo", "hi", "act",
         "in_channels", "known", "compressed")  # fmt: skip

CASES = {  # op type, parameters, input shape, whether the common path takes it
    "dw3x3": (DW, dict(c=8, oc=8, group=8, padX=1, padY=1), (1, 8, 9, 7), True),
    "dw5x5_s2_relu6": (
        DW,
        dict(c=12, oc=12, k=(5, 5), group=12, padX=2, padY=2, strideX=2, strideY=2, relu6=True),
        (2, 12, 11, 10),
        True,
    ),  # fmt: skip
    "gemm1x1": (CONV, dict(c=16, oc=20, k=(1, 1)), (1, 16, 6, 5), True),
    "gemm3x3_s2_relu": (
        CONV,
        dict(c=8, oc=24, padX=1, padY=1, strideX=2, strideY=2, relu=True),
        (1, 8, 9, 9),
        True,
    ),  # fmt: skip
    "linear": (CONV, dict(c=32, oc=16, k=(1, 1)), (6, 32, 1, 1), True),
    "width1": (CONV, dict(c=8, oc=8, k=(5, 1), padY=2), (1, 8, 30, 1), True),
    "direct_rgb": (
        CONV,
        dict(c=3, oc=24, padX=1, padY=1, strideX=2, strideY=2, relu6=True),
        (1, 3, 17, 16),
        True,
    ),  # fmt: skip
    "grouped": (CONV, dict(c=8, oc=8, group=2, padX=1, padY=1), (1, 8, 6, 6), False),
    "no_bias": (CONV, dict(c=8, oc=8, k=(1, 1), bias=False), (1, 8, 6, 6), False),
}


def _session(case: str, common: bool, monkeypatch: pytest.MonkeyPatch) -> tuple[Any, Any, bool]:
    """(output, execution, whether the common path made it) for ``case``."""
    op_type, kw, shape, _ = CASES[case]
    made, original = [], C.create_common

    def spy(*args: Any) -> Any:
        ex = original(*args) if common else None
        made.append(ex is not None)
        return ex

    with monkeypatch.context() as m:
        m.setattr(C, "create_common", spy)
        x = np.random.default_rng(1).standard_normal(shape).astype(np.float32)
        out, session = run(x, conv(**kw), op_type, 1, "NORMAL")
    return out, execution_of(session), any(made)


@pytest.mark.parametrize("case", list(CASES))
def test_common_path_is_the_generic_path(case: str, monkeypatch: pytest.MonkeyPatch) -> None:
    out, ex, fast = _session(case, True, monkeypatch)
    ref_out, ref, slow = _session(case, False, monkeypatch)
    assert fast is CASES[case][3] and not slow
    assert type(ex) is type(ref)
    assert np.array_equal(out.view(np.uint32), ref_out.view(np.uint32))
    assert np.array_equal(ex.weight.view(np.uint32), ref.weight.view(np.uint32))
    assert np.array_equal(ex.bias.view(np.uint32), ref.bias.view(np.uint32))
    assert ex.backend.static_bytes == ref.backend.static_bytes  # the same STATIC accounting
    for name in _PLAN:
        assert getattr(ex, name, None) == getattr(ref, name, None), name
    if fast:  # and the generic path's packing is the pack_weight reference
        w = conv(**CASES[case][1]).weight.reshape(ex.known[1].out_channels, -1, *ex.known[1].kernel)
        gemm = type(ex) in (CPUConvolutionGemm, CPUConvolutionDirect)
        pack = CPUConvolutionGemm.pack_weight if gemm else None
        pack = pack or C.CPUConvolutionDepthwise.pack_weight
        assert np.array_equal(ex.weight.view(np.uint32), pack(w).view(np.uint32))
        b = np.zeros(ex.bias.size, np.float32)  # the bias, zero-padded to the panels' lanes
        b[: w.shape[0]] = conv(**CASES[case][1]).bias
        assert np.array_equal(ex.bias.view(np.uint32), b.view(np.uint32))
