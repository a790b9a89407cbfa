"""Pooling / global Pooling3D: CPU execution vs the reference, reference vs ORT and MNN."""

from __future__ import annotations

import numpy as np
import pytest

from mnnpy._schema.MNN.AvgPoolCountType import AvgPoolCountType as Count
from mnnpy._schema.MNN.Pool import PoolT
from mnnpy._schema.MNN.Pool3D import Pool3DT
from mnnpy._schema.MNN.PoolPadType import PoolPadType
from mnnpy._schema.MNN.PoolType import PoolType
from mnnpy.backend.cpu.kernels import gemm as G
from mnnpy.backend.cpu.kernels import pool as K
from mnnpy.errors import ErrorCode, MNNError
from mnnpy.net import OpDef, OpParameter, OpType
from mnnpy.ops import reference_of
from mnnpy.tensor_format import DimensionFormat
from tests.helpers import assert_close, make_single_op_net, run_mnn, run_op

MAX, AVG = PoolType.MAXPOOL, PoolType.AVEPOOL


def pool(kind: int = MAX, k: int = 3, s: int = 2, **kw: object) -> PoolT:
    args = dict(type=kind, kernelX=k, kernelY=k, strideX=s, strideY=s, ceilModel=False)
    return PoolT(**{**args, **kw})


def param_type(param: object) -> int:
    return OpParameter.Pool3D if isinstance(param, Pool3DT) else OpParameter.Pool


def op_type(param: object) -> int:
    return OpType.Pooling3D if isinstance(param, Pool3DT) else OpType.Pooling


def reference(param: object, x: np.ndarray) -> np.ndarray:
    op = OpDef(0, op_type(param), "op", (0,), (1,), param, param_type(param), DimensionFormat.NHWC)
    return reference_of(op.type)(op, [x])[0]


def check(x: np.ndarray, param: object) -> np.ndarray:
    """1 and 2 threads give identical results, both close to the reference."""
    one, two = (
        run_op(op_type(param), [x], param, param_type(param), num_thread=t)[0] for t in (1, 2)
    )
    assert np.array_equal(one, two)
    assert_close(one, reference(param, x))
    return one


def data(shape: tuple[int, ...], seed: int = 1) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


@pytest.fixture(params=G.available_isas())
def isa(request: pytest.FixtureRequest):
    """Every kernel ISA this CPU runs (the portable C one too), restored to the best after."""
    G.set_isa(request.param)
    yield request.param
    G.set_isa("best")


@pytest.mark.parametrize("c", [1, 3, 4, 5, 17])
@pytest.mark.parametrize("kind", [MAX, AVG])
def test_channels(c: int, kind: int, isa: str) -> None:
    check(data((2, c, 7, 9)), pool(kind, padX=1, padY=1))


@pytest.mark.parametrize("s", [1, 2, 3])
@pytest.mark.parametrize("kind", [MAX, AVG])
def test_wide_rows_every_isa_identical(s: int, kind: int) -> None:
    """Rows wide enough for the kernels' several-windows-at-once path and its remainder: every
    ISA gives the same bits, NaN taps included (``m = p > m ? p : m`` from the window's first
    tap: a NaN propagates only from there)."""
    x = data((2, 6, 5, 29))
    x[0, 1, 2, 7] = x[1, 4, 0, 20] = x[0, 1, 0, 0] = np.nan  # the last: a first tap
    param = pool(kind, k=3, s=s, padX=1, padY=1)
    outs = []
    for name in G.available_isas():
        G.set_isa(name)
        try:
            outs.append(run_op(op_type(param), [x], param, param_type(param))[0])
        finally:
            G.set_isa("best")
    assert all(np.array_equal(outs[0], o, equal_nan=True) for o in outs[1:])
    assert np.isnan(outs[0]).any()
    clean = np.nan_to_num(x, nan=-10.0)
    check(clean, param)


CASES = {
    "no_pad": dict(k=2, s=2),
    "pads_vector": dict(pads=[1, 1, 1, 1], padX=1, padY=1),  # ONNX style: DEFAULT = exclude
    "pads_asymmetric": dict(pads=[0, 1, 2, 1]),
    "padxy_include": dict(padX=1, padY=1),  # no pads vector: DEFAULT = include
    "include_asymmetric": dict(pads=[0, 1, 2, 1], countType=Count.INCLUDE_PADDING),
    "exclude_padxy": dict(padX=1, padY=1, countType=Count.EXCLUDE_PADDING),
    "ceil": dict(k=2, s=2, ceilModel=True),
    "ceil_window_in_padding": dict(k=3, s=2, padX=1, padY=1, ceilModel=True),
    "same": dict(padType=PoolPadType.SAME, s=2),
    "valid": dict(padType=PoolPadType.VALID, k=2, s=3),
    "kernel_larger_than_input": dict(k=12, s=1),
    "rect": dict(kernelX=1, kernelY=4, strideX=1, strideY=3),
}


