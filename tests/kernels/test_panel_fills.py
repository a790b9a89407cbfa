"""``panels.PanelFills``: ``fill_conv_f32``'s weight copies on a helper thread, against the
kernel called directly (the same bytes), whatever order they are waited for in."""

from __future__ import annotations

import gc

import numpy as np
import pytest

from mnnpy.backend.cpu.kernels import panels as P


def _case(rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray, int, int, int, int]:
    rows, cols = int(rng.integers(1, 70)), int(rng.integers(1, 300))
    taps, lanes = int(rng.choice([1, 4, 9])), int(rng.choice([4, 8, 16]))
    weight = rng.standard_normal(rows * cols * taps).astype(np.float32)
    weight.view(np.uint32)[0] = 0x7FA00001  # a NaN payload: copied bit for bit
    return weight, rng.standard_normal(rows).astype(np.float32), rows, cols, taps, lanes


def _out(rows: int, cols: int, taps: int, lanes: int) -> tuple[np.ndarray, np.ndarray]:
    blocks = -(-rows // lanes) * lanes
    return np.zeros(blocks * cols * taps, np.float32), np.zeros(blocks, np.float32)


def _expected(case: tuple) -> tuple[np.ndarray, np.ndarray]:
    weight, bias, *sizes = case
    w, b = _out(*sizes)
    P.fill_conv_f32(weight, bias, w, b, *sizes)
    return w, b


@pytest.mark.parametrize("seed", range(4))
def test_queued_copies_are_the_kernels(seed: int) -> None:
    rng = np.random.default_rng(seed)
    fills = P.PanelFills()
    cases = [_case(rng) for _ in range(40)]  # more than the first job array holds (16)
    outs = [_out(*c[2:]) for c in cases]
    numbers = [fills.add(c[0], c[1], w, b, *c[2:]) for c, (w, b) in zip(cases, outs, strict=True)]
    if fills.threaded:
        assert numbers == list(range(40))
    middle = 17
    fills.wait(numbers[middle])  # that copy and every one before it
    for c, (w, b) in zip(cases[: middle + 1], outs, strict=False):
        assert np.array_equal(w.view(np.uint32), _expected(c)[0].view(np.uint32))
        assert np.array_equal(b[: c[2]], c[1]) and not b[c[2] :].any()  # the bias too
    fills.close()
    assert fills.pending == 0 and not fills.threaded
    for c, (w, b) in zip(cases, outs, strict=True):
        ew, eb = _expected(c)
        assert np.array_equal(w.view(np.uint32), ew.view(np.uint32))
        assert np.array_equal(b.view(np.uint32), eb.view(np.uint32))


def test_arrays_are_held_until_done() -> None:
    """The caller may drop every array it queued: the copy still reads and writes them."""
    rng = np.random.default_rng(7)
    fills = P.PanelFills()
    kept = []
    for _ in range(12):
        case = _case(rng)
        w, b = _out(*case[2:])
        fills.add(case[0].copy(), case[1].copy(), w[:], b, *case[2:])  # temporaries
        kept.append((w, _expected(case)[0]))
        del case
    gc.collect()
    fills.wait()
    assert all(np.array_equal(w.view(np.uint32), e.view(np.uint32)) for w, e in kept)
    fills.close()


def test_dropped_without_close_waits_for_its_copies() -> None:
    rng = np.random.default_rng(3)
    fills = P.PanelFills()
    kept = []
    for _ in range(20):
        case = _case(rng)
        w, b = _out(*case[2:])
        fills.add(case[0], case[1], w, b, *case[2:])
        kept.append((w, _expected(case)[0]))
    del fills
    gc.collect()
    assert all(np.array_equal(w.view(np.uint32), e.view(np.uint32)) for w, e in kept)


def test_sizes_are_checked_before_anything_is_queued() -> None:
    rng = np.random.default_rng(1)
    weight, bias, rows, cols, taps, lanes = _case(rng)
    w, b = _out(rows, cols, taps, lanes)
    fills = P.PanelFills()
    with pytest.raises(ValueError, match="too small"):
        fills.add(weight, bias, w[:-1], b, rows, cols, taps, lanes)
    with pytest.raises(ValueError, match="bias buffer too small"):
        fills.add(weight, bias, w, b[: rows - 1], rows, cols, taps, lanes)
    with pytest.raises(ValueError, match="negative"):
        fills.add(weight, bias, w, b, -1, cols, taps, lanes)
    with pytest.raises(ValueError):  # read-only panels: nothing is written
        ro = w.copy()
        ro.flags.writeable = False
        fills.add(weight, bias, ro, b, rows, cols, taps, lanes)
    assert fills.pending == 0 and not w.any() and not b.any()
    assert fills.add(weight[:0], bias[:0], w, b, 0, cols, taps, lanes) == -1  # nothing to copy
    k = fills.add(weight[:0], bias, w, b, 0, cols, taps, lanes)  # the bias alone
    fills.wait(k)
    assert np.array_equal(b[:rows], bias) and not w.any()
    fills.close()


def test_after_close_a_copy_is_made_at_once() -> None:
    rng = np.random.default_rng(2)
    fills = P.PanelFills()
    fills.close()
    case = _case(rng)
    w, b = _out(*case[2:])
    assert fills.add(case[0], case[1], w, b, *case[2:]) == -1
    assert np.array_equal(w.view(np.uint32), _expected(case)[0].view(np.uint32))
    fills.wait()  # nothing queued: returns
    fills.close()  # twice: nothing more
