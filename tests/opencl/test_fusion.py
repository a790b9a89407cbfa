"""OpenCL substitutions: Convolution + ADD (+ ReLU) and attention, against unfused runs."""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("pyopencl")

import mnnpy  # noqa: E402 - after the skip
from mnnpy._schema.MNN.Axis import AxisT  # noqa: E402
from mnnpy._schema.MNN.BinaryOp import BinaryOpT  # noqa: E402
from mnnpy._schema.MNN.MatMul import MatMulT  # noqa: E402
from mnnpy._schema.MNN.Net import NetT  # noqa: E402
from mnnpy._schema.MNN.OpParameter import OpParameter  # noqa: E402
from mnnpy._schema.MNN.OpType import OpType  # noqa: E402
from mnnpy.backend.opencl.executions import fused  # noqa: E402
from mnnpy.net import pack_net  # noqa: E402
from mnnpy.tensor_format import DimensionFormat  # noqa: E402
from mnnpy.testing.builders import assert_close, const_op, input_op, make_op, run_net  # noqa: E402
from mnnpy.testing.cases import ModelCase  # noqa: E402
from mnnpy.testing.substitution import check_substitutions  # noqa: E402

DATA = Path(__file__).resolve().parents[1] / "data"
OPENCL, CPU = mnnpy.ForwardType.OPENCL, mnnpy.ForwardType.CPU
NCHW = DimensionFormat.NCHW


def _binary(code: int) -> BinaryOpT:
    p = BinaryOpT()
    p.opType = code
    return p


def attention_net(
    b: int, m: int, n: int, d: int, tb: bool, mask: tuple[int, ...] | None, scale: bool = True
) -> bytes:
    """q @ k (k transposed when ``tb``) [* 0.125] [+ mask] -> Softmax(-1) -> @ v."""
    net = NetT()
    net.tensorName = ["q", "k", "v", "s", "c", "t", "mask", "u", "p", "out"]
    kshape = (b, n, d) if tb else (b, d, n)
    ops = [input_op("q", 0, (b, m, d), fmt=NCHW), input_op("k", 1, kshape, fmt=NCHW)]
    ops += [input_op("v", 2, (b, n, d + 3), fmt=NCHW), const_op("c", 4, np.float32([0.125]))]
    mm = MatMulT()
    mm.transposeB = tb
    ops.append(make_op(OpType.MatMul, "qk", [0, 1], [3], mm, OpParameter.MatMul))
    if scale:
        ops.append(make_op(OpType.BinaryOp, "scale", [3, 4], [5], _binary(2), OpParameter.BinaryOp))
    src = 5 if scale else 3
    if mask is not None:
        ops.append(input_op("mask", 6, mask, fmt=NCHW))
        add = make_op(OpType.BinaryOp, "mask_add", [src, 6], [7], _binary(0), OpParameter.BinaryOp)
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
    ("tb", "mask", "scale"),
    [
        (False, None, True),
        (True, None, True),
        (False, "full", True),
        (True, "rows", True),
        (False, "one", True),
        (False, "full", False),  # the PyTorch export scales q and k before the product
    ],
)
def test_attention_runs_as_one_kernel_and_matches_the_cpu(
    tb: bool, mask: str | None, scale: bool
) -> None:
    b, m, n, d = 3, 5, 7, 4
    shapes = {None: None, "full": (b, m, n), "rows": (b, 1, n), "one": (1, 1, n)}
    data = attention_net(b, m, n, d, tb, shapes[mask], scale)
    rng = np.random.default_rng(3)
    feeds = {
        "q": rng.standard_normal((b, m, d)).astype(np.float32),
        "k": rng.standard_normal((b, n, d) if tb else (b, d, n)).astype(np.float32),
        "v": rng.standard_normal((b, n, d + 3)).astype(np.float32),
    }
    if mask is not None:
        masked = rng.random(shapes[mask]) < 0.3
        masked[..., 0] = False  # every row keeps one key
        feeds["mask"] = np.where(masked, -1e9, 0.0).astype(np.float32)
    _, cpu = run_net(data, feeds)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        session, got = run_net(data, feeds, mnnpy.ScheduleConfig(type=OPENCL))
    assert_close(got["out"], cpu["out"])
    groups = {p.op_name: p.group for p in session.placement()}
    assert set(groups.values()) == {"qk+attention"}  # every op inside the one group
    scores = session.tensors[3]
    assert scores.describe.backend is None  # never had memory in the arena
    edges = session.edge_stats()  # the inputs go up (copied, or imported where memory is shared)
    assert edges["copy"] + edges["import"] == len(feeds) and edges["map"] == 0


def test_conv_residual_group_and_kit_check() -> None:
    case = ModelCase.from_files(
        "residual_add", DATA / "residual_add.mnn", DATA / "residual_add.npz"
    )
    report = check_substitutions(case, mnnpy.ScheduleConfig(type=OPENCL))
    assert report.ok and [g.kinds for g in report.groups] == ["Convolution+BinaryOp"]
    assert report.groups[0].max_abs < 1e-4


def test_kit_check_catches_a_wrong_fusion(monkeypatch: pytest.MonkeyPatch) -> None:
    original = fused.CLAttention.__init__

    def wrong(self: fused.CLAttention, backend: object, at: list, tk: bool, s: float, div: bool):
        original(self, backend, at, tk, s * 1.5, div)  # a fusion that forgot part of the scale

    monkeypatch.setattr(fused.CLAttention, "__init__", wrong)
    path = Path(__file__).with_name("attention.mnn")
    try:
        path.write_bytes(attention_net(1, 4, 6, 3, False, None))
        rng = np.random.default_rng(0)
        inputs = {
            k: rng.standard_normal(s).astype(np.float32)
            for k, s in [("q", (1, 4, 3)), ("k", (1, 3, 6)), ("v", (1, 6, 6))]
        }
        report = check_substitutions(
            ModelCase("attn", path, inputs, {}), mnnpy.ScheduleConfig(type=OPENCL)
        )
    finally:
        path.unlink()
    assert [g.ok for g in report.groups] == [False] and not report.ok


def test_groups_follow_a_resize() -> None:
    data = attention_net(1, 4, 6, 3, True, None)
    rng = np.random.default_rng(9)
    interp = mnnpy.Interpreter.from_buffer(data)
    sessions = [interp.create_session(mnnpy.ScheduleConfig(type=t)) for t in (OPENCL, CPU)]
    shapes = {"q": (2, 5, 3), "k": (2, 8, 3), "v": (2, 8, 6)}
    feeds = {k: rng.standard_normal(s).astype(np.float32) for k, s in shapes.items()}
    outs = []
    for session in sessions:
        for name, value in feeds.items():
            interp.resize_tensor(interp.get_session_input(session, name), value.shape)
        interp.resize_session(session)
        for name, value in feeds.items():
            interp.get_session_input(session, name).copy_from(value)
        interp.run_session(session)
        outs.append(interp.get_session_output(session).numpy())
    assert outs[0].shape == (2, 5, 6)
    assert_close(outs[0], outs[1])
    assert {p.group for p in sessions[0].placement()} == {"qk+attention"}
