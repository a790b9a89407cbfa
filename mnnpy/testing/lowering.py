"""The kit's lowering check: every decomposition equals its composite's reference.

A backend that asks for composites to be lowered (``Backend.should_lower``) runs the primitive
ops :mod:`mnnpy.lowering` makes instead. :func:`check_lowering` builds a one-op model of each
composite the lowering covers (LayerNorm, RMSNorm, Softmax, both GELU forms, Attention without a
K/V cache), makes the session with lowering forced (:func:`mnnpy.lowering.forced`) on the
backend under test, and compares the outputs with the composite's NumPy reference within rtol
1e-3 / atol 1e-4. It fails when the composite was not decomposed.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from mnnpy._schema.MNN.AttentionParam import AttentionParamT
from mnnpy._schema.MNN.LayerNorm import LayerNormT
from mnnpy._schema.MNN.UnaryOp import UnaryOpT
from mnnpy._schema.MNN.UnaryOpOperation import UnaryOpOperation as Un
from mnnpy.config import ScheduleConfig
from mnnpy.lowering import forced
from mnnpy.net import OpType
from mnnpy.tensor_format import DimensionFormat
from mnnpy.testing.builders import run_net
from mnnpy.testing.cases import OpCase, compare
from mnnpy.testing.op_cases import op_cases

__all__ = ["LoweringCheck", "check_lowering", "lowering_cases"]

NCHW = DimensionFormat.NCHW


@dataclass(frozen=True)
class LoweringCheck:
    """One composite run lowered: whether it was decomposed, where, and how close it came."""

    name: str
    lowered: bool
    backends: tuple[str, ...]
    max_abs: float | None
    message: str

    @property
    def ok(self) -> bool:
        """Decomposed and within tolerance."""
        return self.lowered and not self.message


def _unary(code: int) -> UnaryOpT:
    p = UnaryOpT()
    p.opType = code
    return p


def _layer_norm(axis: list[int], affine: bool, rms: bool) -> LayerNormT:
    p = LayerNormT()
    p.axis, p.epsilon, p.useRmsnorm = axis, 1e-5, rms
    if affine:
        rng = np.random.default_rng(3)
        p.gamma = rng.standard_normal(12).astype(np.float32)
        p.beta = rng.standard_normal(12).astype(np.float32)
    return p


def _attention(seq: int, nh: int, kv: int, d: int, c4: bool, mask: str, scale: float) -> OpCase:
    p = AttentionParamT()
    p.kvCache, p.outputC4, p.attnScale, p.layerIndex = False, c4, scale, 0
    rng = np.random.default_rng(seq * 100 + nh * 10 + kv)
    q = rng.standard_normal((1, seq, nh, d)).astype(np.float32)
    k = rng.standard_normal((1, seq, kv, d)).astype(np.float32)
    v = rng.standard_normal((seq, kv * d, 1, 1)).astype(np.float32)
    inputs: tuple[np.ndarray, ...] = (q, k, v)
    if mask == "causal":
        inputs += (np.triu(np.full((seq, seq), -1e9, np.float32), 1).reshape(1, 1, seq, seq),)
    elif mask == "random":
        inputs += (rng.standard_normal((seq, seq)).astype(np.float32),)
    elif mask == "scalar":
        inputs += (np.zeros((), np.float32),)
    name = f"Attention/nocache_s{seq}_h{nh}_kv{kv}_d{d}{'_c4' if c4 else ''}_{mask}"
    return OpCase(name, OpType.Attention, inputs, p, fmt=NCHW)


def lowering_cases() -> list[OpCase]:
    """One-op cases of every composite :mod:`mnnpy.lowering` decomposes."""
    x = (np.random.default_rng(5).standard_normal((2, 5, 12)) * 3).astype(np.float32)
    wide = np.linspace(-12, 12, 4801, dtype=np.float32).reshape(1, 4801)  # past both clamps
    cases = [
        OpCase(
            "LayerNorm/last_affine",
            OpType.LayerNorm,
            (x,),
            _layer_norm([-1], True, False),
            fmt=NCHW,
        ),  # fmt: skip
        OpCase(
            "LayerNorm/two_axes",
            OpType.LayerNorm,
            (x,),
            _layer_norm([1, 2], False, False),
            fmt=NCHW,
        ),  # fmt: skip
        OpCase("LayerNorm/rms", OpType.LayerNorm, (x,), _layer_norm([-1], True, True), fmt=NCHW),
        OpCase("UnaryOp/gelu_tanh", OpType.UnaryOp, (wide,), _unary(Un.GELU), fmt=NCHW),
        OpCase("UnaryOp/gelu_erf", OpType.UnaryOp, (wide,), _unary(Un.GELU_STANDARD), fmt=NCHW),
        _attention(5, 4, 2, 16, True, "causal", 0.0),
        _attention(3, 3, 1, 5, False, "random", 0.0),
        _attention(4, 8, 2, 4, False, "none", 0.3),
        _attention(6, 4, 4, 8, True, "scalar", 0.0),
        _attention(1, 2, 1, 8, False, "none", 0.0),
    ]
    return cases + [c for c in op_cases() if c.op_type == OpType.Softmax]


def check_lowering(case: OpCase, config: ScheduleConfig) -> LoweringCheck:
    """Run ``case`` with lowering forced on ``config``'s backend; compare with the reference."""
    with forced():
        session, outputs = run_net(case.model(), case.feeds(), config, quiet_fallback=True)
    placed = session.placement()
    if case.op_type == OpType.UnaryOp:  # a lowered GELU is several ops (erf's has a UnaryOp)
        lowered = len(placed) > 1
    else:
        lowered = all(p.op_type != case.op_type_name for p in placed)
    ok, diff, message = compare(outputs, case.expected(), case.rtol, case.atol)
    backends = tuple(sorted({p.backend for p in placed}))
    if not lowered:
        message = message or f"{case.op_type_name} was not lowered"
    return LoweringCheck(case.name, lowered, backends, diff, "" if ok else message)
