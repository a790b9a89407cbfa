"""CPU attention fusion (``executions/attention_fused.py``) against the same ops run one by one."""

from __future__ import annotations

import numpy as np
import pytest

import mnnpy
from mnnpy import substitute
from mnnpy._schema.MNN.Axis import AxisT
from mnnpy._schema.MNN.BinaryOp import BinaryOpT
from mnnpy._schema.MNN.MatMul import MatMulT
from mnnpy._schema.MNN.Net import NetT
from mnnpy._schema.MNN.OpParameter import OpParameter
from mnnpy._schema.MNN.OpType import OpType
from mnnpy._schema.MNN.Permute import PermuteT
from mnnpy.net import pack_net
from mnnpy.tensor_format import DimensionFormat
from mnnpy.testing.builders import assert_close, const_op, input_op, make_op, run_net

NCHW = DimensionFormat.NCHW


def _binary(code: int) -> BinaryOpT:
    p = BinaryOpT()
    p.opType = code
    return p


def attention_net(
    b: int,
    m: int,
    n: int,
    d: int,
    kform: str,
    mask: tuple[int, ...] | None,
    scale: int | None,
    select: bool = False,
) -> bytes:
    """q @ k [* or / c] [+ mask] -> Softmax(-1) -> @ v; k is ``[b, n, d]`` read transposed
    (``kform`` "tb"), ``[b, d, n]`` ("plain") or ``[b, n, d]`` through a Permute ("permute")."""
    net = NetT()
    net.tensorName = ["q", "k", "v", "s", "c", "t", "mask", "u", "p", "out", "kt", "fill"]
    heads = kform == "heads"  # k [1, n, b, d] through Permute (0, 2, 3, 1), the rest [1, b, ...]
    kshape = {"plain": (b, d, n), "heads": (1, n, b, d)}.get(kform, (b, n, d))
    lead = (1, b) if heads else (b,)
    ops = [input_op("q", 0, (*lead, m, d), fmt=NCHW), input_op("k", 1, kshape, fmt=NCHW)]
    ops += [input_op("v", 2, (*lead, n, d + 3), fmt=NCHW)]
    ops += [const_op("c", 4, np.float32([8.0 if scale == 7 else 0.125]))]
    k = 1
    if kform in ("permute", "heads"):
        perm = PermuteT()
        perm.dims = [0, 2, 3, 1] if heads else [0, 2, 1]
        ops.append(make_op(OpType.Permute, "kt", [1], [10], perm, OpParameter.Permute))
        k = 10
    mm = MatMulT()
    mm.transposeB = kform == "tb"
    ops.append(make_op(OpType.MatMul, "qk", [0, k], [3], mm, OpParameter.MatMul))
    src = 3
    if scale is not None:
        op = make_op(OpType.BinaryOp, "scale", [3, 4], [5], _binary(scale), OpParameter.BinaryOp)
        ops.append(op)
        src = 5
    if mask is not None and select:  # mask holds a condition: -1e9 where it is non-zero
        ops.append(input_op("mask", 6, mask, dtype=np.int32, fmt=NCHW))
        ops.append(const_op("fill", 11, np.float32(-1e9)))
        ops.append(make_op(OpType.Select, "mask_add", [6, 11, src], [7]))
        src = 7
    elif mask is not None:
        ops.append(input_op("mask", 6, mask, fmt=NCHW))
        add = make_op(OpType.BinaryOp, "mask_add", [6, src], [7], _binary(0), OpParameter.BinaryOp)
        ops.append(add)
        src = 7
    axis = AxisT()
    axis.axis = -1
    ops.append(make_op(OpType.Softmax, "softmax", [src], [8], axis, OpParameter.Axis))
    ops.append(make_op(OpType.MatMul, "pv", [8, 2], [9], MatMulT(), OpParameter.MatMul))
    net.oplists, net.outputName = ops, ["out"]
    net.tensorNumber = len(net.tensorName)
    return pack_net(net)


