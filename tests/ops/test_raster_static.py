"""Raster ops of static models (CPUStaticRaster) vs an element-by-element reference of MNN's
region copies, built in code: Input ops, one Raster op whose output describe holds the regions,
``usage = INFERENCE_STATIC``."""

from __future__ import annotations

import itertools
from collections.abc import Sequence

import numpy as np
import pytest

from mnnpy._schema.MNN.Blob import BlobT
from mnnpy._schema.MNN.Net import NetT
from mnnpy._schema.MNN.Region import RegionT
from mnnpy._schema.MNN.TensorDescribe import TensorDescribeT
from mnnpy._schema.MNN.View import ViewT
from mnnpy.errors import ErrorCode, MNNError
from mnnpy.interpreter import ScheduleConfig
from mnnpy.net import OpType, pack_net
from mnnpy.tensor_format import DataType, DimensionFormat
from mnnpy.testing.builders import input_op, make_op, run_net

NCHW, NC4HW4 = DimensionFormat.NCHW, DimensionFormat.NC4HW4
_DT = {
    np.dtype(np.float32): DataType.DT_FLOAT,
    np.dtype(np.int32): DataType.DT_INT32,
    np.dtype(np.uint8): DataType.DT_UINT8,
}
Region = tuple[int, Sequence[int], int, Sequence[int], Sequence[int]]  # so, ss, do, ds, size


def describe(
    index: int,
    shape: Sequence[int],
    dtype: np.dtype,
    fmt: DimensionFormat,
    regions: Sequence[Region] = (),
) -> TensorDescribeT:
    d = TensorDescribeT()
    d.index = index
    d.blob = BlobT()
    d.blob.dims, d.blob.dataType, d.blob.dataFormat = list(shape), int(_DT[dtype]), int(fmt)
    d.regions = []
    for so, ss, do, ds, size in regions:
        r = RegionT()
        r.src, r.dst = ViewT(), ViewT()
        r.src.offset, r.src.stride = so, list(ss)
        r.dst.offset, r.dst.stride = do, list(ds)
        r.size = list(size)
        d.regions.append(r)
    return d


def raster_net(
    inputs: Sequence[np.ndarray],
    sources: Sequence[int],
    out_shape: Sequence[int],
    regions: Sequence[Region],
    in_fmt: DimensionFormat = NCHW,
    out_fmt: DimensionFormat = NCHW,
) -> bytes:
    """Inputs ``in0..``; a Raster op reading ``inputs[sources[i]]`` for region ``i``."""
    net = NetT()
    n = len(inputs)
    dtype = np.asarray(inputs[0]).dtype
    net.tensorName = [f"in{i}" for i in range(n)] + ["out0"]
    net.oplists = [input_op(f"in{i}", i, x.shape, x.dtype, in_fmt) for i, x in enumerate(inputs)]
    net.oplists.append(make_op(OpType.Raster, "raster", list(sources), [n]))
    net.extraTensorDescribe = [describe(i, x.shape, x.dtype, in_fmt) for i, x in enumerate(inputs)]
    net.extraTensorDescribe.append(describe(n, out_shape, dtype, out_fmt, regions))
    net.outputName, net.usage = ["out0"], 2
    return pack_net(net)


def reference(
    inputs: Sequence[np.ndarray],
    sources: Sequence[int],
    out_shape: Sequence[int],
    regions: Sequence[Region],
) -> np.ndarray:
    """MNN's CPURaster element by element on the logical flat arrays."""
    out = np.zeros(int(np.prod(out_shape)), inputs[0].dtype)
    for (so, ss, do, ds, size), k in zip(regions, sources, strict=True):
        src = inputs[k].ravel()
        sums: dict[int, float] = {}
        reduce = any(n > 1 and d == 0 for n, d in zip(size, ds, strict=True))
        for i, j, m in itertools.product(*(range(n) for n in size)):
            s = so + i * ss[0] + j * ss[1] + m * ss[2]
            d = do + i * ds[0] + j * ds[1] + m * ds[2]
            if reduce:
                sums[d] = sums.get(d, 0.0) + src[s]
            else:
                out[d] = src[s]
        for d, v in sums.items():
            out[d] = v
    return out.reshape(out_shape)


def run(inputs, sources, out_shape, regions, threads=1, **fmt) -> np.ndarray:
    data = raster_net(inputs, sources, out_shape, regions, **fmt)
    feed = {f"in{i}": x for i, x in enumerate(inputs)}
    _, outs = run_net(data, feed, ScheduleConfig(num_thread=threads))
    return outs["out0"]


