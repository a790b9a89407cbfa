"""While with a LoopParam (CPULoop) vs an iteration-by-iteration, element-by-element reference
of MNN's CPULoop, on one-op static models built in code."""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import Any

import numpy as np
import pytest

from mnnpy._schema.MNN.BinaryOp import BinaryOpT
from mnnpy._schema.MNN.BinaryOpOperation import BinaryOpOperation as B
from mnnpy._schema.MNN.LoopParam import LoopParamT
from mnnpy._schema.MNN.MatMul import MatMulT
from mnnpy._schema.MNN.Net import NetT
from mnnpy._schema.MNN.Op import OpT
from mnnpy._schema.MNN.OpParameter import OpParameter
from mnnpy._schema.MNN.RegionCommand import RegionCommandT
from mnnpy._schema.MNN.UnaryOp import UnaryOpT
from mnnpy._schema.MNN.UnaryOpOperation import UnaryOpOperation as U
from mnnpy._schema.MNN.View import ViewT
from mnnpy.errors import ErrorCode, MNNError
from mnnpy.interpreter import ScheduleConfig
from mnnpy.net import OpType, pack_net
from mnnpy.tensor_format import DimensionFormat
from mnnpy.testing.builders import const_op, input_op, make_op, run_net
from tests.ops.test_raster_static import describe

NCHW = DimensionFormat.NCHW
RNG = np.random.RandomState(1)


def command(
    kind: str, indexes, views, size, steps=None, iters=None, fuse=-1, code=0, ta=False, tb=False
) -> RegionCommandT:
    c = RegionCommandT()
    op = OpT()
    if kind in ("copy", "unary"):
        op.type = OpType.UnaryOp
        if kind == "unary":
            op.main, op.mainType = UnaryOpT(), OpParameter.UnaryOp
            op.main.opType = code
    elif kind == "binary":
        op.type, op.main, op.mainType = OpType.BinaryOp, BinaryOpT(), OpParameter.BinaryOp
        op.main.opType = code
    else:
        op.type, op.main, op.mainType = OpType.MatMul, MatMulT(), OpParameter.MatMul
        op.main.transposeA, op.main.transposeB = ta, tb
    c.op = op if kind != "zero" else None
    c.indexes, c.size = list(indexes), list(size)
    c.view = []
    for off, stride in views:
        v = ViewT()
        v.offset, v.stride = off, list(stride)
        c.view.append(v)
    n = len(indexes)
    c.steps = list(steps) if steps is not None else [0] * n
    c.iterIndexes = list(iters) if iters is not None else [-1] * n
    c.fuse = fuse
    return c


def loop_net(
    inputs: Sequence[np.ndarray],
    consts: dict[int, np.ndarray],
    out_shape,
    out_dtype,
    param: LoopParamT,
) -> bytes:
    net = NetT()
    n = len(inputs)
    net.tensorName = [f"in{i}" for i in range(n)] + ["out0"]
    net.oplists = [
        const_op(f"in{i}", i, x) if i in consts else input_op(f"in{i}", i, x.shape, x.dtype, NCHW)
        for i, x in enumerate(inputs)
    ]
    net.oplists.append(make_op(OpType.While, "loop", range(n), [n], param, OpParameter.LoopParam))
    net.extraTensorDescribe = [describe(i, x.shape, x.dtype, NCHW) for i, x in enumerate(inputs)]
    net.extraTensorDescribe.append(describe(n, out_shape, np.dtype(out_dtype), NCHW))
    net.outputName, net.usage = ["out0"], 2
    return pack_net(net)


def loop(n_in: int, loop_number: int, commands, init=None, parallel=True) -> LoopParamT:
    p = LoopParamT()
    p.tensorNumber = n_in + 1
    p.inputIndexes, p.outputIndexes = list(range(n_in)), [n_in]
    p.loopNumber, p.parallel = loop_number, parallel
    p.commands, p.initCommand = list(commands), init
    return p


