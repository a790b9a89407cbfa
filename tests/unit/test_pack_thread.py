"""Convolution weights packed on the CPU backend's helper thread while a session is created
(``panels.PanelFills``, ``packed_weight.PackedWeight``): the same panels and outputs as packed
in line, a read of ``weight`` never before its copy, and the thread ended by what ends a resize."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import mnnpy
from mnnpy.backend.cpu import backend as B
from mnnpy.backend.cpu.executions.convolution_base import CPUConvolutionBase
from mnnpy.backend.cpu.executions.convolution_group import CPUConvolutionGroup as Group
from mnnpy.backend.cpu.executions.packed_weight import PackedWeight
from mnnpy.backend.cpu.kernels import panels as P
from mnnpy.config import pack_thread_enabled
from tests.ops.test_conv_split_group import _net

DATA = Path(__file__).resolve().parents[1] / "data"
THREADS = P.PanelFills().threaded  # POSIX threads here (not on Windows)


@pytest.fixture
def queued(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The numbers ``PanelFills.add`` returned (-1: copied at once), with PACK_THREAD on."""
    monkeypatch.setattr(B, "PACK_THREAD", True)
    numbers: list[int] = []

    class Spy:
        def __init__(self) -> None:
            self.fills = P.PanelFills()

        def add(self, *args: Any, **kwargs: Any) -> int:
            numbers.append(self.fills.add(*args, **kwargs))
            return numbers[-1]

        def __getattr__(self, name: str) -> Any:
            return getattr(self.fills, name)

    monkeypatch.setattr(B, "PanelFills", Spy)
    return numbers


def _convs(session: Any) -> list[Any]:
    units = session.pipelines[0].units
    return [u.execution for u in units if isinstance(u.execution, CPUConvolutionBase)]


def _model_run(pack: bool, monkeypatch: pytest.MonkeyPatch) -> tuple[np.ndarray, list[bytes]]:
    monkeypatch.setattr(B, "PACK_THREAD", pack)
    interp = mnnpy.Interpreter(DATA / "conv_relu_pool_fc.mnn")
    session = interp.create_session(mnnpy.ScheduleConfig(num_thread=1))
    assert all(b.panel_fills is None for b in session.backends)  # ended with the resize
    with np.load(DATA / "conv_relu_pool_fc.npz") as z:
        x, want = z["input:x"], z["output:prob"]
    interp.get_session_input(session, "x").copy_from(x)
    interp.run_session(session)
    out = interp.get_session_output(session, "prob").numpy()
    np.testing.assert_allclose(out, want, rtol=1e-3, atol=1e-4)  # MNN's own output
    return out, [ex.weight.tobytes() + ex.bias.tobytes() for ex in _convs(session)]


def test_a_model_is_the_same_with_and_without_the_thread(
    queued: list[int], monkeypatch: pytest.MonkeyPatch
) -> None:
    out, panels = _model_run(True, monkeypatch)
    assert queued and (all(k >= 0 for k in queued) if THREADS else set(queued) == {-1})
    ref_out, ref_panels = _model_run(False, monkeypatch)
    assert np.array_equal(out.view(np.uint32), ref_out.view(np.uint32))
    assert panels == ref_panels and len(panels) >= 2


def test_a_fusion_reads_queued_weights_once_written(queued: list[int]) -> None:
    """``CPUConvolutionGroup.from_parts`` copies the parts' panels during the resize, while
    their copies may still be queued: it queues its copies after theirs, started once theirs
    ended (``after``), and its ``weight`` waits for them."""
    group, icg, ocg, k = 4, 8, 4, (3, 3)
    model, params = _net(group, icg, ocg, k, [1, 1, 1, 1], (2, 32, 9, 7))
    session = mnnpy.Interpreter.from_buffer(model).create_session(mnnpy.ScheduleConfig())
    (ex,) = [u.execution for u in session.pipelines[0].units if type(u.execution) is Group]
    assert len([n for n in queued if n >= 0]) == (2 * group if THREADS else 0)  # parts, group
    w = np.concatenate([p.weight.reshape(ocg, icg, *k) for p in params])
    assert np.array_equal(ex.weight, Group.pack_weight(w, group))


class _Holder(PackedWeight):
    def __init__(self, backend: B.CPUBackend) -> None:
        self.backend = backend