def check(inputs, sources, out_shape, regions, **fmt) -> None:
    """At 1 and 2 threads, then again with garbage in the output's storage (a raster must zero
    what its regions do not cover, and NC4HW4 padding lanes)."""
    want = reference(inputs, sources, out_shape, regions)
    data = raster_net(inputs, sources, out_shape, regions, **fmt)
    feed = {f"in{i}": x for i, x in enumerate(inputs)}
    for threads in (1, 2):
        session, outs = run_net(data, feed, ScheduleConfig(num_thread=threads))
        out = session.get_output("out0")
        assert out.host is not None
        got = [outs["out0"]]
        out.host[:] = 77
        session.run()
        got.append(out.numpy())
        if out.is_packed and out.shape[1] % 4:
            blocks = out.host.reshape(out.shape[0], -1, int(np.prod(out.shape[2:])), 4)
            assert not blocks[:, -1, :, out.shape[1] % 4 :].any()
        for g in got:
            if want.dtype.kind == "f":
                np.testing.assert_allclose(g, want, rtol=1e-6, atol=1e-6)
            else:
                np.testing.assert_array_equal(g, want)


RNG = np.random.RandomState(0)


@pytest.mark.parametrize("dtype", [np.float32, np.int32, np.uint8])
def test_transpose_concat_and_partial_cover(dtype) -> None:
    a = (RNG.rand(2, 3, 4) * 100).astype(dtype)
    b = (RNG.rand(5, 4) * 100).astype(dtype)
    regions = [
        (0, (12, 1, 4), 0, (12, 3, 1), (2, 4, 3)),  # a transposed to 2x4x3 at rows 0..1
        (0, (4, 1, 1), 24, (3, 1, 1), (4, 3, 1)),  # part of b behind it
    ]
    check([a, b], [0, 1], (3, 4, 3), regions)  # 36 elements, 36 written: no zeroing
    check([a, b], [0, 1], (4, 4, 3), regions)  # 48 elements, 36 written: the rest is zero


def test_same_input_twice_and_negative_strides() -> None:
    a = RNG.randn(3, 5).astype(np.float32)
    regions = [(14, (-5, -1, 0), 0, (5, 1, 0), (3, 5, 1)), (0, (1, 5, 0), 15, (3, 1, 0), (5, 3, 1))]
    check([a], [0, 0], (30,), regions)


def test_reduce_region_sums() -> None:
    a = RNG.randn(4, 6).astype(np.float32)
    regions = [(0, (6, 1, 0), 0, (1, 0, 0), (4, 6, 1))]  # row sums
    check([a], [0], (4,), regions)


