"""Raster executions reading through each other (executions/raster.py, regions.compose).

A chain of Concat / Reshape / Permute / Slice / ConvertTensor (ShuffleNet's channel shuffle)
must give NumPy's result with the intermediate copies skipped, the same with 1 and 2 threads,
for float32 and int32, NC4HW4 and NCHW; the composition itself is checked piece by piece.
"""

from __future__ import annotations

import numpy as np
import pytest

import mnnpy
from mnnpy import layout
from mnnpy._schema.MNN.Axis import AxisT
from mnnpy._schema.MNN.Net import NetT
from mnnpy._schema.MNN.Permute import PermuteT
from mnnpy._schema.MNN.Reshape import ReshapeT
from mnnpy._schema.MNN.Slice import SliceT
from mnnpy._schema.MNN.TensorConvertInfo import TensorConvertInfoT
from mnnpy.backend.cpu.kernels import raster as K
from mnnpy.geometry import compose as C
from mnnpy.geometry import regions as R
from mnnpy.net import OpParameter, OpType, pack_net
from mnnpy.tensor_format import DimensionFormat
from tests.helpers import _op, input_op

NC4HW4, NCHW = DimensionFormat.NC4HW4, DimensionFormat.NCHW


def _param(cls: type, **fields: object) -> object:
    p = cls()
    for k, v in fields.items():
        setattr(p, k, v)
    return p


def shuffle_net(shape: tuple, fmt: DimensionFormat, dtype: type, units: int = 2) -> bytes:
    """``units`` ShuffleNet units without convolutions: x, y -> concat -> [2, C] -> transpose ->
    [2C] -> NCHW -> split -> (half 0 to the next unit's concat, half 1 to NC4HW4 -> next y)."""
    n, c, h, w = shape
    names = ["x", "y"]
    ops = [input_op("x", 0, shape, dtype, fmt), input_op("y", 1, shape, dtype, fmt)]
    a, b = 0, 1

    def tensor(name: str) -> int:
        names.append(name)
        return len(names) - 1

    for u in range(units):
        cat, r1, p, r2 = (tensor(f"{s}{u}") for s in ("cat", "r1", "p", "r2"))
        plain, s0, s1, nxt = (tensor(f"{s}{u}") for s in ("plain", "s0", "s1", "next"))
        ops += [
            _op(OpType.Concat, f"cat{u}", [a, b], [cat], _param(AxisT, axis=1), OpParameter.Axis),
            _op(
                OpType.Reshape,
                f"r1_{u}",
                [cat],
                [r1],
                _param(ReshapeT, dims=[n, 2, c, h, w], dimType=0),
                OpParameter.Reshape,
            ),
            _op(
                OpType.Permute,
                f"p{u}",
                [r1],
                [p],
                _param(PermuteT, dims=[0, 2, 1, 3, 4]),
                OpParameter.Permute,
            ),
            _op(
                OpType.Reshape,
                f"r2_{u}",
                [p],
                [r2],
                _param(ReshapeT, dims=[n, 2 * c, h, w], dimType=0),
                OpParameter.Reshape,
            ),
            _op(
                OpType.ConvertTensor,
                f"plain{u}",
                [r2],
                [plain],
                _param(TensorConvertInfoT, source=int(fmt), dest=int(NCHW)),
                OpParameter.TensorConvertInfo,
            ),
            _op(
                OpType.Slice,
                f"split{u}",
                [plain],
                [s0, s1],
                _param(SliceT, axis=1, slicePoints=[c], sourceType=0),
                OpParameter.Slice,
            ),
            _op(
                OpType.ConvertTensor,
                f"next{u}",
                [s1],
                [nxt],
                _param(TensorConvertInfoT, source=int(NCHW), dest=int(fmt)),
                OpParameter.TensorConvertInfo,
            ),
        ]
        a, b = s0, nxt
    net = NetT()
    net.tensorName = names
    net.oplists = ops
    net.outputName = [names[a], names[b]]
    return pack_net(net)


