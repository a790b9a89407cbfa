"""Execution.bind: the run loop's prepared calls give what on_execute gives, fail as MNNErrors
naming the op, and keep their buffers alive."""

from __future__ import annotations

import gc
import weakref
from pathlib import Path

import numpy as np
import pytest

import mnnpy
from mnnpy.backend.cpu.executions.convolution import CPUConvolutionDepthwise
from mnnpy.backend.cpu.kernels import conv as K
from mnnpy.backend.cpu.kernels import gemm as G
from mnnpy.backend.cpu.kernels import winograd as WG
from mnnpy.errors import MNNError, NoExecutionError

DATA = Path(__file__).resolve().parents[1] / "data"


def _batch2() -> tuple[np.ndarray, np.ndarray]:
    with np.load(DATA / "batch2.npz") as z:
        return z["input:x"], z["output:prob"]


@pytest.mark.parametrize("threads", [1, 2])
def test_bound_steps_give_what_on_execute_gives(threads: int) -> None:
    x, want = _batch2()
    interp = mnnpy.Interpreter(DATA / "batch2.mnn")
    session = interp.create_session(mnnpy.ScheduleConfig(num_thread=threads))
    steps = session.pipelines[0]._steps
    bound = {type(s.execution).__name__ for s in steps if s.call is not None}
    # the convolutions and the raster ops (region copies, kernels.raster.bind_regions); the
    # input's ConvertTensor runs inside the first convolution (executions/conv_nchw_input.py),
    # the last 1x1 convolution with its global average (executions/conv_mean.py)
    assert bound == {
        "CPUConvMean",
        "CPUConvolutionGemm",
        "CPUConvolutionDirect",
        "CPUConvolutionDepthwise",
        "CPUMovement",
        "CPUReshape",
    }
    outs = []
    for callback in (False, True):  # the bound run loop, then on_execute through callbacks
        interp.get_session_input(session).copy_from(x)
        if callback:
            interp.run_session_with_callback(session, lambda t, i: True, lambda t, i: True)
        else:
            interp.run_session(session)
        outs.append(interp.get_session_output(session).numpy().copy())
    np.testing.assert_array_equal(outs[0], outs[1])
    np.testing.assert_allclose(outs[0], want, rtol=1e-3, atol=1e-4)
    # a resize binds again, to the new buffers
    interp.resize_tensor(interp.get_session_input(session), (1, *x.shape[1:]))
    interp.resize_session(session)
    interp.get_session_input(session).copy_from(x[:1])
    interp.run_session(session)
    np.testing.assert_allclose(
        interp.get_session_output(session).numpy(), want[:1], rtol=1e-3, atol=1e-4
    )


def test_a_failing_bind_names_the_op(monkeypatch: pytest.MonkeyPatch) -> None:
    def short(self, inputs, outputs):  # noqa: ANN001, ANN202 - the method's own signature
        dst = outputs[0].host[:-4]  # one pixel short
        return K.bind_depthwise(inputs[0].host, dst, self.weight, self.bias, self._shape,
                                self._window, self.lo, self.hi, 1)  # fmt: skip

    interp = mnnpy.Interpreter(DATA / "batch2.mnn")
    session = interp.create_session(mnnpy.ScheduleConfig(num_thread=1))
    monkeypatch.setattr(CPUConvolutionDepthwise, "bind", short)
    with pytest.raises(MNNError) as e:
        interp.create_session(mnnpy.ScheduleConfig(num_thread=1))
    assert (e.value.op_name, e.value.phase) == ("conv_9", "resize")
    assert "buffers too small" in str(e.value)
    with pytest.raises(MNNError, match="buffers too small"):  # resizing a session that ran
        interp.resize_session(session)
    with pytest.raises(NoExecutionError):  # not a run of no steps
        interp.run_session(session)
    monkeypatch.undo()
    interp.resize_session(session)
    x, want = _batch2()
    interp.get_session_input(session).copy_from(x)
    interp.run_session(session)
    np.testing.assert_allclose(
        interp.get_session_output(session).numpy(), want, rtol=1e-3, atol=1e-4
    )


