"""A PyTorch-exported channel shuffle: Concat -> Reshape -> Transpose -> Reshape -> two ONNX slices.

``torch.onnx.export`` writes ShuffleNet's ``x.chunk(2, dim=1)`` as two StridedSlice ops reading
the shuffled tensor. The slices are strided boxes (geometry ``_strided_slice``), the Reshape that
splits the channels into groups reads the Concat through (``compose._boxes``), and the results
must match NumPy for NC4HW4 and NCHW, odd channel counts, 1 and 2 threads.
"""

from __future__ import annotations

import numpy as np
import pytest

import mnnpy
from mnnpy._schema.MNN.Axis import AxisT
from mnnpy._schema.MNN.Net import NetT
from mnnpy._schema.MNN.Permute import PermuteT
from mnnpy._schema.MNN.Reshape import ReshapeT
from mnnpy._schema.MNN.StridedSliceParam import StridedSliceParamT
from mnnpy.geometry import compose as C
from mnnpy.geometry import regions as R
from mnnpy.net import OpParameter, OpType, pack_net
from mnnpy.tensor_format import DimensionFormat
from tests.helpers import _op, const_op, input_op
from tests.unit.test_raster_fusion import _param, box, execute, moves, numpy_shuffle, storage

NC4HW4, NCHW = DimensionFormat.NC4HW4, DimensionFormat.NCHW


def torch_shuffle_net(shape: tuple, fmt: DimensionFormat, units: int = 2) -> bytes:
    """``units`` shuffles; per unit ``s0`` goes to the next Concat, ``s1`` is the next ``y``."""
    n, c, h, w = shape
    names = ["x", "y"]
    ops = [input_op("x", 0, shape, np.float32, fmt), input_op("y", 1, shape, np.float32, fmt)]

    def tensor(name: str) -> int:
        names.append(name)
        return len(names) - 1

    def const(name: str, value: list[int]) -> int:
        k = tensor(name)
        ops.append(const_op(name, k, np.array(value, np.int32)))
        return k

    sp = _param(StridedSliceParamT, fromType=1)
    axes = const("axes", [1])
    a, b = 0, 1
    for u in range(units):
        cat, r1, p, r2, s0, s1 = (tensor(f"{s}{u}") for s in ("cat", "r1", "p", "r2", "s0_", "s1_"))
        lo, mid, hi = const(f"lo{u}", [0]), const(f"mid{u}", [c]), const(f"hi{u}", [2 * c])
        ops += [
            _op(OpType.Concat, f"cat{u}", [a, b], [cat], _param(AxisT, axis=1), OpParameter.Axis),
            _op(OpType.Reshape, f"r1_{u}", [cat], [r1],
                _param(ReshapeT, dims=[n, 2, c, h, w], dimType=0), OpParameter.Reshape),
            _op(OpType.Permute, f"p{u}", [r1], [p],
                _param(PermuteT, dims=[0, 2, 1, 3, 4]), OpParameter.Permute),
            _op(OpType.Reshape, f"r2_{u}", [p], [r2],
                _param(ReshapeT, dims=[n, 2 * c, h, w], dimType=0), OpParameter.Reshape),
            _op(OpType.StridedSlice, f"s0_{u}", [r2, lo, mid, axes], [s0], sp,
                OpParameter.StridedSliceParam),
            _op(OpType.StridedSlice, f"s1_{u}", [r2, mid, hi, axes], [s1], sp,
                OpParameter.StridedSliceParam),
        ]  # fmt: skip
        a, b = s0, s1
    net = NetT()
    net.tensorName = names
    net.oplists = ops
    net.outputName = [names[a], names[b]]
    return pack_net(net)


@pytest.mark.parametrize("fmt", [NC4HW4, NCHW])
@pytest.mark.parametrize("shape", [(1, 58, 5, 7), (2, 5, 3, 3), (1, 8, 4, 4), (1, 1, 2, 3)])
def test_torch_shuffle_matches_numpy(shape: tuple, fmt: DimensionFormat) -> None:
    rng = np.random.default_rng(sum(shape))
    x, y = (rng.standard_normal(shape).astype(np.float32) for _ in range(2))
    data = torch_shuffle_net(shape, fmt)
    want = numpy_shuffle(x, y)
    for threads in (1, 2):
        interp = mnnpy.Interpreter.from_buffer(data)
        session = interp.create_session(mnnpy.ScheduleConfig(num_thread=threads))
        interp.get_session_input(session, "x").copy_from(x)
        interp.get_session_input(session, "y").copy_from(y)
        interp.run_session(session)
        np.testing.assert_array_equal(interp.get_session_output(session, "s0_1").numpy(), want[0])
        np.testing.assert_array_equal(interp.get_session_output(session, "s1_1").numpy(), want[1])
        units = {u.op.name: u for p in session.pipelines for u in p._active}
        # the slices run regions, and the Concat is read through by the group Reshape
        assert units["s1_0"].execution._copies is not None
        assert units["cat1"].execution._skip[0] and not moves(units["cat1"])
        # both slices read the shuffled tensor through, so it is not written
        assert units["r2_1"].outputs[0].describe.virtual and not moves(units["r2_1"])