@pytest.mark.parametrize(
    ("kform", "mask", "scale"),
    [
        ("plain", None, 2),  # MUL
        ("tb", None, 7),  # REALDIV
        ("permute", "full", 2),
        ("tb", "rows", 2),
        ("plain", "one", 2),
        ("permute", "full", None),  # the PyTorch export scales q and k before the product
        ("permute", "select", 2),  # a causal mask as Select(cond, -1e9, scores)
        ("tb", "select_rows", None),
        ("heads", None, 7),  # k [1, n, H, d] made [1, H, d, n] by the Permute
    ],
)
@pytest.mark.parametrize("threads", [1, 2])
def test_attention_runs_as_one_group_and_matches_the_ops(
    kform: str, mask: str | None, scale: int | None, threads: int
) -> None:
    b, m, n, d = 3, 21, 17, 8
    shapes = {None: None, "full": (b, m, n), "rows": (b, 1, n), "one": (1, 1, n)}
    shapes |= {"select": (1, m, n), "select_rows": (b, 1, n)}
    select = mask is not None and mask.startswith("select")
    data = attention_net(b, m, n, d, kform, shapes[mask], scale, select)
    rng = np.random.default_rng(3)
    lead = (1, b) if kform == "heads" else (b,)
    kshape = {"plain": (b, d, n), "heads": (1, n, b, d)}.get(kform, (b, n, d))
    feeds = {
        "q": rng.standard_normal((*lead, m, d)).astype(np.float32),
        "k": rng.standard_normal(kshape).astype(np.float32),
        "v": rng.standard_normal((*lead, n, d + 3)).astype(np.float32),
    }
    if mask is not None:
        masked = rng.random(shapes[mask]) < 0.3
        masked[..., 0] = False  # every row keeps one key
        values = np.where(masked, -1e9, rng.standard_normal(shapes[mask]))
        feeds["mask"] = masked.astype(np.int32) if select else values.astype(np.float32)
    config = mnnpy.ScheduleConfig(num_thread=threads)
    with substitute.disabled():
        _, plain = run_net(data, feeds, config)
    session, got = run_net(data, feeds, config)
    assert_close(got["out"], plain["out"])
    groups = {p.op_name: p.group for p in session.placement()}
    assert set(groups.values()) == {"qk+attention"}  # every op inside the one group
    assert session.tensors[3].describe.backend is None  # the scores never had memory


def test_attention_with_a_shared_k_is_not_fused() -> None:
    """k's Permute has another reader: the Permute stays; the rest still fuses."""
    data = attention_net(2, 5, 7, 4, "permute", None, 2)
    net = NetT.InitFromPackedBuf(data, 0)
    net.outputName = ["out", "kt"]  # the transposed k is an output too
    data = pack_net(net)
    rng = np.random.default_rng(1)
    feeds = {n: rng.standard_normal(s).astype(np.float32)
             for n, s in (("q", (2, 5, 4)), ("k", (2, 7, 4)), ("v", (2, 7, 7)))}  # fmt: skip
    with substitute.disabled():
        _, plain = run_net(data, feeds)
    session, got = run_net(data, feeds)
    assert_close(got["out"], plain["out"])
    groups = {p.op_name: p.group for p in session.placement()}
    assert groups["kt"] != "qk+attention" and groups["pv"] == "qk+attention"


