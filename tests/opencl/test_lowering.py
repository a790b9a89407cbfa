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
