"""LIMIT mode's fused GEMV: a direct 1x1 convolution on a few pixels reads its compressed
weights without dequantizing them (``kernels/qgemv.pyx``). Oracles: the same op on the float
weights the table stands for (LIMIT's dequantize-then-GEMM path, forced by ``GEMV_TOKENS = 0``)
and the NumPy reference.
"""

from __future__ import annotations

import numpy as np
import pytest

from mnnpy.backend.cpu.executions import convolution_gemm_limit as GL
from mnnpy.net import OpDef, OpParameter
from mnnpy.ops import reference_of
from mnnpy.tensor_format import DimensionFormat
from tests.helpers import assert_close
from tests.unit.test_limit_weights import CONV, conv_param, quantize, run, with_table

# (input channels, outputs, batch, height, width): tokens = batch * height * width <= 8
SHAPES = [(64, 37, 1, 1, 1), (12, 33, 3, 1, 1), (20, 5, 1, 2, 2), (7, 16, 2, 1, 2), (5, 1, 4, 1, 1),
          (12, 33, 6, 1, 1), (9, 20, 2, 2, 2)]  # fmt: skip


def _execution(session):
    ex = [u.execution for u in session.pipelines[0].units if u.op.name == "op"][0]
    assert isinstance(ex, GL.CPUConvolutionGemmLimit)
    return ex


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize(
    ("bits", "asym", "block"),
    [(4, False, 0), (4, True, 0), (4, True, 4), (8, False, 4), (8, True, 0), (2, True, 0),
     (6, False, 4), (16, False, 0)],
)  # fmt: skip
def test_gemv_matches_dequantized_path(monkeypatch, shape, bits, asym, block):
    c, oc, batch, h, w = shape
    rng = np.random.default_rng(bits * 7 + c)
    weight = rng.standard_normal((oc, c, 1, 1)).astype(np.float32)
    table = quantize(weight, bits, asym, block if block and c % block == 0 else 0)
    param = conv_param(c, oc, 1, 1, table, relu6=bits == 8)
    x = rng.standard_normal((batch, c, h, w)).astype(np.float32)
    with_table(monkeypatch, table, np.asarray(param.bias))
    got, session = run(x, param, CONV, "LIMIT")
    ex = _execution(session)
    assert ex._gemv and ex._weight_scratch is None  # no float panels in the arena
    np.testing.assert_array_equal(run(x, param, CONV, "LIMIT", threads=2)[0], got)
    monkeypatch.setattr(GL, "GEMV_TOKENS", 0)
    want, session = run(x, param, CONV, "LIMIT")
    assert not _execution(session)._gemv
    assert_close(got, want)
    op = OpDef(0, CONV, "op", (0,), (1,), param, OpParameter.Convolution2D, DimensionFormat.NHWC)
    assert_close(got, reference_of(CONV)(op, [x])[0])


def test_more_pixels_or_a_window_keep_the_chunked_path(monkeypatch):
    rng = np.random.default_rng(1)
    for k, hw in ((1, (1, 9)), (3, (1, 1))):
        weight = rng.standard_normal((8, 4, k, k)).astype(np.float32)
        table = quantize(weight, 4)
        pad = {"padX": 1, "padY": 1} if k == 3 else {}
        param = conv_param(4, 8, k, 1, table, **pad)
        x = rng.standard_normal((1, 4, *hw)).astype(np.float32)
        with_table(monkeypatch, table, np.asarray(param.bias))
        _, session = run(x, param, CONV, "LIMIT")
        assert not _execution(session)._gemv