def reference(inputs: Sequence[np.ndarray], out: np.ndarray, p: LoopParamT) -> np.ndarray:
    """MNN's CPULoop iteration by iteration, element by element (flat arrays)."""
    stack: list[Any] = [x.ravel().copy() for x in inputs] + [out.ravel().copy()]
    for c in p.initCommand or ():
        if c.op is None:
            stack[c.indexes[0]][:] = 0
            continue
        for z, y, x in itertools.product(*(range(s) for s in c.size)):
            d = sum(a * b for a, b in zip((z, y, x), c.view[0].stride, strict=True))
            s = sum(a * b for a, b in zip((z, y, x), c.view[1].stride, strict=True))
            stack[c.indexes[0]][d] = stack[c.indexes[1]][s]
    gather = len(p.commands) == 1 and p.commands[0].op.main is None and p.commands[0].fuse < 0
    for t in range(p.loopNumber):
        for c in p.commands:
            base = [
                (t if c.iterIndexes[v] < 0 else int(stack[c.iterIndexes[v]][t])) * c.steps[v]
                + c.view[v].offset
                for v in range(len(c.indexes))
            ]
            dst = stack[c.indexes[0]]
            if gather and not 0 <= base[0] < dst.size:
                continue
            if c.op.type == OpType.MatMul:
                e, depth, h = c.size
                for i, j in itertools.product(range(e), range(h)):
                    acc = 0.0
                    for k in range(depth):
                        a = stack[c.indexes[1]][
                            base[1] + i * c.view[1].stride[0] + k * c.view[1].stride[1]
                        ]
                        b = stack[c.indexes[2]][
                            base[2] + k * c.view[2].stride[1] + j * c.view[2].stride[2]
                        ]
                        acc += float(a) * float(b)
                    if len(c.indexes) > 3:
                        acc += stack[c.indexes[3]][base[3] + j * c.view[3].stride[2]]
                    dst[base[0] + i * c.view[0].stride[0] + j * c.view[0].stride[2]] = acc
                continue
            for z, y, x in itertools.product(*(range(s) for s in c.size)):
                at = [
                    base[v]
                    + z * c.view[v].stride[0]
                    + y * c.view[v].stride[1]
                    + x * c.view[v].stride[2]
                    for v in range(len(c.indexes))
                ]
                if gather and not 0 <= base[1] < stack[c.indexes[1]].size:
                    dst[at[0]] = 0
                    continue
                a = stack[c.indexes[1]][at[1]]
                if c.op.type == OpType.BinaryOp:
                    b = stack[c.indexes[2]][at[2]]
                    value = {B.ADD: a + b, B.SUB: a - b, B.MUL: a * b, B.MAXIMUM: max(a, b)}[
                        c.op.main.opType
                    ]
                elif c.op.main is not None:
                    value = {U.ABS: abs(a), U.NEG: -a, U.SQUARE: a * a}[c.op.main.opType]
                else:
                    value = a
                if c.fuse == B.ADD:
                    value = dst[at[0]] + value
                elif c.fuse == B.MUL:
                    value = dst[at[0]] * value
                dst[at[0]] = value
    return stack[-1]


def check(inputs, consts, out_shape, out_dtype, p: LoopParamT, garbage: bool = True) -> None:
    """Runs at 1 and 2 threads; with ``garbage`` (loops that write their whole output) once
    more with garbage in the output's storage."""
    want = reference(inputs, np.zeros(out_shape, out_dtype), p).reshape(out_shape)
    data = loop_net(inputs, consts, out_shape, out_dtype, p)
    feed = {f"in{i}": x for i, x in enumerate(inputs) if i not in consts}
    for threads in (1, 2):
        session, outs = run_net(data, feed, ScheduleConfig(num_thread=threads))
        np.testing.assert_allclose(outs["out0"], want, rtol=1e-5, atol=1e-5)
        if garbage:
            out = session.get_output("out0")
            assert out.host is not None
            out.host[:] = 77
            session.run()
            np.testing.assert_allclose(out.numpy(), want, rtol=1e-5, atol=1e-5)


def test_gather_rows_with_out_of_range_indexes() -> None:
    """MNN's gather path: an input base outside the input writes zeros, an output base
    outside the output nothing."""
    x = RNG.randn(5, 4).astype(np.float32)
    idx = np.array([3, 0, 7, -1, 4, 2], np.int32)
    cmd = command(
        "copy", [2, 0], [(0, (4, 4, 1)), (0, (4, 4, 1))], (1, 1, 4), steps=[4, 4], iters=[-1, 1]
    )
    check([x, idx], {1: idx}, (6, 4), np.float32, loop(2, 6, [cmd]))
    cmd = command(
        "copy", [2, 0], [(0, (4, 4, 1)), (0, (4, 4, 1))], (1, 1, 4), steps=[4, 4], iters=[1, -1]
    )  # scatter rows: index 7 and -1 are skipped
    init = [command("zero", [2], [], (1, 1, 1))]
    check(
        [x, np.array([1, 0, 7, -1, 3], np.int32)],
        {1: np.array([1, 0, 7, -1, 3], np.int32)},
        (6, 4),
        np.float32,
        loop(2, 5, [cmd], init=init, parallel=False),
    )


