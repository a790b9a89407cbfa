"""Lowering of Attention (mnnpy/lowering_attention.py) against the op's NumPy reference."""

from __future__ import annotations

import logging

import numpy as np
import pytest

from mnnpy._schema.MNN.AttentionParam import AttentionParamT
from mnnpy.backend.cpu.backend import CPUBackend
from mnnpy.config import ScheduleConfig
from mnnpy.interpreter import Interpreter
from mnnpy.lowering import lowerable, refusal
from mnnpy.net import OpDef, OpParameter, OpType
from mnnpy.ops import reference_of
from mnnpy.tensor_format import DimensionFormat
from mnnpy.testing.builders import assert_close, make_single_op_net, run_net

NCHW = DimensionFormat.NCHW
ATT = OpParameter.AttentionParam


def _param(kv_cache: bool = False, c4: bool = False, scale: float = 0.0) -> AttentionParamT:
    p = AttentionParamT()
    p.kvCache, p.outputC4, p.attnScale, p.layerIndex = kv_cache, c4, scale, 0
    return p


def _inputs(seq: int, nh: int, kv: int, d: int, mask: str, seed: int = 0) -> list[np.ndarray]:
    rng = np.random.default_rng(seed + seq)
    q = rng.standard_normal((1, seq, nh, d)).astype(np.float32)
    k = rng.standard_normal((1, seq, kv, d)).astype(np.float32)
    v = rng.standard_normal((seq, kv * d, 1, 1)).astype(np.float32)
    extra = {
        "none": [],
        "scalar": [np.zeros((), np.float32)],
        "square": [rng.standard_normal((seq, seq)).astype(np.float32) * 2],
        "causal4d": [np.triu(np.full((seq, seq), -1e30, np.float32), 1).reshape(1, 1, seq, seq)],
    }[mask]
    return [q, k, v, *extra]


def _expected(p: AttentionParamT, inputs: list[np.ndarray]) -> np.ndarray:
    op = OpDef(0, OpType.Attention, "a", tuple(range(len(inputs))), (9,), p, ATT, NCHW)
    return reference_of(OpType.Attention)(op, inputs)[0]


def _net(p: AttentionParamT, inputs: list[np.ndarray]) -> bytes:
    return make_single_op_net(OpType.Attention, inputs, p, ATT, fmt=NCHW, default_format=NCHW)


CASES = [  # seq, heads, kv heads, d, output_c4, mask, attnScale
    (5, 4, 2, 16, True, "causal4d", 0.0),  # GQA, NC4HW4 output
    (3, 3, 1, 5, False, "square", 0.0),  # multi-query, additive [S, S] mask
    (4, 8, 2, 4, False, "none", 0.3),  # no mask: causal; attnScale
    (4, 4, 4, 8, True, "scalar", 0.0),  # MNN's scalar (causal) mask, no grouping
    (1, 2, 2, 8, False, "none", 0.0),  # one token
]


@pytest.mark.parametrize(("seq", "nh", "kv", "d", "c4", "mask", "scale"), CASES)
def test_lowered_attention_matches_reference(
    monkeypatch: pytest.MonkeyPatch,
    seq: int,
    nh: int,
    kv: int,
    d: int,
    c4: bool,
    mask: str,
    scale: float,
) -> None:
    p = _param(c4=c4, scale=scale)
    inputs = _inputs(seq, nh, kv, d, mask)
    monkeypatch.setattr(CPUBackend, "should_lower", lambda self, op: op.type == OpType.Attention)
    session, out = run_net(_net(p, inputs), {f"in{i}": a for i, a in enumerate(inputs)})
    kinds = {pl.op_type for pl in session.placement()}
    assert "Attention" not in kinds and {"MatMul", "Softmax", "Permute"} <= kinds, kinds
    assert_close(out["out0"], _expected(p, inputs))


def test_lowered_attention_follows_resizes_and_nested_lowering(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The shapes come from folded Shape ops: a new sequence length after resize works, runs
    repeat (no state), and the Softmax inside is lowered too when the backend lowers Softmax."""
    p = _param(c4=True)
    inputs = _inputs(5, 4, 2, 8, "square")
    monkeypatch.setattr(CPUBackend, "should_lower", lambda self, op: True)
    interp = Interpreter.from_buffer(_net(p, inputs))
    session = interp.create_session(ScheduleConfig())
    kinds = {pl.op_type for pl in session.placement()}
    assert not kinds & {"Attention", "Softmax"}, kinds
    for seq in (5, 5, 7, 2):
        new = _inputs(seq, 4, 2, 8, "square", seed=seq)
        for i, a in enumerate(new):
            t = interp.get_session_input(session, f"in{i}")
            if t.shape != a.shape:
                interp.resize_tensor(t, a.shape)
        interp.resize_session(session)
        for i, a in enumerate(new):
            interp.get_session_input(session, f"in{i}").copy_from(a)
        session.run()
        got = interp.get_session_output(session, "out0").numpy()
        assert_close(got, _expected(p, new))


def test_kv_cache_attention_is_refused_and_stays_whole(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """A kv_cache Attention carries state across runs: it is not offered, it stays whole."""
    p = _param(kv_cache=True)
    op = OpDef(0, OpType.Attention, "att", (0, 1, 2), (3,), p, ATT, NCHW)
    reason = refusal(op)
    assert not lowerable(op) and reason is not None and "state across runs" in reason
    stateless = OpDef(0, OpType.Attention, "att", (0, 1, 2), (3,), _param(), ATT, NCHW)
    assert lowerable(stateless)
    asked: list[str] = []
    monkeypatch.setattr(CPUBackend, "should_lower", lambda self, op: asked.append(op.name) or True)
    inputs = _inputs(3, 2, 1, 4, "none")
    with caplog.at_level(logging.INFO, logger="mnnpy.lowering"):
        session, out = run_net(_net(p, inputs), {f"in{i}": a for i, a in enumerate(inputs)})
    assert asked == [] and [pl.op_type for pl in session.placement()] == ["Attention"]
    assert any("state across runs" in r.getMessage() for r in caplog.records)
    assert_close(out["out0"], _expected(p, inputs))
