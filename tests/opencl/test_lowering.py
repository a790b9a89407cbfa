"""OpenCL runs composites it has no execution for through the lowering (mnnpy/lowering.py).

OpenCL has no Attention execution; a stateless Attention is decomposed into MatMul, Permute,
Reshape, BinaryOp and Softmax, which all run on OPENCL (no fallback, no copy), and equals the
op's reference. A kv_cache Attention is refused by the lowering and falls back to the CPU.
"""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("pyopencl")

import mnnpy  # noqa: E402 - after the skip
from mnnpy._schema.MNN.AttentionParam import AttentionParamT  # noqa: E402
from mnnpy.net import OpDef, OpParameter, OpType  # noqa: E402
from mnnpy.ops import reference_of  # noqa: E402
from mnnpy.tensor_format import DimensionFormat  # noqa: E402
from mnnpy.testing.builders import assert_close, make_single_op_net, run_net  # noqa: E402

OPENCL = mnnpy.ForwardType.OPENCL
NCHW = DimensionFormat.NCHW
ATT = OpParameter.AttentionParam


def _case(kv_cache: bool, c4: bool, masked: bool) -> tuple[AttentionParamT, list[np.ndarray]]:
    p = AttentionParamT()
    p.kvCache, p.outputC4, p.attnScale, p.layerIndex = kv_cache, c4, 0.0, 0
    rng = np.random.default_rng(4)
    shapes = [(1, 6, 4, 8), (1, 6, 2, 8), (6, 16, 1, 1)] + ([(1, 1, 6, 6)] if masked else [])
    return p, [rng.standard_normal(s).astype(np.float32) for s in shapes]


@pytest.mark.parametrize(("c4", "masked"), [(False, True), (True, False)])
def test_stateless_attention_runs_on_opencl_through_the_lowering(c4: bool, masked: bool) -> None:
    p, inputs = _case(False, c4, masked)
    data = make_single_op_net(OpType.Attention, inputs, p, ATT, fmt=NCHW, default_format=NCHW)
    feeds = {f"in{i}": a for i, a in enumerate(inputs)}
    session, out = run_net(data, feeds, mnnpy.ScheduleConfig(type=OPENCL))
    placed = session.placement()
    assert "Attention" not in {pl.op_type for pl in placed}
    assert {pl.backend for pl in placed} == {"OPENCL"} and not any(pl.fell_back for pl in placed)
    assert session.copy_stats()[0] == 0
    op = OpDef(0, OpType.Attention, "a", tuple(range(len(inputs))), (9,), p, ATT, NCHW)
    assert_close(out["out0"], reference_of(OpType.Attention)(op, inputs)[0])


def test_kv_cache_attention_stays_whole_and_falls_back() -> None:
    p, inputs = _case(True, False, True)
    data = make_single_op_net(OpType.Attention, inputs, p, ATT, fmt=NCHW, default_format=NCHW)
    feeds = {f"in{i}": a for i, a in enumerate(inputs)}
    session, out = run_net(data, feeds, mnnpy.ScheduleConfig(type=OPENCL), quiet_fallback=True)
    (placed,) = session.placement()
    assert (placed.op_type, placed.backend, placed.fell_back) == ("Attention", "CPU", True)
    op = OpDef(0, OpType.Attention, "a", tuple(range(len(inputs))), (9,), p, ATT, NCHW)
    assert_close(out["out0"], reference_of(OpType.Attention)(op, inputs)[0])


def _block_net(s: int, c: int, nh: int, kv: int, d: int, seed: int = 2) -> tuple[bytes, dict]:
    """x [1, S, C] -> q / k / v projections -> Attention (no cache, causal) -> output projection."""
    from mnnpy._schema.MNN.MatMul import MatMulT
    from mnnpy._schema.MNN.Net import NetT
    from mnnpy._schema.MNN.Reshape import ReshapeT
    from mnnpy.net import pack_net
    from mnnpy.testing.builders import const_op, input_op, make_op

    rng = np.random.default_rng(seed)
    w = {n: (rng.standard_normal(shape) / np.sqrt(shape[0])).astype(np.float32)
         for n, shape in (("wq", (c, nh * d)), ("wk", (c, kv * d)), ("wv", (c, kv * d)),
                          ("wo", (nh * d, c)))}  # fmt: skip
    names = ["x", "wq", "wk", "wv", "wo", "q0", "k0", "v", "q", "k", "a", "out"]
    idx = {n: i for i, n in enumerate(names)}
    net = NetT()
    net.tensorName = names
    ops = [input_op("x", 0, (1, s, c), fmt=NCHW)]
    ops += [const_op(n, idx[n], w[n]) for n in ("wq", "wk", "wv", "wo")]

    def mm(a: str, b: str, y: str) -> None:
        ops.append(make_op(OpType.MatMul, y, [idx[a], idx[b]], [idx[y]], MatMulT(),
                           OpParameter.MatMul))  # fmt: skip

    def rs(a: str, dims: list[int], y: str) -> None:
        p = ReshapeT()
        p.dims, p.dimType = dims, NCHW
        ops.append(make_op(OpType.Reshape, y, [idx[a]], [idx[y]], p, OpParameter.Reshape))

    mm("x", "wq", "q0")
    mm("x", "wk", "k0")
    mm("x", "wv", "v")
    rs("q0", [1, -1, nh, d], "q")
    rs("k0", [1, -1, kv, d], "k")
    p, _ = _case(False, False, False)
    ops.append(make_op(OpType.Attention, "attention", [idx["q"], idx["k"], idx["v"]], [idx["a"]],
                       p, ATT))  # fmt: skip
    mm("a", "wo", "out")
    net.oplists = ops
    net.outputName = ["out"]
    return pack_net(net), w


def test_attention_block_runs_on_opencl_through_the_lowering() -> None:
    """A small attention block (projections, GQA Attention, output projection): every op on
    OPENCL, equal to a NumPy evaluation with the op's reference; a new length after resize."""
    s, c, nh, kv, d = 6, 32, 4, 2, 8
    data, w = _block_net(s, c, nh, kv, d)
    net = mnnpy.Interpreter.from_buffer(data)
    session = net.create_session(mnnpy.ScheduleConfig(type=OPENCL))
    placed = session.placement()
    assert {pl.backend for pl in placed} == {"OPENCL"} and "Attention" not in {
        pl.op_type for pl in placed
    }
    p, _ = _case(False, False, False)
    op = OpDef(0, OpType.Attention, "a", (0, 1, 2), (3,), p, ATT, NCHW)
    for seq in (s, 9):
        x = np.random.default_rng(seq).standard_normal((1, seq, c)).astype(np.float32)
        t = net.get_session_input(session, "x")
        if t.shape != x.shape:
            net.resize_tensor(t, x.shape)
            net.resize_session(session)
        t.copy_from(x)
        net.run_session(session)
        q = (x @ w["wq"]).reshape(1, seq, nh, d)
        k = (x @ w["wk"]).reshape(1, seq, kv, d)
        v = x @ w["wv"]
        att = reference_of(OpType.Attention)(op, [q, k, v])[0]
        assert_close(net.get_session_output(session, "out").numpy(), att @ w["wo"])
    assert session.copy_stats()[0] == 0