@pytest.mark.parametrize("bias", [False, True])
@pytest.mark.parametrize("ta,tb", [(False, False), (True, False), (False, True)])
def test_batched_matmul_with_broadcast(ta: bool, tb: bool, bias: bool) -> None:
    e, d, h, batch = 3, 4, 5, 3
    a = RNG.randn(batch, *((d, e) if ta else (e, d))).astype(np.float32)
    b = RNG.randn(*((h, d) if tb else (d, h))).astype(np.float32)  # one B for every batch
    views = [
        (0, (h, 0, 1)),
        (0, (1, e, 0) if ta else (d, 1, 0)),
        (0, (0, 1, d) if tb else (0, h, 1)),
    ]
    inputs, steps = [a, b], [e * h, e * d, 0]
    if bias:
        inputs.append(RNG.randn(h).astype(np.float32))
        views.append((0, (0, 0, 1)))
        steps.append(0)
    n = len(inputs)
    cmd = command("matmul", [n, *range(n)], views, (e, d, h), steps=steps, ta=ta, tb=tb)
    check(inputs, {}, (batch, e, h), np.float32, loop(n, batch, [cmd]))


def test_binary_broadcast_and_unary_strided() -> None:
    a = RNG.randn(3, 4, 5).astype(np.float32)
    b = RNG.randn(4, 1).astype(np.float32)
    cmds = [
        command(
            "binary",
            [2, 0, 1],
            [(0, (20, 5, 1)), (0, (20, 5, 1)), (0, (0, 1, 0))],
            (1, 4, 5),
            steps=[20, 20, 0],
            code=B.MAXIMUM,
        )
    ]
    check([a, b], {}, (3, 4, 5), np.float32, loop(2, 3, cmds))
    cmds = [
        command(
            "unary",
            [1, 0],
            [(0, (20, 5, 1)), (0, (1, 3, 12))],
            (3, 4, 4),
            steps=[0, 0],
            code=U.SQUARE,
        )
    ]
    check([a], {}, (3, 4, 5), np.float32, loop(1, 1, cmds), garbage=False)


def test_int_binary() -> None:
    a = RNG.randint(-50, 50, (2, 6)).astype(np.int32)
    cmds = [
        command(
            "binary",
            [1, 0, 0],
            [(0, (6, 6, 1)), (0, (6, 6, 1)), (5, (6, 6, -1))],
            (1, 1, 6),
            steps=[6, 6, 6],
            code=B.MUL,
        )
    ]
    check([a], {}, (2, 6), np.int32, loop(1, 2, cmds))


def test_fuse_accumulates_duplicates_in_order() -> None:
    """ScatterElements with add: the same row accumulates from several iterations."""
    x = RNG.randn(4, 3).astype(np.float32)
    upd = RNG.randn(5, 3).astype(np.float32)
    idx = np.array([1, 1, 3, 0, 1], np.int32)
    init = [command("copy", [3, 0], [(0, (12, 3, 1)), (0, (12, 3, 1))], (1, 4, 3))]
    cmd = command(
        "copy",
        [3, 1],
        [(0, (3, 3, 1)), (0, (3, 3, 1))],
        (1, 1, 3),
        steps=[3, 3],
        iters=[2, -1],
        fuse=B.ADD,
    )
    p = loop(3, 5, [cmd], init=init, parallel=False)
    check([x, upd, idx], {2: idx}, (4, 3), np.float32, p)


def test_sequential_recurrence() -> None:
    """Each iteration reads the row the previous one wrote (CumSum): not vectorizable."""
    x = RNG.randn(5, 3).astype(np.float32)
    init = [command("copy", [1, 0], [(0, (15, 3, 1)), (0, (15, 3, 1))], (1, 1, 3))]
    cmd = command(
        "binary",
        [1, 1, 0],
        [(3, (3, 3, 1)), (0, (3, 3, 1)), (3, (3, 3, 1))],
        (1, 1, 3),
        steps=[3, 3, 3],
        code=B.ADD,
    )
    check(
        [x],
        {},
        (5, 3),
        np.float32,
        loop(
            1,
            4,
            [
                cmd,
            ],
            init=init,
            parallel=False,
        ),
    )


def _error(inputs, consts, p: LoopParamT, out_shape=(4,)) -> MNNError:
    data = loop_net(inputs, consts, out_shape, np.float32, p)
    feed = {f"in{i}": x for i, x in enumerate(inputs) if i not in consts}
    with pytest.raises(MNNError) as e:
        run_net(data, feed)
    assert "loop" in str(e.value)
    return e.value


def test_tensor_index_outside_the_stack() -> None:
    x = np.zeros(4, np.float32)
    cmd = command("copy", [1, 5], [(0, (4, 4, 1)), (0, (4, 4, 1))], (1, 1, 4))
    assert _error([x], {}, loop(1, 1, [cmd])).code == ErrorCode.INVALID_VALUE