def numpy_shuffle(x: np.ndarray, y: np.ndarray, units: int = 2) -> tuple[np.ndarray, np.ndarray]:
    n, c, h, w = x.shape
    for _ in range(units):
        cat = np.concatenate([x, y], axis=1).reshape(n, 2, c, h, w)
        mixed = cat.transpose(0, 2, 1, 3, 4).reshape(n, 2 * c, h, w)
        x, y = mixed[:, :c], mixed[:, c:]
    return x, y


def run(data: bytes, x: np.ndarray, y: np.ndarray, threads: int) -> tuple[list, object]:
    interp = mnnpy.Interpreter.from_buffer(data)
    session = interp.create_session(mnnpy.ScheduleConfig(num_thread=threads))
    interp.get_session_input(session, "x").copy_from(x)
    interp.get_session_input(session, "y").copy_from(y)
    interp.run_session(session)
    outs = interp.get_session_output_all(session)
    return [outs[k].numpy() for k in sorted(outs)], session


@pytest.mark.parametrize("fmt", [NC4HW4, NCHW])
@pytest.mark.parametrize("dtype", [np.float32, np.int32])
@pytest.mark.parametrize("shape", [(1, 58, 5, 7), (2, 5, 3, 3), (2, 4, 17, 9), (1, 1, 2, 3)])
def test_shuffle_units_read_through(shape: tuple, dtype: type, fmt: DimensionFormat) -> None:
    rng = np.random.default_rng(sum(shape))
    x, y = ((rng.standard_normal(shape) * 1000).astype(dtype) for _ in range(2))
    data = shuffle_net(shape, fmt, dtype)
    (one, session), (two, _) = run(data, x, y, 1), run(data, x, y, 2)
    want = numpy_shuffle(x, y)
    for a, b in zip(one, two, strict=True):
        np.testing.assert_array_equal(a, b)
    names = sorted(session.get_output_all())
    got = dict(zip(names, one, strict=True))
    np.testing.assert_array_equal(got["s01"], want[0])
    np.testing.assert_array_equal(got["next1"], want[1])
    # with even channels every copy but two per unit is skipped (MNN: two rasters per unit);
    # an odd half of interleaved channels is no box, so one more tensor is written then
    units = [u for p in session.pipelines for u in p._active]
    copies = [u.op.name for u in units if moves(u)]
    assert len(copies) <= (2 * 2 + 1 if shape[1] % 2 == 0 else 3 * 2 + 1), copies
    # the run loop (which gave the outputs above) leaves out exactly the ops with nothing to do
    stepped = {id(step.unit) for p in session.pipelines for step in p._steps}
    left_out = [u for u in units if id(u) not in stepped and u.execution is not None]
    assert left_out and not any(moves(u) for u in left_out)
    assert all(moves(u) for u in units if id(u) in stepped and u.op.type != OpType.Input)


@pytest.mark.parametrize("fmt", [NC4HW4, NCHW])
def test_read_through_decisions_are_in_the_plans(fmt: DimensionFormat) -> None:
    """The pipeline's pass records each read-through in the reader's plan; exactly the writers
    named there skip an output, and the reader reads the writer's sources instead."""
    shape = (1, 6, 2, 3)
    x, y = (np.full(shape, v, np.float32) for v in (1.0, 2.0))
    _, session = run(shuffle_net(shape, fmt, np.float32), x, y, 1)
    units = [u for p in session.pipelines for u in p.units if u.plan is not None]
    decisions = [(u, d) for u in units for d in u.plan.reads_through]
    assert decisions
    skipped = {(id(u), j) for u in units for j in range(len(u.outputs)) if _skips(u, j)}
    assert skipped == {(id(d.writer), d.index) for _, d in decisions}
    for reader, d in decisions:
        assert d.tensor is d.writer.outputs[d.index] and d.tensor in reader.inputs
        read = {id(p.source) for _, p in reader.execution._pieces}
        assert id(d.tensor) not in read and all(id(s) in read for s in d.sources)
    assert not hasattr(session.host_backend, "rasters")  # no side channel on the backend


