"""Grouped-query attention: k and v heads repeated by Unsqueeze -> Expand -> Reshape (as
decoders export ``repeat_kv``) join the fused attention, which reads each k / v head once for
its ``r`` query heads (``kernels/sdpa.pyx``'s ``kv_rep``). Oracles: the same graph with the
substitutions off, and NumPy."""

from __future__ import annotations

import numpy as np
import pytest

import mnnpy
from mnnpy import substitute
from mnnpy._schema.MNN.Axis import AxisT
from mnnpy._schema.MNN.MatMul import MatMulT
from mnnpy._schema.MNN.Net import NetT
from mnnpy._schema.MNN.OpParameter import OpParameter
from mnnpy._schema.MNN.OpType import OpType
from mnnpy._schema.MNN.Permute import PermuteT
from mnnpy._schema.MNN.Reshape import ReshapeT
from mnnpy._schema.MNN.SqueezeParam import SqueezeParamT
from mnnpy.net import pack_net
from mnnpy.tensor_format import DimensionFormat
from mnnpy.testing.builders import assert_close, const_op, input_op, make_op, run_net

NCHW = DimensionFormat.NCHW


def _repeat(name: str, src: int, first: int, shape: tuple[int, ...], rep: int, unsq: bool) -> list:
    """Tensor ``src`` ``[1, h, n, d]`` (``[1, h, 1, n, d]`` when not ``unsq``) repeated ``rep``
    times per head into ``first + 3``; uses tensors ``first`` to ``first + 3``."""
    _, h, n, d = shape
    ops = []
    if unsq:
        p = SqueezeParamT()
        p.squeezeDims = [2]
        ops.append(make_op(OpType.Unsqueeze, f"{name}_unsq", [src], [first], p,
                           OpParameter.SqueezeParam))  # fmt: skip
        src = first
    ops.append(const_op(f"{name}_shape", first + 1, np.array([1, h, rep, n, d], np.int32)))
    ops.append(make_op(OpType.BroadcastTo, f"{name}_expand", [src, first + 1], [first + 2]))
    r = ReshapeT()
    r.dims, r.dimType = [1, h * rep, n, d], int(NCHW)
    ops.append(make_op(OpType.Reshape, f"{name}_reshape", [first + 2], [first + 3], r,
                       OpParameter.Reshape))  # fmt: skip
    return ops


def gqa_net(h: int, rep: int, m: int, n: int, d: int, dv: int, unsq: bool, vperm: bool) -> bytes:
    """``vperm``: v comes as ``[1, n, h, dv]``, split into heads by a Permute."""
    net = NetT()
    net.tensorName = [f"t{i}" for i in range(17)]
    net.tensorName[:3] = ["q", "k", "v"]
    net.tensorName[15] = "out"
    kv = (1, h, n) if unsq else (1, h, 1, n)
    net.oplists = [
        input_op("q", 0, (1, h * rep, m, d), fmt=NCHW),
        input_op("k", 1, (*kv, d), fmt=NCHW),
        input_op("v", 2, (1, n, h, dv) if vperm else (*kv, dv), fmt=NCHW),
        *_repeat("k", 1, 3, (1, h, n, d), rep, unsq),
        *_repeat("v", 16 if vperm else 2, 7, (1, h, n, dv), rep, unsq),
    ]
    if vperm:
        heads = PermuteT()
        heads.dims = [0, 2, 1, 3]
        net.oplists.insert(3, make_op(OpType.Permute, "vp", [2], [16], heads, OpParameter.Permute))
    perm = PermuteT()
    perm.dims = [0, 1, 3, 2]
    axis = AxisT()
    axis.axis = -1
    net.oplists += [
        make_op(OpType.Permute, "kt", [6], [11], perm, OpParameter.Permute),
        make_op(OpType.MatMul, "qk", [0, 11], [12], MatMulT(), OpParameter.MatMul),
        make_op(OpType.Softmax, "softmax", [12], [13], axis, OpParameter.Axis),
        make_op(OpType.MatMul, "pv", [13, 10], [15], MatMulT(), OpParameter.MatMul),
    ]
    net.outputName, net.tensorNumber = ["out"], 17
    return pack_net(net)


@pytest.mark.parametrize(
    ("h", "rep", "unsq", "vperm"),
    [(2, 2, True, False), (3, 4, True, False), (2, 3, False, False), (2, 2, True, True)],
)
@pytest.mark.parametrize("threads", [1, 2])
def test_repeated_kv_heads_join_the_attention(
    h: int, rep: int, unsq: bool, vperm: bool, threads: int
) -> None:
    m, n, d, dv = 13, 11, 8, 6
    rng = np.random.default_rng(h * 10 + rep)
    kv = (1, h, n) if unsq else (1, h, 1, n)
    feeds = {
        "q": rng.standard_normal((1, h * rep, m, d)).astype(np.float32),
        "k": rng.standard_normal((*kv, d)).astype(np.float32),
        "v": rng.standard_normal((*kv, dv)).astype(np.float32),
    }
    if vperm:  # the same heads, stored [1, n, h, dv]
        feeds["v"] = np.ascontiguousarray(feeds["v"].transpose(0, 2, 1, 3))
    data = gqa_net(h, rep, m, n, d, dv, unsq, vperm)
    config = mnnpy.ScheduleConfig(num_thread=threads)
    with substitute.disabled():
        _, plain = run_net(data, feeds, config)
    session, got = run_net(data, feeds, config)
    assert_close(got["out"], plain["out"])
    k = np.repeat(feeds["k"].reshape(h, n, d), rep, axis=0).astype(np.float64)
    vh = feeds["v"].transpose(0, 2, 1, 3) if vperm else feeds["v"]
    v = np.repeat(vh.reshape(h, n, dv), rep, axis=0).astype(np.float64)
    s = feeds["q"][0].astype(np.float64) @ k.transpose(0, 2, 1)
    e = np.exp(s - s.max(-1, keepdims=True))
    want = (e / e.sum(-1, keepdims=True)) @ v
    np.testing.assert_allclose(got["out"][0], want, rtol=1e-3, atol=1e-4)
    groups = {p.op_name: p.group for p in session.placement()}
    joined = {"k_expand", "k_reshape", "v_expand", "v_reshape", "kt", "qk", "softmax", "pv"}
    joined |= ({"k_unsq", "v_unsq"} if unsq else set()) | ({"vp"} if vperm else set())
    assert {o for o, g in groups.items() if g == "qk+attention"} == joined