@pytest.mark.parametrize("c", [1, 3, 5, 17])
@pytest.mark.parametrize("formats", [(NC4HW4, NCHW), (NCHW, NC4HW4), (NC4HW4, NC4HW4)])
def test_nc4hw4(c: int, formats) -> None:
    a = RNG.randn(2, c, 3, 2).astype(np.float32)
    area, n = 6, 2 * c * 6
    # NCHW -> NHWC order of a (a transpose), then the first half again, flat
    regions = [(0, (c * area, 1, area), 0, (c * area, c, 1), (2, area, c))]
    out_shape = (2, 2 * c, 3, 2)
    regions.append((0, (1, 1, 1), n, (1, 1, 1), (1, 1, n // 2)))
    check([a], [0, 0], out_shape, regions, in_fmt=formats[0], out_fmt=formats[1])


@pytest.mark.parametrize("formats", [(NC4HW4, NCHW), (NCHW, NC4HW4), (NC4HW4, NC4HW4)])
@pytest.mark.parametrize("shapes", [((2, 6, 2, 2), (2, 3, 4, 2)), ((2, 5, 3, 2), (2, 3, 5, 2))])
def test_whole_tensor_flat_copy_between_layouts(formats, shapes) -> None:
    """A Reshape: one planned conversion where the shapes have a common refinement (the first),
    else through scratch."""
    a = RNG.randn(*shapes[0]).astype(np.float32)
    regions = [(0, (0, 0, 1), 0, (0, 0, 1), (1, 1, a.size))]
    check([a], [0], shapes[1], regions, in_fmt=formats[0], out_fmt=formats[1])


def test_region_wholly_past_the_output_is_skipped() -> None:
    """As MNN's StridedSlice geometry leaves in files (MNN writes them past the buffer)."""
    a = RNG.randn(6).astype(np.float32)
    got = run(
        [a],
        [0, 0],
        (6,),
        [(0, (1, 1, 1), 0, (1, 1, 1), (1, 1, 6)), (0, (1, 1, 1), 6, (1, 1, 1), (1, 1, 6))],
    )
    np.testing.assert_array_equal(got, a)


@pytest.mark.parametrize(
    "region",
    [
        (1, (1, 1, 1), 0, (1, 1, 1), (1, 1, 6)),  # source one past its end
        (0, (1, 1, 1), 1, (1, 1, 1), (1, 1, 6)),  # destination partly past the output
        (5, (-1, 1, 1), 0, (1, 1, 1), (7, 1, 1)),  # negative source index
        (0, (1, 1, 1), 0, (1, 1, 1), (1, -2, 6)),  # negative size
    ],
)
def test_bad_region_is_invalid_value(region) -> None:
    a = RNG.randn(6).astype(np.float32)
    with pytest.raises(MNNError) as e:
        run([a], [0], (6,), [region])
    assert e.value.code == ErrorCode.INVALID_VALUE
    assert "raster" in str(e.value)


def test_region_count_must_match_inputs() -> None:
    a = RNG.randn(6).astype(np.float32)
    with pytest.raises(MNNError) as e:
        run([a], [0], (6,), [])
    assert e.value.code == ErrorCode.INVALID_VALUE and "raster" in str(e.value)


def test_raster_outside_a_static_model_is_not_supported() -> None:
    net = NetT()
    net.tensorName = ["in0", "out0"]
    net.oplists = [
        input_op("in0", 0, (4,), np.float32, NCHW),
        make_op(OpType.Raster, "raster", [0], [1]),
    ]
    net.outputName = ["out0"]
    with pytest.raises(MNNError) as e:
        run_net(pack_net(net), {"in0": np.zeros(4, np.float32)})
    assert e.value.code == ErrorCode.NOT_SUPPORT


@pytest.mark.parametrize("channels", [(3, 5), (4, 4), (5, 12), (1, 16)])
@pytest.mark.parametrize("formats", [(NC4HW4, NC4HW4), (NCHW, NC4HW4), (NC4HW4, NCHW)])
def test_channel_concat_and_shuffle_on_nc4hw4_storage(channels, formats) -> None:
    """Boxes of the logical dims (a channel concat, then a 2-group channel shuffle of the first
    input) are planned straight on the NC4HW4 storage, lanes not aligned to the blocks."""
    c0, c1 = channels
    n, area = 2, 6
    a = RNG.randn(n, c0, 2, 3).astype(np.float32)
    b = RNG.randn(n, c1, 2, 3).astype(np.float32)
    c = c0 + c1
    regions = [
        (0, (c0 * area, area, 1), 0, (c * area, area, 1), (n, c0, area)),
        (0, (c1 * area, area, 1), c0 * area, (c * area, area, 1), (n, c1, area)),
    ]
    check([a, b], [0, 1], (n, c, 2, 3), regions, in_fmt=formats[0], out_fmt=formats[1])
    if c0 % 2 == 0:
        half = c0 // 2 * area  # out[:, 2k + g] = a[:, g * c0/2 + k]
        shuffle = [
            (0, (c0 * area, area, 1), 0, (c0 * area, 2 * area, 1), (n, c0 // 2, area)),
            (half, (c0 * area, area, 1), area, (c0 * area, 2 * area, 1), (n, c0 // 2, area)),
        ]
        check([a], [0, 0], (n, c0, 2, 3), shuffle, in_fmt=formats[0], out_fmt=formats[1])
    data = raster_net([a, b], [0, 1], (n, c, 2, 3), regions, *formats)
    session, _ = run_net(data, {"in0": a, "in1": b})
    execution = session.pipelines[0].units[-1].execution
    assert execution._pack is None and not execution._unpack  # no NCHW scratch


@pytest.mark.parametrize("fmt", [NCHW, NC4HW4])
@pytest.mark.parametrize(
    "region",
    [
        (0, (0, 0, 1), 6, (0, 0, 1), (1, 1, 6)),  # a box of the logical dims
        (1, (0, 0, 5), 2, (0, 0, 7), (1, 1, 4)),  # no box: NC4HW4 goes through scratch
    ],
)
def test_raster_writing_the_tensor_it_reads(fmt: DimensionFormat, region: Region) -> None:
    """A file whose Raster writes the tensor it reads: the elements outside its regions keep
    their values (loaded as a new tensor, OpDef.inplace)."""
    a = RNG.randn(1, 5, 2, 3).astype(np.float32)
    net = NetT()
    net.tensorName = ["in0", "mid"]
    net.oplists = [
        input_op("in0", 0, a.shape, a.dtype, fmt),
        make_op(OpType.Raster, "raster", [0], [0]),
        make_op(OpType.ReLU, "relu", [0], [1]),
    ]
    net.extraTensorDescribe = [
        describe(0, a.shape, a.dtype, fmt, [region]),
        describe(1, a.shape, a.dtype, fmt),
    ]
    net.outputName, net.usage = ["mid"], 2
    want = a.ravel().copy()
    so, ss, do, ds, size = region
    for k in range(size[2]):
        want[do + k * ds[2]] = a.ravel()[so + k * ss[2]]
    for threads in (1, 2):
        _, outs = run_net(pack_net(net), {"in0": a}, ScheduleConfig(num_thread=threads))
        np.testing.assert_array_equal(outs["mid"], np.maximum(want.reshape(a.shape), 0))