@pytest.mark.parametrize("name", sorted(CASES))
@pytest.mark.parametrize("kind", [MAX, AVG])
def test_params(name: str, kind: int, isa: str) -> None:
    check(data((2, 5, 7, 8)), pool(kind, **CASES[name]))


@pytest.mark.parametrize("kind", [MAX, AVG])
def test_global(kind: int) -> None:
    x = data((2, 17, 5, 7))
    out = check(x, PoolT(type=kind, isGlobal=True))
    expected = x.max(axis=(2, 3)) if kind == MAX else x.mean(axis=(2, 3))
    assert_close(out, expected[:, :, None, None])
    out3d = check(x, Pool3DT(type=kind, isGlobal=True))
    assert np.array_equal(out, out3d)


@pytest.mark.parametrize("hw", [(1, 1), (1, 7), (5, 7), (8, 8), (56, 57)])
def test_global_average_every_isa_identical(hw: tuple[int, int]) -> None:
    """Global average pooling (8 interleaved sums per plane, remainders included): the same bits
    in every ISA, 1 and 2 threads, close to NumPy's mean."""
    x = data((2, 6, *hw), seed=hw[0])
    param = PoolT(type=AVG, isGlobal=True)
    outs = []
    for name in G.available_isas():
        G.set_isa(name)
        try:
            outs.append(check(x, param))
        finally:
            G.set_isa("best")
    assert all(np.array_equal(outs[0], o) for o in outs[1:])
    assert_close(outs[0], x.mean(axis=(2, 3), keepdims=True))


def test_ceil_mode_sizes() -> None:
    x = data((1, 1, 7, 7))
    assert check(x, pool(MAX, k=2, s=2, ceilModel=True)).shape == (1, 1, 4, 4)
    assert check(x, pool(MAX, k=2, s=2, ceilModel=False)).shape == (1, 1, 3, 3)
    # MNN keeps a last window that starts in the padding: UP_DIV(7 + 2 - 3, 2) + 1 = 4
    assert check(x, pool(AVG, k=3, s=2, padX=1, padY=1, ceilModel=True)).shape == (1, 1, 4, 4)


def test_count_types_differ() -> None:
    x = np.ones((1, 1, 4, 4), np.float32)
    include = check(x, pool(AVG, k=3, s=1, padX=1, padY=1))
    exclude = check(x, pool(AVG, k=3, s=1, pads=[1, 1, 1, 1]))
    assert include[0, 0, 0, 0] == pytest.approx(4 / 9) and include[0, 0, 1, 1] == 1
    assert np.all(exclude == 1)


# -- reference vs independent implementations -------------------------------------------------
def ort_pool(x: np.ndarray, node_type: str, **attrs: object) -> np.ndarray:
    pytest.importorskip("onnx")
    ort = pytest.importorskip("onnxruntime")
    from onnx import TensorProto, helper

    node = helper.make_node(node_type, ["x"], ["y"], **attrs)
    graph = helper.make_graph(
        [node],
        "pool",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(x.shape))],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return sess.run(None, {"x": x})[0]


ORT_CASES = [  # (MNN pool, ONNX node, ONNX attributes): cases where both define the same thing
    (pool(MAX, pads=[1, 0, 1, 2]), "MaxPool", dict(pads=[1, 0, 1, 2])),
    (pool(AVG, pads=[1, 1, 1, 1]), "AveragePool", dict(pads=[1, 1, 1, 1])),
    (pool(AVG, padX=1, padY=1), "AveragePool", dict(pads=[1, 1, 1, 1], count_include_pad=1)),
    (pool(MAX, k=2, ceilModel=True), "MaxPool", dict(ceil_mode=1)),
    (PoolT(type=AVG, isGlobal=True), "GlobalAveragePool", {}),
    (PoolT(type=MAX, isGlobal=True), "GlobalMaxPool", {}),
]


@pytest.mark.parametrize("param, node_type, attrs", ORT_CASES)
def test_reference_matches_onnxruntime(param: PoolT, node_type: str, attrs: dict) -> None:
    x = data((2, 3, 7, 8))
    if not param.isGlobal:
        attrs = dict(
            attrs,
            kernel_shape=[param.kernelY, param.kernelX],
            strides=[param.strideY, param.strideX],
        )
    assert_close(reference(param, x), ort_pool(x, node_type, **attrs))


MNN_CASES = [
    "ceil_window_in_padding",
    "include_asymmetric",
    "padxy_include",
    "pads_asymmetric",
    "same",
    "valid",
    "kernel_larger_than_input",
]