def _skips(unit: object, j: int) -> bool:
    skip = getattr(unit.execution, "_skip", None)  # type: ignore[attr-defined]
    return bool(skip and skip[j])


def moves(unit: object) -> bool:
    """Whether an execution copies data (not skipped, not an in-place Reshape)."""

    def address(t: object) -> int:
        return t.host.__array_interface__["data"][0]  # type: ignore[attr-defined]

    e = unit.execution  # type: ignore[attr-defined]
    outs = unit.outputs  # type: ignore[attr-defined]
    if e._copies is None:
        return True
    return any(not e._skip[j] and address(s) != address(outs[j]) for s, j, _ in e._copies)


@pytest.mark.parametrize("fmt", [NC4HW4, NCHW])
def test_callbacks_see_the_outputs_of_skipped_ops(fmt: DimensionFormat) -> None:
    shape = (1, 6, 2, 3)
    rng = np.random.default_rng(0)
    x, y = (rng.standard_normal(shape).astype(np.float32) for _ in range(2))
    interp = mnnpy.Interpreter.from_buffer(shuffle_net(shape, fmt, np.float32, units=1))
    session = interp.create_session(mnnpy.ScheduleConfig(num_thread=1))
    interp.get_session_input(session, "x").copy_from(x)
    interp.get_session_input(session, "y").copy_from(y)
    seen: dict[str, np.ndarray] = {}

    def after(outputs: list, info: object) -> bool:
        seen[info.name] = outputs[-1].numpy()  # type: ignore[attr-defined]
        return True

    interp.run_session_with_callback(session, None, after)
    cat = np.concatenate([x, y], axis=1)
    mixed = cat.reshape(1, 2, 6, 2, 3).transpose(0, 2, 1, 3, 4)
    np.testing.assert_array_equal(seen["p0"], mixed)
    np.testing.assert_array_equal(seen["r2_0"], mixed.reshape(1, 12, 2, 3))
    np.testing.assert_array_equal(seen["split0"], mixed.reshape(1, 12, 2, 3)[:, 6:])
    units = [u for p in session.pipelines for u in p._active]
    assert any(u.execution._skip[0] for u in units if u.op.name == "p0")  # skipped otherwise


def test_unobserved_callbacks_run_the_plain_copies(monkeypatch: pytest.MonkeyPatch) -> None:
    """observe=False (timing): a read-through output is not written, the outputs are right."""
    import mnnpy.backend.cpu.executions.raster as raster_execution

    shape = (1, 6, 2, 3)
    x, y = (np.full(shape, v, np.float32) for v in (1.0, 2.0))
    interp = mnnpy.Interpreter.from_buffer(shuffle_net(shape, NCHW, np.float32, units=1))
    session = interp.create_session(mnnpy.ScheduleConfig(num_thread=1))
    interp.get_session_input(session, "x").copy_from(x)
    interp.get_session_input(session, "y").copy_from(y)
    p0 = next(u for p in session.pipelines for u in p._active if u.op.name == "p0")
    written: list[bool] = []

    class Spy:
        @staticmethod
        def copy_regions(src: np.ndarray, dst: np.ndarray, rows: np.ndarray, t: int) -> None:
            written.append(dst is p0.outputs[0].host)
            K.copy_regions(src, dst, rows, t)

        zero_regions = staticmethod(K.zero_regions)

    monkeypatch.setattr(raster_execution, "K", Spy)
    names: list[str] = []

    def after(outputs: list, info: object) -> bool:
        names.append(info.name)  # type: ignore[attr-defined]
        return True

    interp.run_session_with_callback(session, None, after, observe=False)
    assert "p0" in names and written and not any(written)
    want = numpy_shuffle(x, y, units=1)
    np.testing.assert_array_equal(interp.get_session_output(session, "s00").numpy(), want[0])
    interp.run_session_with_callback(session, None, after)
    assert any(written)