def test_bound_calls_keep_their_buffers() -> None:
    rng = np.random.default_rng(3)
    shape, window = (1, 8, 6, 6, 8, 6, 6), (3, 3, 1, 1, 1, 1, 1, 1)
    src = rng.standard_normal(2 * 36 * 4).astype(np.float32)
    weight = rng.standard_normal(2 * 9 * 4).astype(np.float32)
    bias = rng.standard_normal(8).astype(np.float32)
    want = np.zeros(2 * 36 * 4, np.float32)
    K.conv2d_depthwise(src, want, weight, bias, shape, window, -1e30, 1e30, 1)
    dst = np.zeros_like(want)
    call = K.bind_depthwise(src.copy(), dst, weight.copy(), bias.copy(), shape, window, -1e30, 1e30)
    gc.collect()  # the copies live only in the call
    call()
    np.testing.assert_array_equal(dst, want)
    k = 8 * 9
    w16 = rng.standard_normal(16 * k).astype(np.float32)
    b16 = rng.standard_normal(16).astype(np.float32)
    scratch = np.zeros(G.scratch_size(shape, window, 64, 2), np.float32)
    dst2, want2 = np.zeros_like(want), np.zeros_like(want)
    src2 = src.copy()
    call2 = G.bind_conv2d(src2, dst2, w16.copy(), b16.copy(), scratch.copy(), shape, window,
                          -1e30, 1e30, 64, 2)  # fmt: skip
    gc.collect()
    call2()
    src2 += 1  # new contents in the same buffer: each call copies its im2col tiles afresh
    call2()
    G.conv2d(src2, want2, w16, b16, scratch, shape, window, -1e30, 1e30, 64, 2)
    np.testing.assert_array_equal(dst2, want2)


def test_bound_winograd_redoes_its_transforms() -> None:
    rng = np.random.default_rng(4)
    shape, pad, unit, block = (1, 8, 6, 6, 8, 6, 6), (1, 1), 2, 5  # 9 tiles: two blocks
    src = rng.standard_normal(2 * 36 * 4).astype(np.float32)
    weight = rng.standard_normal((unit + 2) ** 2 * 16 * 8).astype(np.float32)
    bias = rng.standard_normal(16).astype(np.float32)
    scratch = np.zeros(WG.scratch_size(shape, pad, unit, block, 2), np.float32)
    dst, want = np.zeros(2 * 36 * 4, np.float32), np.zeros(2 * 36 * 4, np.float32)
    call = WG.bind_conv2d(src, dst, weight.copy(), bias.copy(), scratch.copy(), shape, pad,
                          unit, -1e30, 1e30, block, 2)  # fmt: skip
    gc.collect()
    for _ in range(5):  # a thread that gets the block it had last time must transform it again
        src += 1
        call()
        WG.conv2d(src, want, weight, bias, scratch, shape, pad, unit, -1e30, 1e30, block, 2)
        np.testing.assert_array_equal(dst, want)


def test_bound_calls_do_not_outlive_the_buffers() -> None:
    """Resizing or releasing a session frees its arena: the steps' bound calls, which hold
    views of it, are dropped first (else a resize would hold the old and the new arena).

    A resize whose plan fits in the old arena (1 to 2 times its need) reuses it instead."""
    x, _ = _batch2()
    interp = mnnpy.Interpreter(DATA / "batch2.mnn")
    session = interp.create_session(mnnpy.ScheduleConfig(num_thread=1))
    old = weakref.ref(_memory(session.backend._arena))
    interp.resize_tensor(interp.get_session_input(session), (1, *x.shape[1:]))
    interp.resize_session(session)
    gc.collect()
    assert old() is _memory(session.backend._arena)  # batch 2's arena holds batch 1's plan
    interp.resize_tensor(interp.get_session_input(session), (32, *x.shape[1:]))
    interp.resize_session(session)
    gc.collect()
    assert old() is None  # too small for batch 32: freed, not held beside the new one
    assert any(s.call is not None for s in session.pipelines[0]._steps)
    current = weakref.ref(_memory(session.backend._arena))
    interp.release_session(session)
    gc.collect()
    assert current() is None


def _memory(array: np.ndarray) -> object:
    """The object that owns an array's memory (views of views point to it)."""
    while isinstance(array.base, np.ndarray):
        array = array.base
    return array if array.base is None else array.base