@pytest.mark.parametrize(("rows", "cols", "taps", "lanes"), [(40, 24, 9, 16), (12, 1, 9, 4)])
def test_weight_waits_for_its_copy(
    rows: int, cols: int, taps: int, lanes: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(B, "PACK_THREAD", True)
    backend = B.CPUBackend(1)
    backend.on_resize_begin()
    assert backend.panel_fills is not None
    rng = np.random.default_rng(rows)
    weight = rng.standard_normal((rows, cols, taps)).astype(np.float32)
    bias = rng.standard_normal(rows).astype(np.float32)
    held = [_Holder(backend) for _ in range(8)]  # several queued, read in reverse order
    for h in held:
        h._keep_panels(weight, bias, taps, lanes)
        assert (h._pending is not None) is THREADS
    blocks = -(-rows // lanes) * lanes
    want_w, want_b = np.zeros(blocks * cols * taps, np.float32), np.zeros(blocks, np.float32)
    P.fill_conv_f32(weight.reshape(-1), bias, want_w, want_b, rows, cols, taps, lanes)
    for h in reversed(held):
        assert np.array_equal(h.weight, want_w) and np.array_equal(h.bias, want_b)
        assert h._pending is None
    held[0].weight = want_w  # set: nothing to wait for
    assert held[0].weight is want_w and held[0]._pending is None
    backend.on_resize_end()
    assert backend.panel_fills is None


@pytest.mark.parametrize("end", ["on_resize_end", "on_clear_buffer", "on_execute_begin"])
def test_what_ends_a_resize_ends_the_thread(end: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(B, "PACK_THREAD", True)
    backend = B.CPUBackend(1)
    backend.on_resize_begin()
    fills = backend.panel_fills
    assert fills is not None
    backend.on_resize_begin()  # a nested resize keeps the same queue
    assert backend.panel_fills is fills
    getattr(backend, end)()
    assert backend.panel_fills is None and not fills.threaded
    backend.end_panel_fills()  # nothing open: nothing to do


def test_off_switch(monkeypatch: pytest.MonkeyPatch) -> None:
    for value in ("0", "off", " No ", "false"):
        monkeypatch.setenv("MNNPY_PACK_THREAD", value)
        assert pack_thread_enabled() is False
    monkeypatch.setenv("MNNPY_PACK_THREAD", "1")
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0}, raising=False)
    assert pack_thread_enabled() is False  # one CPU: the thread would only take turns with us
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1}, raising=False)
    assert pack_thread_enabled() is True
    monkeypatch.setattr(B, "PACK_THREAD", False)
    backend = B.CPUBackend(1)
    backend.on_resize_begin()
    assert backend.panel_fills is None  # weights packed in line


def test_large_copies_in_pieces_and_dependent_copies_in_order() -> None:
    """Copies of more than SPLIT_BYTES are queued as pieces of whole panels; copies added with
    ``after`` read what earlier ones wrote; ``wait`` runs queued copies on the caller's thread
    too. Every panel bit for bit as ``fill_conv_f32`` in line, over many random queues."""
    rng = np.random.default_rng(7)
    for trial in range(12):
        fills = P.PanelFills()
        made: list[tuple[int, np.ndarray, np.ndarray, np.ndarray]] = []  # number, out, want, b
        for _ in range(int(rng.integers(1, 12))):
            lanes = int(rng.choice([4, 16]))
            rows, taps = int(rng.integers(1, 70)), int(rng.choice([1, 9]))
            big = rng.random() < 0.3  # past SPLIT_BYTES: several pieces
            cols = (
                int(
                    rng.integers(
                        P.SPLIT_BYTES // (4 * rows * taps) + 1,
                        2 * P.SPLIT_BYTES // (4 * rows * taps) + 2,
                    )
                )
                if big
                else int(rng.integers(1, 40))
            )
            w = rng.standard_normal(rows * cols * taps).astype(np.float32)
            b = rng.standard_normal(rows).astype(np.float32)
            size = -(-rows // lanes) * lanes * cols * taps
            out, ob = np.zeros(size, np.float32), np.zeros(-(-rows // lanes) * lanes, np.float32)
            want, wb = np.zeros_like(out), np.zeros_like(ob)
            P.fill_conv_f32(w, b, want, wb, rows, cols, taps, lanes)
            k = fills.add(w, b, out, ob, rows, cols, taps, lanes)
            if THREADS:
                assert k >= 0  # queued (it may already have run)
            made.append((k, out, want, ob))
            if made and rng.random() < 0.4:  # a plain copy of an earlier output, after it
                src = made[int(rng.integers(len(made)))][1]
                dst, none = np.zeros_like(src), np.zeros(0, np.float32)
                k2 = fills.add(src, none, dst, none, 1, src.size, 1, 1, after=True)
                made.append((k2, dst, src, none))
            if rng.random() < 0.3:
                fills.wait(int(rng.integers(-1, max(1, k + 1))))
        fills.wait()
        assert fills.pending == 0
        for k, out, want, _ in made:
            assert out.tobytes() == want.tobytes(), (trial, k)
        fills.close()


@pytest.mark.skipif(not THREADS, reason="no helper thread here: copies run in add")
def test_a_large_copy_is_queued_as_pieces_of_whole_panels() -> None:
    rows, taps, lanes = 40, 1, 16
    cols = 3 * P.SPLIT_BYTES // (4 * rows)  # three times SPLIT_BYTES of weights
    rng = np.random.default_rng(1)
    w = rng.standard_normal(rows * cols).astype(np.float32)
    b = rng.standard_normal(rows).astype(np.float32)
    out, ob = np.zeros(48 * cols, np.float32), np.zeros(48, np.float32)
    fills = P.PanelFills()
    last = fills.add(w, b, out, ob, rows, cols, taps, lanes)
    panel = 4 * cols * lanes  # bytes of one panel: pieces hold whole panels of about SPLIT_BYTES
    assert last + 1 == -(-3 // max(1, P.SPLIT_BYTES // panel))  # one piece per panel here
    fills.close()
    want, wb = np.zeros_like(out), np.zeros_like(ob)
    P.fill_conv_f32(w, b, want, wb, rows, cols, taps, lanes)
    assert out.tobytes() == want.tobytes() and ob.tobytes() == wb.tobytes()
