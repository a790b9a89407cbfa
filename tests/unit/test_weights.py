"""mnnpy.weights against an independent encoder of MNN's weight formats, written here.

The encoder follows the layouts MNN's converter writes (``IDSTEncoder``: header, sample table,
indexes packed most significant bit first; the sparse form; fp16; raw int8; external files)
with a plain bit-string writer, and quantizes a known float weight per row and per block the
way ``WeightQuantAndCoding`` does. The decoded floats must equal the codes times their scales
(plus offsets) computed here, and lie within half a step of the float weight.
"""

from __future__ import annotations

import numpy as np
import pytest

from mnnpy._idst import unpack_bits
from mnnpy._schema.MNN.Blob import BlobT
from mnnpy._schema.MNN.Convolution2D import Convolution2DT
from mnnpy._schema.MNN.Convolution2DCommon import Convolution2DCommonT
from mnnpy._schema.MNN.IDSTQuan import IDSTQuanT
from mnnpy._schema.MNN.InnerProduct import InnerProductT
from mnnpy._schema.MNN.LayerNorm import LayerNormT
from mnnpy.errors import ErrorCode, MNNError
from mnnpy.net import OpDef, OpParameter, OpType
from mnnpy.tensor_format import DataType, DimensionFormat
from mnnpy.weights import (
    ExternalData,
    blob_values,
    conv_bias,
    conv_table,
    describe,
    inner_product_table,
    norm_affine,
)

RNG = np.random.default_rng(16)


# -- an independent encoder ----------------------------------------------------------------------
def pack_msb(values: np.ndarray, bits: int) -> bytes:
    """Unsigned ``bits``-bit fields, most significant bit first, zero-padded to a byte."""
    s = "".join(format(int(v), f"0{bits}b") for v in values)
    s += "0" * (-len(s) % 8)
    return bytes(int(s[i : i + 8], 2) for i in range(0, len(s), 8))


def header(dims: tuple[int, ...], int32: bool = False) -> bytes:
    width = "<u4" if int32 else "<u2"
    return bytes([len(dims)]) + np.asarray(dims, width).tobytes()


def index_table(codes: np.ndarray, bits: int, dims: tuple[int, ...], int32: bool = False) -> bytes:
    """Type 1 with the linear table of all ``2**bits`` codes (what the converter writes)."""
    half = 1 << (bits - 1)
    samples = np.arange(-half, half).astype(np.int8).tobytes()
    count = bytes([(1 << bits) & 0xFF])
    indexes = pack_msb(codes.ravel().astype(np.int64) + half, bits)
    return header(dims, int32) + count + samples + indexes


def quantize(w: np.ndarray, bits: int, blocks: int, asym: bool):
    """Per (row, block) codes and alpha as the converter computes them, in float64."""
    rows = w.shape[0]
    runs = w.reshape(rows * blocks, -1).astype(np.float64)
    top = (1 << (bits - 1)) - 1
    if asym:
        lo, hi = runs.min(1), runs.max(1)
        scale = (hi - lo) / (2 * top + 1)
        codes = np.clip(np.round((runs - lo[:, None]) / scale[:, None]) - top - 1, -top - 1, top)
        alpha = np.stack([lo, scale], 1).ravel()
    else:
        scale = np.abs(runs).max(1) / top
        codes = np.clip(np.round(runs / scale[:, None]), -top, top)
        alpha = scale
    return codes.astype(np.int8).reshape(w.shape), alpha.astype(np.float32)


