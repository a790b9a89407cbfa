"""CPU GroupNorm fusion (``executions/group_norm_fused.py``) against the same ops one by one."""

from __future__ import annotations

import numpy as np
import pytest

import mnnpy
from mnnpy import substitute
from mnnpy._schema.MNN.BinaryOp import BinaryOpT
from mnnpy._schema.MNN.LayerNorm import LayerNormT
from mnnpy._schema.MNN.Net import NetT
from mnnpy._schema.MNN.OpParameter import OpParameter
from mnnpy._schema.MNN.OpType import OpType
from mnnpy._schema.MNN.Reshape import ReshapeT
from mnnpy._schema.MNN.TensorConvertInfo import TensorConvertInfoT
from mnnpy._schema.MNN.UnaryOp import UnaryOpT
from mnnpy.net import pack_net
from mnnpy.tensor_format import DimensionFormat
from mnnpy.testing.builders import assert_close, const_op, input_op, make_op, run_net
from tests.kernels.test_group_norm_kernel import group_norm_reference

NCHW, NC4HW4 = DimensionFormat.NCHW, DimensionFormat.NC4HW4
MUL, ADD, GELU = 2, 0, 32


def _convert(name: str, src: int, dst: int, a: DimensionFormat, b: DimensionFormat) -> object:
    p = TensorConvertInfoT()
    p.source, p.dest = int(a), int(b)
    return make_op(OpType.ConvertTensor, name, [src], [dst], p, OpParameter.TensorConvertInfo)


def _reshape(name: str, src: int, dst: int, dims: list[int]) -> object:
    p = ReshapeT()
    p.dims, p.dimType = dims, int(NCHW)
    return make_op(OpType.Reshape, name, [src], [dst], p, OpParameter.Reshape)


def _bin(name: str, a: int, b: int, out: int, code: int) -> object:
    p = BinaryOpT()
    p.opType = code
    return make_op(OpType.BinaryOp, name, [a, b], [out], p, OpParameter.BinaryOp)


def group_norm_net(shape: tuple[int, int, int], group: int, packed: bool, act: bool) -> bytes:
    """PyTorch's GroupNorm export as MNN's converter lays it out around NC4HW4 convolutions:
    [to NC4HW4] -> Reshape [N, G, -1] -> to NCHW -> LayerNorm -> Reshape back -> Mul gamma ->
    Add beta [-> GELU] [-> to NC4HW4]."""
    n, c, area = shape
    rng = np.random.default_rng(c)
    ln = LayerNormT()
    ln.axis, ln.epsilon = [-1], 1e-5
    net = NetT()
    net.tensorName = [f"t{i}" for i in range(13)]
    ops = [input_op("t0", 0, shape, fmt=NCHW)]
    ops += [const_op("gamma", 7, rng.standard_normal((c, 1)).astype(np.float32))]
    ops += [const_op("beta", 9, rng.standard_normal((c, 1)).astype(np.float32))]
    ops += [_convert("pack", 0, 1, NCHW, NC4HW4) if packed else _reshape("copy", 0, 1, [*shape])]
    ops += [_reshape("grouped", 1, 2, [n, group, -1])]
    ops += [
        _convert("unpack", 2, 3, NC4HW4, NCHW) if packed else _reshape("same", 2, 3, [0, 0, -1])
    ]
    ops += [make_op(OpType.LayerNorm, "ln", [3], [4], ln, OpParameter.LayerNorm)]
    ops += [_reshape("back", 4, 5, [*shape]), _bin("mul", 5, 7, 6, MUL), _bin("add", 6, 9, 8, ADD)]
    last = 8
    if act:
        u = UnaryOpT()
        u.opType = GELU
        ops += [make_op(OpType.UnaryOp, "gelu", [8], [10], u, OpParameter.UnaryOp)]
        last = 10
    if packed:
        ops += [_convert("repack", last, 11, NCHW, NC4HW4)]
        last = 11
    net.oplists, net.outputName = ops, [f"t{last}"]
    net.tensorNumber = len(net.tensorName)
    return pack_net(net)


@pytest.mark.parametrize("shape, group", [((2, 16, 7), 4), ((1, 12, 5), 3), ((1, 128, 99), 32)])
@pytest.mark.parametrize("packed", [False, True])
@pytest.mark.parametrize("act", [False, True])
@pytest.mark.parametrize("threads", [1, 2])
def test_group_norm_ops_run_as_two_kernels(
    shape: tuple[int, int, int], group: int, packed: bool, act: bool, threads: int
) -> None:
    if packed and (shape[1] // group) % 4:
        pytest.skip("3 channels per group: packed groups are not whole blocks, not fused")
    data = group_norm_net(shape, group, packed, act)
    x = (np.random.default_rng(5).standard_normal(shape) * 2 + 1).astype(np.float32)
    config = mnnpy.ScheduleConfig(num_thread=threads)
    with substitute.disabled():
        _, plain = run_net(data, {"t0": x}, config)
    session, got = run_net(data, {"t0": x}, config)
    (name,) = plain
    assert_close(got[name], plain[name])
    if not act:  # the NumPy GroupNorm, as an independent oracle
        rng = np.random.default_rng(shape[1])
        gamma, beta = (rng.standard_normal(shape[1]).astype(np.float32) for _ in range(2))
        assert_close(got[name], group_norm_reference(x, group, gamma, beta).astype(np.float32))
    groups = {p.group for p in session.placement()} - {None}
    assert len(groups) == 2 and all(g.endswith("+group_norm") for g in groups)