@pytest.mark.parametrize("name", MNN_CASES)
@pytest.mark.parametrize("kind", [MAX, AVG])
def test_reference_matches_mnn(name: str, kind: int, tmp_path: object) -> None:
    x = data((1, 3, 7, 8))
    param = pool(kind, **CASES[name])
    model = make_single_op_net(OpType.Pooling, [x], param, OpParameter.Pool)
    assert_close(reference(param, x), run_mnn(model, x, tmp_path))


# -- errors -----------------------------------------------------------------------------------
def error_code(
    param: object, x: np.ndarray, fmt: DimensionFormat = DimensionFormat.NC4HW4
) -> ErrorCode:
    with pytest.raises(MNNError) as info:
        run_op(op_type(param), [x], param, param_type(param), fmt=fmt)
    return info.value.code


@pytest.mark.parametrize("kw", [dict(k=0), dict(s=-1), dict(padType=PoolPadType.VALID, padX=1)])
def test_bad_params(kw: dict) -> None:
    assert error_code(pool(**kw), data((1, 3, 5, 5))) == ErrorCode.COMPUTE_SIZE_ERROR


def test_not_supported() -> None:
    """The refusal names the op type, the op and the refused parameter.

    (An NCHW input is no refusal: it runs converted to NC4HW4, ``tests/unit/test_format_wrap``.)
    """
    x = data((1, 3, 5, 5))
    with pytest.raises(MNNError) as info:
        run_op(OpType.Pooling, [x.astype(np.int32)], pool(AVG), OpParameter.Pool)
    msg = str(info.value)
    assert info.value.code == ErrorCode.NOT_SUPPORT
    assert "Pooling" in msg and "'op'" in msg and "dtype=int32" in msg, msg
    non_global = Pool3DT(type=MAX, kernels=[1, 2, 2], strides=[1, 2, 2], pads=[0, 0, 0])
    assert error_code(non_global, x) == ErrorCode.COMPUTE_SIZE_ERROR  # needs 5-D


def test_kernel_checks_buffers() -> None:
    src, dst = np.zeros(4 * 25, np.float32), np.zeros(4 * 4, np.float32)
    K.max_pool(src, dst, (1, 3, 5, 5, 2, 2), (3, 3, 2, 2, 0, 0))
    with pytest.raises(ValueError, match="too small"):
        K.avg_pool(src[:-1], dst, (1, 3, 5, 5, 2, 2), (3, 3, 2, 2, 0, 0), True)
    with pytest.raises(ValueError, match="positive"):
        K.max_pool(src, dst, (1, 3, 5, 5, 2, 2), (3, 3, 0, 2, 0, 0))


def test_padding_lanes_written_as_zero() -> None:
    src = np.full(4 * 25, np.nan, np.float32)
    src.reshape(25, 4)[:, :3] = 1  # channel 3 is a padding lane holding garbage
    dst = np.full(4 * 4, 7, np.float32)
    K.avg_pool(src, dst, (1, 3, 5, 5, 2, 2), (3, 3, 2, 2, 0, 0), False)
    assert np.array_equal(dst.reshape(4, 4), np.tile([1, 1, 1, 0], (4, 1)).astype(np.float32))


# -- 1-D and 3-D pooling, ONNX's absent strides -------------------------------------------------
def test_zero_stride_means_one() -> None:
    """MNN's converter writes stride 0 for ONNX's default (1); MNN divides by it, mnnpy not."""
    x = data((2, 3, 6, 5))
    assert np.array_equal(check(x, pool(AVG, k=2, s=0)), check(x, pool(AVG, k=2, s=1)))


@pytest.mark.parametrize("c", [1, 5, 17])
@pytest.mark.parametrize("kind", [MAX, AVG])
def test_1d(c: int, kind: int) -> None:
    x = data((2, c, 11))
    out = check(x, pool(kind, kernelY=3, kernelX=1, strideY=2, strideX=0, pads=[1, 0, 1, 0]))
    xp = np.pad(x, ((0, 0), (0, 0), (1, 1)), constant_values=np.nan)
    win = np.stack([xp[:, :, i : i + 11 : 2] for i in range(3)])  # 6 windows of 3
    expected = np.nanmax(win, axis=0) if kind == MAX else np.nanmean(win, axis=0)
    assert_close(out, expected)


