"""The Winograd weight transform in C, and LIMIT mode's Winograd convolution on compressed
weights (``convolution_winograd_limit.py``).

Oracles: ``G g G^T`` in float64 NumPy for the C weight transform (which NORMAL mode's
``CPUConvolutionWinograd.pack_weight`` uses too), and for whole convolutions NORMAL mode on the
same decoded numbers and the NumPy reference of the op.
"""

from __future__ import annotations

import numpy as np
import pytest

from mnnpy.backend.cpu.executions import convolution as C
from mnnpy.backend.cpu.executions import convolution_winograd_limit as WL
from mnnpy.backend.cpu.executions.convolution_choice import choose, choose_limit
from mnnpy.backend.cpu.executions.convolution_gemm_limit import CPUConvolutionGemmLimit
from mnnpy.backend.cpu.executions.convolution_winograd import CPUConvolutionWinograd, pack_taps
from mnnpy.backend.cpu.kernels import gemm as G
from mnnpy.backend.cpu.kernels import winograd as WG
from mnnpy.net import OpDef, OpParameter, OpType
from mnnpy.ops import reference_of
from mnnpy.ops.convolution import ConvGeometry
from mnnpy.tensor_format import DimensionFormat
from tests.helpers import assert_close
from tests.unit.test_limit_weights import conv_param, quantize, run, with_table

CONV = OpType.Convolution
# Winograd G matrices (Lavin & Gray, points 0, +-1, +-2): U = G g G^T
WINOGRAD_G = {
    2: np.array([[1, 0, 0], [1 / 2, 1 / 2, 1 / 2], [1 / 2, -1 / 2, 1 / 2], [0, 0, 1]]),
    4: np.array(
        [
            [1 / 4, 0, 0],
            [-1 / 6, -1 / 6, -1 / 6],
            [-1 / 6, 1 / 6, -1 / 6],
            [1 / 24, 1 / 12, 1 / 6],
            [1 / 24, -1 / 12, 1 / 6],
            [0, 0, 1],
        ]
    ),
}


