"""``fusion_match.takes_last`` / ``joins_last`` against the probe they stand in for.

The rope finder asked each slice's NumPy reference what it makes of a probe of distinct values
(``rope_fused._selects``); for StridedSlice and Concat it now reads the plan / axis instead. Over
random parameters (begin, end, strides, masks, ranks, axes) both must answer the same.
"""

from __future__ import annotations

import numpy as np

from mnnpy._schema.MNN.Axis import AxisT
from mnnpy._schema.MNN.StridedSliceParam import StridedSliceParamT
from mnnpy.backend.cpu.executions import rope_fused as R
from mnnpy.fusion_match import joins_last, takes_last
from mnnpy.net import OpDef, OpParameter, OpType
from mnnpy.optimization import Node
from mnnpy.tensor import Tensor
from mnnpy.tensor_format import DimensionFormat as F

I32 = np.int32


def _known(v: np.ndarray) -> Tensor:
    t = Tensor(v.shape, v.dtype, F.NCHW, name="c")
    t.describe.content = v
    return t


def _slice_node(rng: np.random.Generator, shape: tuple[int, ...]) -> Node:
    p = StridedSliceParamT()
    for mask in ("beginMask", "endMask", "shrinkAxisMask", "newAxisMask", "ellipsisMask"):
        setattr(p, mask, int(rng.choice([0, 0, 0, 1, 2, 1 << (len(shape) - 1)])))
    p.fromType = int(rng.integers(0, 2))
    r, d = len(shape), shape[-1]
    n = int(rng.integers(max(r - 1, 1), r + 1))
    if rng.random() < 0.5:  # the halves, as exporters write them (or near them)
        h = d // 2
        b = [0] * (n - 1) + [int(rng.choice([0, h, h - 1, -h]))]
        e = list(shape[: n - 1]) + [int(rng.choice([h, d, d + 5, 2**31 - 1, -1]))]
        if rng.random() < 0.3:
            e[0] = int(rng.choice([1, 2**31 - 1, -1]))
        s = [1] * n
        if rng.random() < 0.2:
            s[int(rng.integers(0, n))] = int(rng.choice([-1, 2]))
    else:
        b = [int(x) for x in rng.integers(-6, 6, n)]
        e = [int(x) for x in rng.integers(-6, 70, n)]
        s = [int(x) for x in rng.choice([-2, -1, 1, 1, 1, 2], n)]
    dt = rng.choice([I32, np.int64])
    values = [np.array(v, dt) for v in (b, e, s)]
    if rng.random() < 0.1:
        values.append(np.array([1] * n, dt))  # axes
    op = OpDef(0, OpType.StridedSlice, "ss", (), (), p, OpParameter.StridedSliceParam, F.NCHW)
    ins = (Tensor(shape, np.float32, F.NCHW, name="x"), *(_known(v) for v in values))
    return Node(op, ins, (Tensor(name="y"),), None)  # type: ignore[arg-type]


def test_takes_last_as_probe() -> None:
    rng = np.random.default_rng(11)
    agreed = {True: 0, False: 0}
    for _ in range(3000):
        shape = tuple(int(x) for x in rng.choice([1, 2, 3, 4], int(rng.integers(1, 5))))
        shape = (*shape[:-1], int(rng.choice([2, 4, 6, 8])))
        node = _slice_node(rng, shape)
        probe = np.arange(np.prod(shape), dtype=np.float32).reshape(shape)
        h = shape[-1] // 2
        for lo, hi in ((h, shape[-1]), (0, h)):
            got = takes_last(node, shape, lo, hi)
            assert got == R._selects(node, probe, probe[..., lo:hi]), (shape, lo, hi)
            agreed[bool(got)] += 1
    assert min(agreed.values()) > 50


def test_joins_last_as_probe() -> None:
    for rank in (1, 2, 3, 4):
        for axis in range(-rank - 1, rank + 1):
            for count in (1, 2, 3):
                p = AxisT()
                p.axis = axis
                op = OpDef(0, OpType.Concat, "cat", (), (), p, OpParameter.Axis, F.NCHW)
                node = Node(op, (Tensor(name="a"),) * count, (Tensor(name="y"),), None)  # type: ignore[arg-type]
                shape = (2, 3, 4, 6)[-rank:]
                a = -np.arange(np.prod(shape), dtype=np.float32).reshape(shape)
                b = np.arange(np.prod(shape), dtype=np.float32).reshape(shape) + 0.5
                want = np.concatenate([a, b], -1)
                probed = count == 2 and R._selects_pair(node, a, b, want)
                assert joins_last(node, rank) == probed, (rank, axis, count)


def test_other_ops_are_probed() -> None:
    op = OpDef(0, OpType.SliceTf, "s", (), (), None, 0, F.NCHW)
    node = Node(op, (), (), None)  # type: ignore[arg-type]
    assert takes_last(node, (2, 4), 2, 4) is None and joins_last(node, 2) is None