def test_iteration_index_tensor_too_short() -> None:
    x = np.zeros(4, np.float32)
    idx = np.array([0], np.int32)
    cmds = [
        command(
            "copy", [2, 0], [(0, (1, 1, 1)), (0, (1, 1, 1))], (1, 1, 1), steps=[1, 1], iters=[-1, 1]
        ),
        command("unary", [2, 2], [(0, (1, 1, 1)), (0, (1, 1, 1))], (1, 1, 1), code=U.NEG),
    ]
    assert _error([x, idx], {1: idx}, loop(2, 4, cmds)).code == ErrorCode.INVALID_VALUE


def test_index_out_of_range_outside_the_gather_path() -> None:
    x = np.zeros(4, np.float32)
    idx = np.array([0, 9, 1, 2], np.int32)
    cmd = command(
        "copy",
        [2, 0],
        [(0, (1, 1, 1)), (0, (1, 1, 1))],
        (1, 1, 1),
        steps=[1, 1],
        iters=[-1, 1],
        fuse=B.ADD,
    )
    assert _error([x, idx], {1: idx}, loop(2, 4, [cmd])).code == ErrorCode.INVALID_VALUE


def test_gather_region_running_past_its_input() -> None:
    x = np.zeros(4, np.float32)
    idx = np.array([0, 3, 1, 2], np.int32)  # base 3 is inside, but the 2-element row is not
    cmd = command(
        "copy", [2, 0], [(0, (2, 2, 1)), (0, (2, 2, 1))], (1, 1, 2), steps=[2, 1], iters=[-1, 1]
    )
    err = _error([x, idx], {1: idx}, loop(2, 4, [cmd]), out_shape=(8,))
    assert err.code == ErrorCode.INVALID_VALUE


def test_view_count_mismatch() -> None:
    x = np.zeros(4, np.float32)
    cmd = command("copy", [1, 0], [(0, (4, 4, 1))], (1, 1, 4))
    assert _error([x], {}, loop(1, 1, [cmd])).code == ErrorCode.INVALID_VALUE


def test_while_without_a_parameter_is_invalid() -> None:
    """Neither a LoopParam nor a WhileParam: a corrupted op.

    tests/models/test_control_flow_errors.py has the broken While / If with subgraphs.
    """
    net = NetT()
    net.tensorName = ["in0", "out0"]
    net.oplists = [
        input_op("in0", 0, (4,), np.float32, NCHW),
        make_op(OpType.While, "loop", [0], [1]),
    ]
    net.outputName = ["out0"]
    with pytest.raises(MNNError) as e:
        run_net(pack_net(net), {"in0": np.zeros(4, np.float32)})
    assert e.value.code == ErrorCode.INVALID_VALUE and "'loop'" in str(e.value)


def test_broadcast_batches_through_index_tensors() -> None:
    """MNN's broadcast BatchMatMul: iteration t multiplies A[ia[t]] by B[ib[t]] (the GEMM
    kernel's batch indexes, read from the index tensors at each run)."""
    e, d, h = 3, 4, 2
    a = RNG.randn(2, e, d).astype(np.float32)
    b = RNG.randn(3, d, h).astype(np.float32)
    ia = np.array([0, 0, 0, 1, 1, 1], np.int32)
    ib = np.array([0, 1, 2, 0, 1, 2], np.int32)
    views = [(0, (h, 0, 1)), (0, (d, 1, 0)), (0, (0, h, 1))]
    cmd = command(
        "matmul", [4, 0, 1], views, (e, d, h), steps=[e * h, e * d, d * h], iters=[-1, 2, 3]
    )
    check([a, b, ia, ib], {2: ia, 3: ib}, (6, e, h), np.float32, loop(4, 6, [cmd]))
    bad = np.array([0, 0, 0, 1, 1, 2], np.int32)  # A has 2 matrices
    err = _error([a, b, bad, ib], {2: bad, 3: ib}, loop(4, 6, [cmd]), out_shape=(6, e, h))
    assert err.code == ErrorCode.INVALID_VALUE


def test_matmul_with_a_transposed_output_view() -> None:
    """Views other than the dense ones MNN's geometry writes (C stored [h, e]) still follow
    the views' strides."""
    e, d, h = 3, 4, 5
    a = RNG.randn(2, e, d).astype(np.float32)
    b = RNG.randn(d, h).astype(np.float32)
    views = [(0, (1, 0, e)), (0, (d, 1, 0)), (0, (0, h, 1))]
    cmd = command("matmul", [2, 0, 1], views, (e, d, h), steps=[e * h, e * d, 0])
    check([a, b], {}, (2, h, e), np.float32, loop(2, 2, [cmd]))