def winograd_weight_reference(weight: np.ndarray, unit: int) -> np.ndarray:
    """OIHW 3x3 -> ``G g G^T`` in float64 as ``[(unit+2)^2][ceil(O/16)][I][16]``."""
    o, i = weight.shape[:2]
    g, a, n16 = WINOGRAD_G[unit], unit + 2, -(-o // 16)
    u = np.einsum("ak,oikl,bl->oiab", g, weight.astype(np.float64), g)
    out = np.zeros((n16 * 16, i, a * a))
    out[:o] = u.reshape(o, i, a * a)
    return out.reshape(n16, 16, i, a * a).transpose(3, 0, 2, 1).ravel()


@pytest.fixture(params=G.available_isas())
def isa(request: pytest.FixtureRequest):
    G.set_isa(request.param)
    yield request.param
    G.set_isa("best")


@pytest.mark.usefixtures("isa")
@pytest.mark.parametrize("unit", [2, 4])
@pytest.mark.parametrize(("oc", "ic"), [(40, 7), (16, 1), (3, 5), (64, 33)])
def test_weight_transform_matches_numpy(unit, oc, ic):
    w = np.random.default_rng(oc * ic).standard_normal((oc, ic, 3, 3)).astype(np.float32)
    want = winograd_weight_reference(w, unit)
    taps = pack_taps(w).ravel()
    got = np.full(want.size, np.nan, np.float32)
    WG.bind_weight_transform(taps, got, -(-oc // 16), ic, unit, 3)()
    # float32 arithmetic against float64: a few ulp of the largest value
    np.testing.assert_allclose(got, want, rtol=0, atol=4e-7 * np.abs(want).max())
    np.testing.assert_array_equal(CPUConvolutionWinograd.pack_weight(w, unit, 2), got)


def test_weight_transform_checks_sizes():
    taps, dst = np.zeros(16 * 9 * 2, np.float32), np.zeros(36 * 16 * 2, np.float32)
    WG.bind_weight_transform(taps, dst, 1, 2, 4)  # exactly enough
    with pytest.raises(ValueError, match="buffers too small"):
        WG.bind_weight_transform(taps[:-1], dst, 1, 2, 4)
    with pytest.raises(ValueError, match="buffers too small"):
        WG.bind_weight_transform(taps, dst[:-1], 1, 2, 4)
    with pytest.raises(ValueError, match="unit must be 2 or 4"):
        WG.bind_weight_transform(taps, dst, 1, 2, 3)


@pytest.mark.parametrize("unit", [2, 4])
@pytest.mark.parametrize(("bits", "asym", "block"), [(8, False, 0), (4, True, 9), (16, 0, 0)])
@pytest.mark.parametrize("batch", [1, 2])
@pytest.mark.parametrize("chunked", [False, True])
def test_limit_matches_normal_winograd(monkeypatch, unit, bits, asym, block, batch, chunked):
    """Compressed weights through Winograd in LIMIT = NORMAL's Winograd on the decoded floats."""
    oc, c, hw = 37, 6, (9, 7)  # three 16-channel panels, the last one partial
    rng = np.random.default_rng(bits + batch + unit)
    w = rng.standard_normal((oc, c, 3, 3)).astype(np.float32)
    table = quantize(w, bits, asym, block)
    param = conv_param(c, oc, 3, 1, table, padX=1, padY=1)
    x = rng.standard_normal((batch, c, *hw)).astype(np.float32)
    monkeypatch.setattr(C, "choose", lambda geo, low, *_: unit * (not low))
    monkeypatch.setattr(C, "choose_limit", lambda geo, threads: unit)
    if chunked:
        monkeypatch.setattr(WL, "_CHUNK_FLOATS", 1)
    want, normal = run(x, param, CONV, "NORMAL")
    assert isinstance(normal.pipelines[0].units[0].execution, CPUConvolutionWinograd)
    with_table(monkeypatch, table, np.asarray(param.bias))
    got, session = run(x, param, CONV, "LIMIT")
    ex = session.pipelines[0].units[0].execution
    assert isinstance(ex, WL.CPUConvolutionWinogradLimit) and ex.unit == unit
    assert ex._chunk == (1 if chunked else 3)
    # the weight transform in float32 (NORMAL's in float64): 1e-5 of the output's scale
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-5 * np.abs(want).max())
    np.testing.assert_array_equal(run(x, param, CONV, "LIMIT", threads=3)[0], got)
    op = OpDef(0, CONV, "op", (0,), (1,), param, OpParameter.Convolution2D, DimensionFormat.NHWC)
    assert_close(got, reference_of(CONV)(op, [x])[0])
    # the arena holds a chunk's taps, not the layer's (nor its Winograd weights)
    assert ex._weight_scratch.size == 4 * 16 * c * 9 * ex._chunk


def test_winograd_in_limit_only_for_compressed(monkeypatch):
    """A layer NORMAL runs with Winograd: float32 weights in LIMIT take GEMM (Winograd weights
    would grow STATIC memory), compressed ones Winograd made per run."""
    rng = np.random.default_rng(2)
    w = rng.standard_normal((64, 64, 3, 3)).astype(np.float32)
    table = quantize(w, 8)
    param = conv_param(64, 64, 3, 1, table, padX=1, padY=1)
    x = rng.standard_normal((1, 64, 28, 28)).astype(np.float32)

    def kind(memory):
        session = run(x, param, CONV, memory)[1]
        return type(session.pipelines[0].units[0].execution)

    assert kind("NORMAL") is CPUConvolutionWinograd
    assert kind("LIMIT") is C.CPUConvolutionGemm
    with_table(monkeypatch, table, np.asarray(param.bias))
    assert kind("LIMIT") is WL.CPUConvolutionWinogradLimit


def geo(channels: int, hw: int) -> ConvGeometry:
    return ConvGeometry(1, channels, (hw, hw), channels, (hw, hw), 1, (3, 3), (1, 1), (1, 1),
                        (1, 1))  # fmt: skip


def test_choose_limit_counts_the_per_run_transforms():
    """Small maps with many channels: the per-run weight transform and the input tiles made
    again for every chunk cost more than Winograd saves, so LIMIT takes GEMM where NORMAL keeps
    Winograd (ResNet-18's 7 x 7 x 512 layers); large maps keep Winograd."""
    assert choose(geo(512, 7), False) and not choose_limit(geo(512, 7), 1)
    assert choose_limit(geo(64, 56), 1) and choose_limit(geo(128, 28), 1)
    assert not choose_limit(ConvGeometry(1, 8, (9, 9), 8, (5, 5), 1, (3, 3), (2, 2), (1, 1),
                                         (1, 1)), 1)  # fmt: skip
    assert isinstance(CPUConvolutionGemmLimit, type)