def naive_pool3d(x: np.ndarray, k: list, s: list, pad: list, is_max: bool) -> np.ndarray:
    """MNN's GeometryPooling3D: (H, W) windows count padding (padX / padY, CAFFE default),
    depth windows do not; max ignores padding."""
    n, c, *dims = x.shape
    outs = [(d + 2 * p - kk) // ss + 1 for d, kk, ss, p in zip(dims, k, s, pad, strict=True)]
    out = np.zeros((n, c, *outs))
    for idx in np.ndindex(*outs):
        lo = [i * ss - p for i, ss, p in zip(idx, s, pad, strict=True)]
        sl = [slice(max(v, 0), min(v + kk, d)) for v, kk, d in zip(lo, k, dims, strict=True)]
        win = x[:, :, sl[0], sl[1], sl[2]]
        if is_max:
            out[(slice(None), slice(None), *idx)] = win.max(axis=(2, 3, 4))
            continue
        cnt_d = sl[0].stop - sl[0].start
        cnt_hw = np.prod(
            [
                min(v + kk, d + p) - v
                for v, kk, d, p in zip(lo[1:], k[1:], dims[1:], pad[1:], strict=True)
            ]
        )
        out[(slice(None), slice(None), *idx)] = win.sum(axis=(2, 3, 4)) / (cnt_d * cnt_hw)
    return out.astype(np.float32)


POOL3D = {
    "default": dict(kernels=[2, 2, 2]),  # ONNX strides / pads absent
    "strided": dict(kernels=[3, 2, 3], strides=[2, 1, 2], pads=[0, 0, 0]),
    "padded": dict(kernels=[3, 3, 2], strides=[2, 2, 1], pads=[1, 1, 1]),
}


@pytest.mark.parametrize("c", [1, 3, 4, 5, 17])
@pytest.mark.parametrize("name", sorted(POOL3D))
@pytest.mark.parametrize("kind", [MAX, AVG])
def test_3d(c: int, name: str, kind: int) -> None:
    kw = POOL3D[name]
    x = data((2, c, 5, 6, 7), seed=c)
    out = check(x, Pool3DT(type=kind, padType=PoolPadType.CAFFE, **kw))
    k, s, p = kw["kernels"], kw.get("strides", [1, 1, 1]), kw.get("pads", [0, 0, 0])
    assert_close(out, naive_pool3d(x, k, s, p, kind == MAX))


def test_3d_global_on_5d() -> None:
    x = data((2, 5, 3, 4, 5))
    out = check(x, Pool3DT(type=AVG, isGlobal=True))
    assert_close(out, x.mean(axis=(2, 3, 4), keepdims=True))


@pytest.mark.parametrize("c", [1, 5])
def test_max_indices(c: int) -> None:
    """A second output holds MNN's plane-local index y * W + x of each (first) maximum."""
    x = data((2, c, 7, 6), seed=c)
    x[0, 0, :2, :2] = 9.0  # ties: the first in row-major order wins
    param = pool(MAX, k=3, s=2, pads=[1, 1, 1, 1])
    outs = [
        run_op(OpType.Pooling, [x], param, OpParameter.Pool, num_outputs=2, num_thread=t)
        for t in (1, 2)
    ]
    assert all(np.array_equal(a, b) for a, b in zip(*outs, strict=True))
    values, indices = outs[0]
    assert indices.dtype == np.int32
    flat = x.reshape(2, c, -1)
    assert_close(np.take_along_axis(flat, indices.reshape(2, c, -1), -1).reshape(values.shape),
                 values)  # fmt: skip
    assert indices[0, 0, 0, 0] == 0
    assert_close(values, reference(param, x))
    op = OpDef(0, OpType.Pooling, "op", (0,), (1, 2), param, OpParameter.Pool, DimensionFormat.NHWC)
    assert np.array_equal(reference_of(OpType.Pooling)(op, [x])[1], indices)


@pytest.mark.parametrize("dtype", [np.uint8, np.int8])
@pytest.mark.parametrize("c", [1, 5])
def test_max_small_ints_exact(dtype: type, c: int) -> None:
    info = np.iinfo(dtype)
    x = np.random.default_rng(c).integers(info.min, info.max, (2, c, 7, 6), endpoint=True)
    x = x.astype(dtype)
    param = pool(MAX, k=3, s=2, pads=[1, 1, 1, 1])
    one, two = (
        run_op(OpType.Pooling, [x], param, OpParameter.Pool, num_thread=t)[0] for t in (1, 2)
    )
    assert one.dtype == dtype and np.array_equal(one, two)
    xp = np.pad(x.astype(np.int64), ((0, 0), (0, 0), (1, 1), (1, 1)), constant_values=info.min)
    expected = np.stack(
        [xp[:, :, i : i + 7 : 2, j : j + 6 : 2] for i in range(3) for j in range(3)]
    )
    np.testing.assert_array_equal(one, expected.max(axis=0))


def test_average_of_ints_not_supported() -> None:
    x = np.zeros((1, 3, 5, 5), np.uint8)
    with pytest.raises(MNNError) as info:
        run_op(OpType.Pooling, [x], pool(AVG), OpParameter.Pool)
    assert info.value.code == ErrorCode.NOT_SUPPORT and "dtype=uint8" in str(info.value)