def _permute(name: str, src: int, dst: int, dims: list[int]) -> object:
    perm = PermuteT()
    perm.dims = dims
    return make_op(OpType.Permute, name, [src], [dst], perm, OpParameter.Permute)


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("shared_q", [False, True])
def test_head_permutes_run_inside_the_attention(threads: int, shared_q: bool) -> None:
    """q, k, v ``[1, seq, H, d]`` split into heads by Permutes, the result merged back by one:
    the kernel reads and writes the unpermuted tensors, so the four Permutes join the group (q's
    stays out when the permuted q is also an output)."""
    m, n, h, d, dv = 19, 23, 3, 8, 5
    net = NetT()
    net.tensorName = ["q", "k", "v", "qt", "kt", "vt", "s", "p", "o", "out"]
    net.oplists = [
        input_op("q", 0, (1, m, h, d), fmt=NCHW),
        input_op("k", 1, (1, n, h, d), fmt=NCHW),
        input_op("v", 2, (1, n, h, dv), fmt=NCHW),
        _permute("qp", 0, 3, [0, 2, 1, 3]),
        _permute("kp", 1, 4, [0, 2, 3, 1]),
        _permute("vp", 2, 5, [0, 2, 1, 3]),
        make_op(OpType.MatMul, "qk", [3, 4], [6], MatMulT(), OpParameter.MatMul),
    ]
    axis = AxisT()
    axis.axis = -1
    net.oplists += [
        make_op(OpType.Softmax, "softmax", [6], [7], axis, OpParameter.Axis),
        make_op(OpType.MatMul, "pv", [7, 5], [8], MatMulT(), OpParameter.MatMul),
        _permute("op", 8, 9, [0, 2, 1, 3]),
    ]
    net.outputName = ["out", "qt"] if shared_q else ["out"]
    net.tensorNumber = len(net.tensorName)
    data = pack_net(net)
    rng = np.random.default_rng(5)
    feeds = {
        "q": rng.standard_normal((1, m, h, d)).astype(np.float32),
        "k": rng.standard_normal((1, n, h, d)).astype(np.float32),
        "v": rng.standard_normal((1, n, h, dv)).astype(np.float32),
    }
    config = mnnpy.ScheduleConfig(num_thread=threads)
    with substitute.disabled():
        _, plain = run_net(data, feeds, config)
    session, got = run_net(data, feeds, config)
    assert got["out"].shape == (1, m, h, dv)
    assert_close(got["out"], plain["out"])
    groups = {p.op_name: p.group for p in session.placement()}
    inside = {"kp", "vp", "qk", "softmax", "pv", "op"} | (set() if shared_q else {"qp"})
    assert {o for o, g in groups.items() if g == "qk+attention"} == inside


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize(("scale", "mask"), [(None, False), (2, True), (7, False)])
def test_constant_scales_of_q_and_k_join_the_attention(
    threads: int, scale: int | None, mask: bool
) -> None:
    """PyTorch's export: q * c1 and Permute(k) * c2 before the product (then [* or / c]
    [+ mask]): both MULs and the Permute join the group, their constants scale the scores."""
    b, m, n, d = 2, 13, 11, 8
    net = NetT()
    net.tensorName = ["q", "k", "v", "c1", "c2", "qs", "kt", "ks", "s", "c", "t", "mask"]
    net.tensorName += ["u", "p", "out"]
    ops = [input_op("q", 0, (1, b, m, d), fmt=NCHW), input_op("k", 1, (1, b, n, d), fmt=NCHW)]
    ops += [input_op("v", 2, (1, b, n, d), fmt=NCHW)]
    ops += [const_op("c1", 3, np.float32([0.5])), const_op("c2", 4, np.float32([0.75]))]
    ops += [const_op("c", 9, np.float32([8.0 if scale == 7 else 0.125]))]
    mul = _binary(2)
    ops.append(make_op(OpType.BinaryOp, "qs", [0, 3], [5], mul, OpParameter.BinaryOp))
    ops.append(_permute("kt", 1, 6, [0, 1, 3, 2]))
    ops.append(make_op(OpType.BinaryOp, "ks", [4, 6], [7], mul, OpParameter.BinaryOp))
    ops.append(make_op(OpType.MatMul, "qk", [5, 7], [8], MatMulT(), OpParameter.MatMul))
    src = 8
    if scale is not None:
        op = make_op(OpType.BinaryOp, "scale", [8, 9], [10], _binary(scale), OpParameter.BinaryOp)
        ops.append(op)
        src = 10
    if mask:
        ops.append(input_op("mask", 11, (1, 1, m, n), fmt=NCHW))
        add = make_op(
            OpType.BinaryOp, "mask_add", [11, src], [12], _binary(0), OpParameter.BinaryOp
        )
        ops.append(add)
        src = 12
    axis = AxisT()
    axis.axis = -1
    ops.append(make_op(OpType.Softmax, "softmax", [src], [13], axis, OpParameter.Axis))
    ops.append(make_op(OpType.MatMul, "pv", [13, 2], [14], MatMulT(), OpParameter.MatMul))
    net.oplists, net.outputName = ops, ["out"]
    net.tensorNumber = len(net.tensorName)
    data = pack_net(net)
    rng = np.random.default_rng(7)
    feeds = {t: 3 * rng.standard_normal((1, b, m if t == "q" else n, d)).astype(np.float32)
             for t in "qkv"}  # fmt: skip
    if mask:
        feeds["mask"] = np.where(rng.random((1, 1, m, n)) < 0.3, -1e9, 0.0).astype(np.float32)
        feeds["mask"][..., 0] = 0.0
    config = mnnpy.ScheduleConfig(num_thread=threads)
    with substitute.disabled():
        _, plain = run_net(data, feeds, config)
    session, got = run_net(data, feeds, config)
    assert_close(got["out"], plain["out"])
    qk = (feeds["q"] * 0.5) @ (feeds["k"] * 0.75).transpose(0, 1, 3, 2)
    qk = qk * 0.125 if scale == 2 else (qk / 8.0 if scale == 7 else qk)
    e = np.exp(qk + feeds.get("mask", 0.0) - (qk + feeds.get("mask", 0.0)).max(-1, keepdims=True))
    assert_close(got["out"], (e / e.sum(-1, keepdims=True)) @ feeds["v"])  # NumPy's oracle
    groups = {p.op_name: p.group for p in session.placement()}
    assert set(groups.values()) == {"qk+attention"}  # both MULs and the Permute inside
