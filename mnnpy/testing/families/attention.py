"""Cases for the fused Attention op of LLM exports (one run on an empty K/V cache)."""

from __future__ import annotations

import numpy as np

from mnnpy._schema.MNN.AttentionParam import AttentionParamT
from mnnpy.net import OpType
from mnnpy.testing.cases import OpCase
from mnnpy.testing.families.common import NCHW, family


def _param(output_c4: bool, scale: float = 0.0) -> AttentionParamT:
    p = AttentionParamT()
    p.kvCache, p.outputC4, p.attnScale, p.layerIndex = True, output_c4, scale, 0
    return p


@family("Attention")
def attention() -> list[OpCase]:
    cases = []
    shapes = [(5, 4, 2, 16, True, True), (3, 3, 1, 5, False, True), (1, 2, 2, 8, True, False)]
    for seq, nh, kv, d, c4, masked in [*shapes, (4, 8, 2, 4, False, False)]:
        rng = np.random.default_rng(seq * 10 + nh)
        q = rng.standard_normal((1, seq, nh, d)).astype(np.float32)
        k = rng.standard_normal((1, seq, kv, d)).astype(np.float32)
        v = rng.standard_normal((seq, kv * d, 1, 1)).astype(np.float32)
        inputs: tuple[np.ndarray, ...] = (q, k, v)
        if masked:
            causal = np.triu(np.full((seq, seq), np.finfo(np.float32).min, np.float32), 1)
            inputs += (causal.reshape(1, 1, seq, seq),)
        name = f"Attention/s{seq}_h{nh}_kv{kv}_d{d}{'_c4' if c4 else ''}{'_mask' if masked else ''}"
        cases.append(OpCase(name, OpType.Attention, inputs, _param(c4, 0.0 if masked else 0.3),
                            fmt=NCHW))  # fmt: skip
    return cases