def test_a_tensor_with_two_readers_is_written() -> None:
    """The Concat output also feeds a second op: it must be materialised."""
    shape = (1, 6, 2, 3)
    net = NetT()
    net.tensorName = ["x", "y", "cat", "a", "b"]
    net.oplists = [
        input_op("x", 0, shape),
        input_op("y", 1, shape),
        _op(OpType.Concat, "cat", [0, 1], [2], _param(AxisT, axis=1), OpParameter.Axis),
        _op(OpType.Permute, "pa", [2], [3], _param(PermuteT, dims=[0, 2, 3, 1]), 0),
        _op(OpType.Permute, "pb", [2], [4], _param(PermuteT, dims=[0, 1, 3, 2]), 0),
    ]
    for op in net.oplists[3:]:
        op.mainType = OpParameter.Permute
    net.outputName = ["a", "b", "cat"]
    x, y = np.arange(36, dtype=np.float32).reshape(shape), -np.ones(shape, np.float32)
    (a, b, cat), session = run(pack_net(net), x, y, 1)
    want = np.concatenate([x, y], axis=1)
    np.testing.assert_array_equal(cat, want)
    np.testing.assert_array_equal(a, want.transpose(0, 2, 3, 1))
    np.testing.assert_array_equal(b, want.transpose(0, 1, 3, 2))


def test_a_graph_output_read_by_one_raster_is_written() -> None:
    """The Concat output is a graph output and feeds one Permute: the Permute may not read
    through it (a graph output counts as one more reader), so both are computed."""
    shape = (1, 6, 2, 3)
    net = NetT()
    net.tensorName = ["x", "y", "cat", "a"]
    net.oplists = [
        input_op("x", 0, shape),
        input_op("y", 1, shape),
        _op(OpType.Concat, "cat", [0, 1], [2], _param(AxisT, axis=1), OpParameter.Axis),
        _op(OpType.Permute, "pa", [2], [3], _param(PermuteT, dims=[0, 2, 3, 1]), 0),
    ]
    net.oplists[3].mainType = OpParameter.Permute
    net.outputName = ["cat", "a"]
    x, y = np.arange(36, dtype=np.float32).reshape(shape), -np.ones(shape, np.float32)
    (a, cat), _ = run(pack_net(net), x, y, 1)  # sorted by name
    want = np.concatenate([x, y], axis=1)
    np.testing.assert_array_equal(cat, want)
    np.testing.assert_array_equal(a, want.transpose(0, 2, 3, 1))


# -- regions.compose ------------------------------------------------------------------------
def box(shape: tuple, packed: bool, start: list[int] | None = None) -> R.Side:
    return R.Side.box(R.Layout(shape, packed), start or [0] * len(shape), range(len(shape)))


def execute(pieces: list[C.Piece], out_shape: tuple, packed: bool, buffers: dict) -> np.ndarray:
    n = layout.storage_elements(out_shape, NC4HW4 if packed else NCHW)
    out = np.zeros(n, np.int32)
    for p in pieces:
        rows = R.plan(p.space, p.src, p.dst)
        assert rows is not None
        K.copy_regions(buffers[p.source], out, rows, 1)
    return layout.unpack_nc4hw4(out, out_shape) if packed else out.reshape(out_shape)


def storage(x: np.ndarray, packed: bool) -> np.ndarray:
    return layout.pack_nc4hw4(x) if packed else x.ravel().copy()