def expected(codes: np.ndarray, alpha: np.ndarray, bits: int, asym: bool, rows: int):
    runs = codes.reshape(alpha.size // (2 if asym else 1), -1).astype(np.float32)
    if asym:
        lo, scale = alpha[0::2], alpha[1::2]
        off = lo - np.float32(-(1 << (bits - 1))) * scale
        return (runs * scale[:, None] + off[:, None]).reshape(codes.shape)
    return (runs * alpha[:, None]).reshape(codes.shape)


# -- ops built in code ---------------------------------------------------------------------------
def conv_op(oc: int, ic: int, k: int, quan=None, weight=None, bias=None, external=None,
            op_type: int = OpType.Convolution) -> OpDef:  # fmt: skip
    common = Convolution2DCommonT()
    common.outputCount, common.inputCount, common.kernelX, common.kernelY = oc, ic, k, k
    common.group = 1
    p = Convolution2DT()
    p.common, p.quanParameter = common, quan
    p.weight = None if weight is None else np.asarray(weight, np.float32).ravel()
    p.bias = None if bias is None else np.asarray(bias, np.float32)
    p.external = None if external is None else np.asarray(external, np.int64)
    return OpDef(0, op_type, "w0", (0,), (1,), p, OpParameter.Convolution2D,
                 DimensionFormat.NC4HW4)  # fmt: skip


def quan(buf: bytes | None, alpha: np.ndarray | None, kind: int = 1, **fields) -> IDSTQuanT:
    q = IDSTQuanT()
    q.type, q.quantScale = kind, 1.0
    q.buffer = None if buf is None else np.frombuffer(buf, np.int8).copy()
    q.alpha = alpha
    for k, v in fields.items():
        setattr(q, k, v)
    return q


def error(fn, *args) -> MNNError:
    with pytest.raises(MNNError) as info:
        fn(*args)
    return info.value


# -- bit unpacking -------------------------------------------------------------------------------
@pytest.mark.parametrize("bits", range(1, 9))
@pytest.mark.parametrize("count", [1, 7, 8, 9, 33, 1000])
def test_unpack_bits_matches_bit_strings(bits: int, count: int) -> None:
    values = RNG.integers(0, 1 << bits, count)
    buf = np.frombuffer(pack_msb(values, bits), np.uint8)
    np.testing.assert_array_equal(unpack_bits(buf, count, bits), values)


# -- Convolution quanParameter -------------------------------------------------------------------
@pytest.mark.parametrize("bits", range(2, 9))
@pytest.mark.parametrize("asym", [False, True])
def test_index_table_every_width(bits: int, asym: bool) -> None:
    oc, ic, k = 5, 3, 3
    w = RNG.standard_normal((oc, ic, k, k)).astype(np.float32)
    codes, alpha = quantize(w, bits, 1, asym)
    extra = {"readType": oc, "aMin": -(1 << (bits - 1))} if asym else {}
    op = conv_op(oc, ic, k, quan(index_table(codes, bits, (oc, ic * k * k)), alpha, **extra))
    table = conv_table(op)
    assert table.shape == (oc, ic, k, k) and table.bits == bits and table.blocks == 1
    assert (table.offset is not None) == asym
    np.testing.assert_array_equal(table.codes, codes)
    want = expected(codes, alpha, bits, asym, oc)
    np.testing.assert_allclose(table.floats(), want, rtol=1e-6, atol=1e-6)
    step = alpha[1::2] if asym else alpha
    assert np.all(np.abs(table.floats() - w) <= step[:, None, None, None] * 0.5 + 1e-5)


@pytest.mark.parametrize("asym", [False, True])
@pytest.mark.parametrize("bits", [4, 8])
def test_block_wise(asym: bool, bits: int) -> None:
    oc, ic, blocks = 6, 64, 2  # --weightQuantBlock 32 on a 1x1 convolution
    w = RNG.standard_normal((oc, ic, 1, 1)).astype(np.float32)
    codes, alpha = quantize(w, bits, blocks, asym)
    extra = {"readType": oc * blocks, "aMin": -(1 << (bits - 1))} if asym else {}
    buf = index_table(codes, bits, (oc * blocks, ic // blocks))
    table = conv_table(conv_op(oc, ic, 1, quan(buf, alpha, **extra)))
    assert table.blocks == blocks and table.block == 32 and table.scale.shape == (oc, blocks)
    np.testing.assert_allclose(
        table.floats(), expected(codes, alpha, bits, asym, oc), rtol=1e-6, atol=1e-6
    )


def test_old_asymmetric_files_use_minus_128() -> None:
    """aMin 0 (files before aMin was written): the codes start at -128."""
    w = RNG.standard_normal((3, 8, 1, 1)).astype(np.float32)
    codes, alpha = quantize(w, 8, 1, True)
    op = conv_op(3, 8, 1, quan(index_table(codes, 8, (3, 8)), alpha, readType=3, aMin=0))
    np.testing.assert_allclose(conv_table(op).floats(), expected(codes, alpha, 8, True, 3),
                               rtol=1e-6, atol=1e-6)  # fmt: skip


def test_fp16_scales_shape_int32_and_quant_scale() -> None:
    w = RNG.standard_normal((4, 2, 3, 3)).astype(np.float32)
    codes, alpha = quantize(w, 8, 1, False)
    half = alpha.astype(np.float16)
    q = quan(index_table(codes, 8, (4, 18), int32=True), None, shapeInt32=True,
             scaleStorage=1, alphaFp16=half.view(np.uint16), quantScale=0.5)  # fmt: skip
    got = conv_table(conv_op(4, 2, 3, q)).floats()
    want = codes.reshape(4, -1) * (half.astype(np.float32) * np.float32(0.5))[:, None]
    np.testing.assert_allclose(got, want.reshape(w.shape), rtol=1e-6)


def test_fp16_weights() -> None:
    w = RNG.standard_normal((4, 3, 3, 3)).astype(np.float32)
    q = quan(w.astype("<f2").tobytes(), None, kind=3)
    table = conv_table(conv_op(4, 3, 3, q, bias=np.arange(4)))
    assert table.bits == 16 and table.stored_bytes == w.size * 2
    np.testing.assert_array_equal(table.floats(), w.astype(np.float16).astype(np.float32))


def test_raw_int8_and_a_non_linear_table() -> None:
    codes = RNG.integers(-128, 128, (3, 4, 1, 1)).astype(np.int8)
    alpha = np.array([0.5, 0.25, 2.0], np.float32)
    got = conv_table(conv_op(3, 4, 1, quan(codes.tobytes(), alpha, kind=4))).floats()
    np.testing.assert_array_equal(got, codes * alpha[:, None, None, None])
    samples = np.array([-100, -3, 7, 90], np.int8)  # an old-style table of 4 values, 2-bit indexes
    idx = RNG.integers(0, 4, 12)
    buf = header((3, 4)) + bytes([4]) + samples[[2, 0, 3, 1]].tobytes() + pack_msb(idx, 2)
    table = conv_table(conv_op(3, 4, 1, quan(buf, alpha)))
    np.testing.assert_array_equal(table.codes.ravel(), samples[idx])  # samples sorted first
    assert table.bits == 8


def sparse_table(codes: np.ndarray, zero: np.ndarray, step_bits: int, dims) -> bytes:
    """Type 2: runs of each row's zero code skipped, steps of at most ``2**step_bits - 1``."""
    flat, zeros = codes.ravel(), np.repeat(zero, codes.size // zero.size)
    values = np.unique(np.append(flat, zero))
    steps, vals, prev = [], [], 0
    for i, (v, z) in enumerate(zip(flat, zeros, strict=True)):
        if v != z or i - prev >= (1 << step_bits) - 1:
            steps.append(i - prev), vals.append(v)
            prev = i
    vidx = np.searchsorted(values, vals)
    vbits = max(1, (values.size - 1).bit_length())
    return (header(dims) + np.uint32(len(steps)).tobytes() + bytes([step_bits])
            + pack_msb(steps, step_bits) + bytes([values.size]) + values.astype(np.int8).tobytes()
            + pack_msb(vidx, vbits))  # fmt: skip


@pytest.mark.parametrize("asym", [False, True])
@pytest.mark.parametrize("step_bits", [2, 3, 8])
def test_sparse_table(asym: bool, step_bits: int) -> None:
    oc, n = 4, 40
    w = RNG.standard_normal((oc, n, 1, 1)).astype(np.float32) * (RNG.random((oc, n, 1, 1)) < 0.2)
    codes, alpha = quantize(w, 4, 1, asym)
    zero = np.zeros(oc, np.int64)
    if asym:  # each row's zero code: round(-min / scale) - 8, C rounding (half away from 0)
        lo, sc = alpha[0::2].astype(np.float64), alpha[1::2].astype(np.float64)
        zero = np.floor(-lo / sc + 0.5).astype(np.int64) - 8
    extra = {"readType": oc, "aMin": -8} if asym else {}
    buf = sparse_table(codes, zero, step_bits, (oc, n))
    table = conv_table(conv_op(oc, n, 1, quan(buf, alpha, kind=2, **extra)))
    np.testing.assert_array_equal(table.codes, codes)
    np.testing.assert_allclose(table.floats(), expected(codes, alpha, 4, asym, oc), atol=1e-6)


def test_sparse_float_weight() -> None:
    w = np.zeros(24, np.float32)
    w[[1, 5, 23]] = [1.5, -2.0, 3.0]
    q = IDSTQuanT()
    q.index, q.alpha, q.weightSize = np.array([1, 5, 23], np.uint32), w[[1, 5, 23]], 24
    np.testing.assert_array_equal(conv_table(conv_op(2, 3, 2, q)).floats().ravel(), w)


def test_deconvolution_rows_are_output_count_runs() -> None:
    """The converter cuts a Deconvolution's [Cin, Cout, k, k] weight into Cout runs."""
    cin, cout, k = 6, 4, 2
    w = RNG.standard_normal((cin, cout, k, k)).astype(np.float32)
    codes, alpha = quantize(w.reshape(cout, -1), 8, 1, False)
    op = conv_op(cout, cin, k, quan(index_table(codes, 8, (cout, cin * k * k)), alpha),
                 op_type=OpType.Deconvolution)  # fmt: skip
    table = conv_table(op, (cin, cout, k, k))
    assert table.shape == (cout, cin * k * k) and table.rows == cout
    np.testing.assert_allclose(table.floats().reshape(w.shape),
                               (codes * alpha[:, None]).reshape(w.shape), rtol=1e-6)  # fmt: skip


def test_inner_product_quantized() -> None:
    w = RNG.standard_normal((5, 7)).astype(np.float32)
    codes, alpha = quantize(w, 8, 1, False)
    p = InnerProductT()
    p.outputCount, p.quanParameter = 5, quan(index_table(codes, 8, (5, 7)), alpha)
    op = OpDef(0, OpType.InnerProduct, "ip", (0,), (1,), p, OpParameter.InnerProduct,
               DimensionFormat.NCHW)  # fmt: skip
    np.testing.assert_allclose(inner_product_table(op, 7).floats(), codes * alpha[:, None])


# -- constants and external files ----------------------------------------------------------------
def blob_op(data_type: int, dims, **fields) -> OpDef:
    b = BlobT()
    b.dataType, b.dims, b.dataFormat = data_type, np.asarray(dims, np.int32), 0
    for k, v in fields.items():
        setattr(b, k, v)
    return OpDef(0, OpType.Const, "c", (), (0,), b, OpParameter.Blob, DimensionFormat.NCHW)


def test_half_and_bfloat16_constants() -> None:
    v = RNG.standard_normal((3, 5)).astype(np.float32)
    half = blob_op(DataType.DT_HALF, (3, 5), uint8s=v.astype("<f2").view(np.uint8))
    np.testing.assert_array_equal(blob_values(half), v.astype(np.float16).astype(np.float32))
    top = (v.view(np.uint32) >> 16).astype("<u2")
    bf = blob_op(DataType.DT_BFLOAT16, (3, 5), uint8s=top.view(np.uint8))
    np.testing.assert_array_equal(blob_values(bf), (top.astype(np.uint32) << 16).view(np.float32))


def test_external_tables(tmp_path) -> None:
    """Convolution (quantized: buffer, alpha, bias, index), constants and LayerNorm."""
    w = RNG.standard_normal((3, 4, 1, 1)).astype(np.float32)
    codes, alpha = quantize(w, 4, 1, False)
    buf = index_table(codes, 4, (3, 4))
    bias = np.array([1, 2, 3], np.float32)
    const = RNG.standard_normal(6).astype(np.float32)
    gamma, beta = np.ones(4, np.float32) * 2, np.arange(4, dtype=np.float32)
    blob = b"junk" + buf + alpha.tobytes() + bias.tobytes() + const.tobytes()
    blob += gamma.tobytes() + beta.tobytes()
    path = tmp_path / "m.mnn.weight"
    path.write_bytes(blob)
    for source in (path, blob):
        ext = ExternalData(source)
        op = conv_op(3, 4, 1, quan(None, None), external=[4, len(buf), 12, 12, 0])
        op.external_data = ext
        np.testing.assert_allclose(conv_table(op).floats(), codes * alpha[:, None, None, None])
        np.testing.assert_array_equal(conv_bias(op), bias)
        c = blob_op(DataType.DT_FLOAT, (2, 3), external=np.array([4 + len(buf) + 24, 24]))
        c.external_data = ext
        np.testing.assert_array_equal(blob_values(c), const.reshape(2, 3))
        ln = LayerNormT()
        ln.external = np.array([4 + len(buf) + 48, 16, 16])
        lop = OpDef(0, OpType.LayerNorm, "ln", (0,), (1,), ln, OpParameter.LayerNorm,
                    DimensionFormat.NCHW, ext)  # fmt: skip
        g, b = norm_affine(lop)
        np.testing.assert_array_equal(g, gamma) and np.testing.assert_array_equal(b, beta)


# -- corrupted tables ----------------------------------------------------------------------------
def _good() -> tuple[np.ndarray, np.ndarray, bytes]:
    w = RNG.standard_normal((3, 8, 1, 1)).astype(np.float32)
    codes, alpha = quantize(w, 4, 1, False)
    return codes, alpha, index_table(codes, 4, (3, 8))


@pytest.mark.parametrize("cut", [0, 1, 3, 5, 10, 21, -1])
def test_truncated_index_table(cut: int) -> None:
    _, alpha, buf = _good()
    err = error(conv_table, conv_op(3, 8, 1, quan(buf[:cut], alpha)))
    assert err.code == ErrorCode.INVALID_VALUE and "'w0'" in str(err)


@pytest.mark.parametrize(
    "mutate",
    [
        lambda b: bytes([9]) + b[1:],  # 9 dims
        lambda b: bytes([0]) + b[1:],  # no dims
        lambda b: b[:1] + np.array([3, 9], "<u2").tobytes() + b[5:],  # 27 weights, not 24
        lambda b: b + b"\x00",  # a byte left over
    ],
)
def test_inconsistent_headers(mutate) -> None:
    _, alpha, buf = _good()
    err = error(conv_table, conv_op(3, 8, 1, quan(mutate(buf), alpha)))
    assert err.code == ErrorCode.INVALID_VALUE


def test_wrong_alpha_counts_and_index_past_samples() -> None:
    codes, alpha, buf = _good()
    for bad in (alpha[:2], np.zeros(0, np.float32), np.ones(5, np.float32)):
        assert error(conv_table, conv_op(3, 8, 1, quan(buf, bad))).code == ErrorCode.INVALID_VALUE
    asym = quan(buf, np.ones(5, np.float32), readType=3, aMin=-8)
    assert error(conv_table, conv_op(3, 8, 1, asym)).code == ErrorCode.INVALID_VALUE
    # three samples need 2-bit indexes; index 3 points past them
    bad_idx = header((3, 8)) + bytes([3]) + bytes([0, 1, 2]) + pack_msb(np.full(24, 3), 2)
    err = error(conv_table, conv_op(3, 8, 1, quan(bad_idx, alpha)))
    assert err.code == ErrorCode.INVALID_VALUE and "index 3" in str(err)
    for kind, data in ((3, b"\x00" * 47), (4, b"\x00" * 23), (7, b"\x00" * 24)):
        assert error(conv_table, conv_op(3, 8, 1, quan(data, alpha, kind=kind))).code == 5


def test_sparse_steps_past_the_end() -> None:
    codes = np.zeros((2, 8, 1, 1), np.int8)
    codes[1, 7] = 3
    buf = bytearray(sparse_table(codes, np.zeros(2, np.int64), 8, (2, 8)))
    buf[10] = 0xFF  # the first step jumps to weight 255 of 16
    q = quan(bytes(buf), np.ones(2, np.float32), kind=2)
    assert error(conv_table, conv_op(2, 8, 1, q)).code == ErrorCode.INVALID_VALUE


def test_external_spans_are_checked(tmp_path) -> None:
    path = tmp_path / "w.weight"
    path.write_bytes(b"\x00" * 64)
    op = conv_op(2, 4, 1, external=[40, 32, 8])
    op.external_data = ExternalData(path)
    err = error(conv_table, op)
    assert err.code == ErrorCode.INVALID_VALUE and "w.weight" in str(err) and "'w0'" in str(err)
    op = conv_op(2, 4, 1, external=[-1, 32, 8])
    assert error(conv_table, op).code == ErrorCode.INVALID_VALUE
    missing = conv_op(2, 4, 1, external=[0, 32, 8])
    assert error(conv_table, missing).code == ErrorCode.FILE_NOT_EXIST
    assert error(ExternalData, tmp_path / "nope.weight").code == ErrorCode.FILE_NOT_EXIST


def test_inner_product_execution_with_fp16_weights() -> None:
    """The CPU InnerProduct runs a quanParameter weight (decoded once) like its float copy."""
    from tests.helpers import run_op

    n, k = 6, 10
    w = RNG.standard_normal((n, k)).astype(np.float32)
    p = InnerProductT()
    p.outputCount, p.biasTerm = n, 1
    p.bias = RNG.standard_normal(n).astype(np.float32)
    p.quanParameter = quan(w.astype("<f2").tobytes(), None, kind=3)
    x = RNG.standard_normal((3, k)).astype(np.float32)
    got = run_op(OpType.InnerProduct, [x], p, OpParameter.InnerProduct, fmt=DimensionFormat.NCHW)
    want = x @ w.astype(np.float16).astype(np.float32).T + p.bias
    np.testing.assert_allclose(got[0], want, rtol=1e-5, atol=1e-5)


def test_describe() -> None:
    w = RNG.standard_normal((6, 64, 1, 1)).astype(np.float32)
    codes, alpha = quantize(w, 4, 2, True)
    buf = index_table(codes, 4, (12, 32))
    op = conv_op(6, 64, 1, quan(buf, alpha, readType=12, aMin=-8))
    text = describe(op)
    want = f"weight: int4 [6, 64, 1, 1] asymmetric, block 32 (2 per row), {len(buf) + 96} bytes"
    assert text == want
    half = conv_op(2, 3, 1, quan(np.zeros(6, "<f2").tobytes(), None, kind=3))
    assert describe(half) == "weight: fp16 [2, 3, 1, 1], 12 bytes"
    const = blob_op(DataType.DT_HALF, (2, 2), uint8s=np.zeros(8, np.uint8))
    assert describe(const) == "data: fp16 [2, 2], 8 bytes"
    assert describe(blob_op(DataType.DT_INT32, (1,), int32s=np.zeros(1, np.int32))) is None