@pytest.mark.parametrize("packed", [False, True])
def test_grouped_read_of_a_concat_is_cut_into_boxes(packed: bool) -> None:
    """A reshape reading channel ``c = 6 * g + i`` (two groups of 6) reads the Concat's inputs."""
    a = np.arange(2 * 6 * 5, dtype=np.int32).reshape(2, 6, 5)
    b = -1 - np.arange(2 * 6 * 5, dtype=np.int32).reshape(2, 6, 5)
    cat = (2, 12, 5)
    writer = [
        C.Piece([2, 6, 5], "a", box(a.shape, packed), box(cat, packed)),
        C.Piece([2, 6, 5], "b", box(b.shape, packed), box(cat, packed, [0, 6, 0])),
    ]
    space = [2, 2, 6, 5]  # the reshape (2, 12, 5) -> (2, 2, 6, 5) over its common refinement
    src = R.merged(R.Layout(cat, packed), range(3), space)
    dst = R.Side.box(R.Layout((2, 2, 6, 5), False), [0] * 4, range(4))
    pieces = C.compose(C.Piece(space, "cat", src, dst), writer)
    assert pieces is not None and {p.source for p in pieces} == {"a", "b"}
    bufs = {"a": storage(a, packed), "b": storage(b, packed)}
    got = execute(pieces, (2, 2, 6, 5), False, bufs)
    np.testing.assert_array_equal(got, np.concatenate([a, b], axis=1).reshape(2, 2, 6, 5))
    # a strided read (channel 2 * i) is no box of a few values: not composed
    stepped = R.Side(R.Layout(cat, packed), [0, 0, 0], [[(0, 1)], [(1, 2)], [(2, 1)]])
    assert C.compose(C.Piece([2, 6, 5], "cat", stepped, box((2, 6, 5), False)), writer) is None


@pytest.mark.parametrize("second", [OpType.Permute, OpType.ReLU])
def test_a_tensor_read_by_two_rasters_is_read_through_by_both(second: int) -> None:
    """A Concat read by two Permutes is virtual (each reads the Concat's inputs, as MNN fuses a
    virtual tensor into every raster); with a ReLU as the second reader it is written."""
    shape = (1, 6, 2, 3)
    net = NetT()
    net.tensorName = ["x", "y", "cat", "a", "b"]
    param = _param(PermuteT, dims=[0, 1, 3, 2]) if second == OpType.Permute else None
    net.oplists = [
        input_op("x", 0, shape),
        input_op("y", 1, shape),
        _op(OpType.Concat, "cat", [0, 1], [2], _param(AxisT, axis=1), OpParameter.Axis),
        _op(OpType.Permute, "pa", [2], [3], _param(PermuteT, dims=[0, 2, 3, 1]),
            OpParameter.Permute),
        _op(second, "pb", [2], [4], param, OpParameter.Permute if param else OpParameter.NONE),
    ]  # fmt: skip
    net.outputName = ["a", "b"]
    rng = np.random.default_rng(1)
    x, y = (rng.standard_normal(shape).astype(np.float32) for _ in range(2))
    interp = mnnpy.Interpreter.from_buffer(pack_net(net))
    session = interp.create_session(mnnpy.ScheduleConfig(num_thread=1))
    interp.get_session_input(session, "x").copy_from(x)
    interp.get_session_input(session, "y").copy_from(y)
    interp.run_session(session)
    cat = np.concatenate([x, y], axis=1)
    b = cat.transpose(0, 1, 3, 2) if second == OpType.Permute else np.maximum(cat, 0)
    np.testing.assert_array_equal(interp.get_session_output(session, "a").numpy(),
                                  cat.transpose(0, 2, 3, 1))  # fmt: skip
    np.testing.assert_array_equal(interp.get_session_output(session, "b").numpy(), b)
    units = {u.op.name: u for p in session.pipelines for u in p._active}
    assert units["cat"].outputs[0].describe.virtual == (second == OpType.Permute)


@pytest.mark.parametrize("packed", [False, True])
@pytest.mark.parametrize(("lo", "n"), [(0, 12), (3, 6), (5, 1), (1, 1)])
def test_slice_of_an_interleave_reads_its_sources(packed: bool, lo: int, n: int) -> None:
    """Channels ``2 * i`` from ``a``, ``2 * i + 1`` from ``b`` (strided writes), read in part."""
    a = np.arange(2 * 6 * 5, dtype=np.int32).reshape(2, 6, 5)
    b = -1 - np.arange(2 * 6 * 5, dtype=np.int32).reshape(2, 6, 5)
    mixed = (2, 12, 5)

    def strided(first: int) -> R.Side:
        return R.Side(R.Layout(mixed, packed), [0, first, 0], [[(0, 1)], [(1, 2)], [(2, 1)]])

    writer = [
        C.Piece([2, 6, 5], "a", box(a.shape, packed), strided(0)),
        C.Piece([2, 6, 5], "b", box(b.shape, packed), strided(1)),
    ]
    reader = C.Piece([2, n, 5], "mixed", box(mixed, packed, [0, lo, 0]), box((2, n, 5), packed))
    pieces = C.compose(reader, writer)
    assert pieces is not None and {p.source for p in pieces} <= {"a", "b"}
    bufs = {"a": storage(a, packed), "b": storage(b, packed)}
    want = np.stack([a, b], axis=2).reshape(mixed)[:, lo : lo + n]
    np.testing.assert_array_equal(execute(pieces, (2, n, 5), packed, bufs), want)