@pytest.mark.parametrize("packed", [False, True])
def test_slice_of_a_concat_reads_the_concat_inputs(packed: bool) -> None:
    a = np.arange(2 * 5 * 6, dtype=np.int32).reshape(2, 5, 6)
    b = -np.arange(2 * 3 * 6, dtype=np.int32).reshape(2, 3, 6)
    cat = (2, 8, 6)
    writer = [
        C.Piece([2, 5, 6], "a", box(a.shape, packed), box(cat, packed)),
        C.Piece([2, 3, 6], "b", box(b.shape, packed), box(cat, packed, [0, 5, 0])),
    ]
    reader = C.Piece([2, 4, 6], "cat", box(cat, packed, [0, 3, 0]), box((2, 4, 6), packed))
    pieces = C.compose(reader, writer)
    assert pieces is not None and {p.source for p in pieces} == {"a", "b"}
    bufs = {"a": storage(a, packed), "b": storage(b, packed)}
    got = execute(pieces, (2, 4, 6), packed, bufs)
    np.testing.assert_array_equal(got, np.concatenate([a, b], axis=1)[:, 3:7])


def test_slice_of_a_reshape_splits_the_merged_dim() -> None:
    x = np.arange(3 * 4 * 5, dtype=np.int32).reshape(3, 4, 5)
    space = R.refine((3, 4, 5), (3, 20))
    writer = [
        C.Piece(
            space,
            "x",
            R.merged(R.Layout((3, 4, 5), True), range(3), space),
            R.merged(R.Layout((3, 20), False), range(2), space),
        )
    ]
    reader = C.Piece([3, 10], "r", box((3, 20), False, [0, 5]), box((3, 10), True))
    pieces = C.compose(reader, writer)
    assert pieces is not None
    got = execute(pieces, (3, 10), True, {"x": storage(x, True)})
    np.testing.assert_array_equal(got, x.reshape(3, 20)[:, 5:15])
    # [1, 3) of a (2, 2) radix is no box of its digits
    flat = R.merged(R.Layout((4,), False), [0], [2, 2])
    writer2 = [C.Piece([2, 2], "x", box((2, 2), False), flat)]
    assert C.compose(C.Piece([2], "r", box((4,), False, [1]), box((2,), False)), writer2) is None


def test_reads_outside_a_writer_piece_are_left_to_the_others() -> None:
    writer = [C.Piece([4], "a", box((4,), False), box((8,), False))]
    reader = C.Piece([3], "t", box((8,), False, [5]), box((3,), False))
    assert C.compose(reader, writer) == []


def test_remembered_compositions_read_each_calls_sources() -> None:
    """``compose`` remembers answers by description: the same copy over other tensors reads
    those (by producer piece, not by name), as the unremembered composition does, and each call
    gets pieces of its own."""
    cat = (2, 8, 6)

    def writer(first: str, second: str) -> list[C.Piece]:
        return [
            C.Piece([2, 5, 6], first, box((2, 5, 6), True), box(cat, True)),
            C.Piece([2, 3, 6], second, box((2, 3, 6), True), box(cat, True, [0, 5, 0])),
        ]

    reader = C.Piece([2, 4, 6], "cat", box(cat, True, [0, 3, 0]), box((2, 4, 6), True))
    one = C.compose(reader, writer("a", "b"))
    two = C.compose(reader, writer("b", "a"))  # the same descriptions, the sources swapped
    fresh = C._compose(reader, writer("b", "a"))
    assert one and two and fresh and len(one) == len(two) == len(fresh) == 2
    assert [p.source for p in one] == ["a", "b"] and [p.source for p in two] == ["b", "a"]
    for p, q in zip(two, fresh, strict=True):
        assert p.source == q.source and p.space == q.space
        assert R._key(p.src) == R._key(q.src) and R._key(p.dst) == R._key(q.dst)
    again = C.compose(reader, writer("a", "b"))
    assert again is not None
    for p, q in zip(one, again, strict=True):
        assert p is not q and p.src is not q.src and p.dst.terms is not q.dst.terms
        p.src.start[0] = 99  # a caller's change reaches neither the memo nor other answers
    assert C.compose(reader, writer("a", "b"))[0].src.start[0] != 99  # type: ignore[index]
