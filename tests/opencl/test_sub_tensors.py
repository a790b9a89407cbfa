"""Sub-tensors on OpenCL (issue 19: ``supports_sub_tensors``): Slice outputs as sub-buffers.

The OpenCL factories support sub-tensors (Arm NN's ``SupportsSubTensors``): a Slice output that
is a contiguous, aligned range of its input becomes a sub-buffer of the input's memory, so its
box copies (the kernel) disappear; outputs stay equal to the CPU's.
"""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("pyopencl")

import mnnpy  # noqa: E402 - after the skip
from mnnpy._schema.MNN.BinaryOp import BinaryOpT  # noqa: E402
from mnnpy._schema.MNN.Net import NetT  # noqa: E402
from mnnpy._schema.MNN.OpParameter import OpParameter  # noqa: E402
from mnnpy._schema.MNN.OpType import OpType  # noqa: E402
from mnnpy._schema.MNN.Slice import SliceT  # noqa: E402
from mnnpy.backend.handles import TensorHandleFactoryRegistry  # noqa: E402
from mnnpy.backend.opencl.backend import OpenCLBackend  # noqa: E402
from mnnpy.net import pack_net  # noqa: E402
from mnnpy.tensor_format import DimensionFormat  # noqa: E402
from mnnpy.testing.builders import assert_close, input_op, make_op, run_net  # noqa: E402

OPENCL, CPU = mnnpy.ForwardType.OPENCL, mnnpy.ForwardType.CPU
NCHW = DimensionFormat.NCHW


def slice_net(shape: tuple[int, ...], axis: int, points: list[int]) -> bytes:
    """x -> y = x + x -> Slice(axis, points) -> parts -> out_j = part_j + part_j."""
    n = len(points) + 1
    net = NetT()
    net.tensorName = ["x"] + [f"p{j}" for j in range(n)] + [f"out{j}" for j in range(n)] + ["y"]
    y = 1 + 2 * n
    sp = SliceT()
    sp.axis, sp.slicePoints, sp.sourceType = axis, points, 0
    b = BinaryOpT()
    b.opType = 0  # ADD
    ops = [input_op("x", 0, shape, fmt=NCHW)]
    ops.append(make_op(OpType.BinaryOp, "double", [0, 0], [y], b, OpParameter.BinaryOp))
    ops.append(make_op(OpType.Slice, "slice", [y], list(range(1, n + 1)), sp, OpParameter.Slice))
    for j in range(n):
        ops.append(make_op(OpType.BinaryOp, f"add{j}", [1 + j, 1 + j], [1 + n + j], b,
                           OpParameter.BinaryOp))  # fmt: skip
    net.oplists = ops
    net.outputName = [f"out{j}" for j in range(n)]
    return pack_net(net)


def _slice_unit(session: mnnpy.Session):  # noqa: ANN202 - a Unit
    return next(u for p in session.pipelines for u in p.units if u.op.name == "slice")


@pytest.mark.parametrize(
    ("shape", "axis", "points", "views"),
    [
        ((1, 64, 32), 1, [32], 2),  # both halves: offsets 0 and 4096 bytes
        ((4, 8, 16), 0, [1, 3], 3),  # along the outermost axis: 512-byte rows
        ((1, 6, 10), 1, [3], 1),  # the second half starts at 120 bytes: not aligned, copied
        ((2, 64, 32), 1, [32], 0),  # a dim of 2 before the axis: not contiguous, copied
    ],
)
def test_slice_outputs_are_sub_buffers_of_the_input(
    shape: tuple[int, ...], axis: int, points: list[int], views: int
) -> None:
    x = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
    data = slice_net(shape, axis, points)
    _, want = run_net(data, {"x": x}, mnnpy.ScheduleConfig(type=CPU))
    session, got = run_net(data, {"x": x}, mnnpy.ScheduleConfig(type=OPENCL))
    backend = session.backend
    assert isinstance(backend, OpenCLBackend)
    assert {p.backend for p in session.placement()} == {"OPENCL"}
    unit = _slice_unit(session)
    parts = unit.outputs
    assert sum(backend.is_sub_tensor(t) for t in parts) == views
    # the Slice runs no kernel when every part is a sub-buffer (its step is left out)
    assert (unit.bind() is None) == (views == len(parts))
    plan = backend.plan
    assert plan is not None
    x_tensor = unit.inputs[0]
    for t in parts:
        if backend.is_sub_tensor(t):
            assert plan.offsets[id(t)] >= plan.offsets[id(x_tensor)]
    for k, v in want.items():
        assert_close(got[k], v)
    for _ in range(2):  # repeated runs and callbacks see the same values
        session.run()
        for k, v in want.items():
            assert_close(session.get_output(k).numpy(), v)


def test_no_sub_tensors_without_the_factory_flag(monkeypatch: pytest.MonkeyPatch) -> None:
    """A factory that does not support sub-tensors keeps the copies."""
    register = OpenCLBackend.register_tensor_handle_factories

    def without(self: OpenCLBackend, registry: TensorHandleFactoryRegistry) -> None:
        register(self, registry)
        for factory in registry.factories():
            factory.supports_sub_tensors = False

    monkeypatch.setattr(OpenCLBackend, "register_tensor_handle_factories", without)
    x = np.ones((1, 64, 32), np.float32)
    session, _ = run_net(
        slice_net((1, 64, 32), 1, [32]), {"x": x}, mnnpy.ScheduleConfig(type=OPENCL)
    )
    backend = session.backend
    assert isinstance(backend, OpenCLBackend)
    unit = _slice_unit(session)
    assert not any(backend.is_sub_tensor(t) for t in unit.outputs) and unit.bind() is not None
