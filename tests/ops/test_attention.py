"""Attention: CPU execution (with its K/V cache across runs and resizes) vs a naive reference."""

from __future__ import annotations

import math

import numpy as np
import pytest

from mnnpy import Interpreter, ScheduleConfig
from mnnpy._schema.MNN.AttentionParam import AttentionParamT
from mnnpy._schema.MNN.Net import NetT
from mnnpy.config import BackendConfig
from mnnpy.errors import ErrorCode, MNNError
from mnnpy.kv_cache import erase, kv_bytes, kv_caches, kv_length, reserve, reset
from mnnpy.net import OpDef, OpParameter, OpType, pack_net
from mnnpy.ops.attention import reference
from mnnpy.tensor_format import DimensionFormat
from mnnpy.testing.builders import input_op, make_op
from tests.helpers import assert_close

NCHW, NC4HW4 = DimensionFormat.NCHW, DimensionFormat.NC4HW4
LOWEST = np.finfo(np.float32).min


def param(kv_cache: bool = True, output_c4: bool = True, scale: float = 0.0) -> AttentionParamT:
    p = AttentionParamT()
    p.kvCache, p.outputC4, p.attnScale, p.layerIndex = kv_cache, output_c4, scale, 0
    return p


def net(p: AttentionParamT, nh: int, kv: int, d: int, v_fmt: DimensionFormat, mask: bool) -> bytes:
    """q [1,1,nh,d], k [1,1,kv,d], v [1, kv*d, 1, 1] (v_fmt), mask [1,1,1,1] -> out."""
    n = NetT()
    names = ["q", "k", "v"] + (["mask"] if mask else [])
    n.tensorName = names + ["out"]
    shapes = {"q": (1, 1, nh, d), "k": (1, 1, kv, d), "v": (1, kv * d, 1, 1), "mask": (1, 1, 1, 1)}
    ops = [
        input_op(name, i, shapes[name], np.float32, v_fmt if name == "v" else NCHW)
        for i, name in enumerate(names)
    ]
    ops.append(make_op(OpType.Attention, "attn", range(len(names)), [len(names)], p,
                       OpParameter.AttentionParam))  # fmt: skip
    n.oplists, n.outputName, n.tensorNumber = ops, ["out"], len(n.tensorName)
    return pack_net(n)


def naive(q: np.ndarray, keys: np.ndarray, values: np.ndarray, masks: np.ndarray, scale: float):
    """Per head and query: softmax(q.k * scale + mask) . v over every visible token (float64).

    q [seq, nh, d]; keys, values [total, kv, d]; masks [seq, total] additive.
    """
    seq, nh, d = q.shape
    total, kv = keys.shape[0], keys.shape[1]
    out = np.zeros((seq, nh, d))
    for h in range(nh):
        g = h // (nh // kv)
        for i in range(seq):
            s = np.array([q[i, h] @ keys[j, g] for j in range(total)], np.float64) * scale
            s = s + masks[i]
            e = np.exp(s - s.max())
            out[i, h] = (e / e.sum()) @ values[:, g].astype(np.float64)
    return out.reshape(seq, nh * d).astype(np.float32)


class Runner:
    """A session on the one-op net, fed step by step like an LLM driver."""

    def __init__(self, p, nh, kv, d, v_fmt=NC4HW4, mask=True, threads=1, config=None):
        self.nh, self.kv, self.d, self.mask = nh, kv, d, mask
        self.it = Interpreter.from_buffer(net(p, nh, kv, d, v_fmt, mask))
        self.s = self.it.create_session(config or ScheduleConfig(num_thread=threads))

    def run(self, q, k, v, mask=None):
        seq = q.shape[0]
        feed = {"q": q[None], "k": k[None], "v": v.reshape(seq, -1, 1, 1)}
        if self.mask:
            feed["mask"] = mask
        inputs = self.it.get_session_input_all(self.s)
        for name, value in feed.items():
            self.it.resize_tensor(inputs[name], value.shape)
        self.it.resize_session(self.s)
        for name, value in feed.items():
            self.it.get_session_input(self.s, name).copy_from(value)
        self.it.run_session(self.s)
        return self.it.get_session_output(self.s, "out").numpy()


def causal(seq: int) -> np.ndarray:
    m = np.where(np.arange(seq)[None, :] > np.arange(seq)[:, None], LOWEST, 0)
    return m.astype(np.float32).reshape(1, 1, seq, seq)


def rand(rng, *shape):
    return rng.standard_normal(shape).astype(np.float32)


@pytest.mark.parametrize("v_fmt", [NC4HW4, NCHW])
@pytest.mark.parametrize(("nh", "kv", "d"), [(4, 2, 16), (3, 3, 5), (8, 1, 4), (2, 2, 17)])
def test_prefill_then_decode(nh: int, kv: int, d: int, v_fmt: DimensionFormat) -> None:
    rng = np.random.default_rng(nh * 100 + d)
    steps = [5, 1, 1, 3, 1]  # prefill, decodes, a chunk, a decode
    total = sum(steps)
    q, k, v = rand(rng, total, nh, d), rand(rng, total, kv, d), rand(rng, total, kv, d)
    outs = {}
    for threads in (1, 2):
        r = Runner(param(), nh, kv, d, v_fmt, threads=threads)
        pos, got = 0, []
        for n in steps:
            sl = slice(pos, pos + n)
            got.append(r.run(q[sl], k[sl], v[sl], causal(n)).reshape(n, nh * d))
            pos += n
            assert kv_length(r.s) == pos
        outs[threads] = np.concatenate(got)
    np.testing.assert_array_equal(outs[1], outs[2])
    full = np.where(np.arange(total)[None, :] > np.arange(total)[:, None], LOWEST, 0)
    assert_close(outs[1], naive(q, k, v, full, 1 / math.sqrt(d)))


def test_no_mask_is_causal_and_scale() -> None:
    rng = np.random.default_rng(1)
    q, k, v = rand(rng, 4, 4, 8), rand(rng, 4, 2, 8), rand(rng, 4, 2, 8)
    r = Runner(param(scale=0.3), 4, 2, 8, mask=False)
    out = r.run(q, k, v).reshape(4, 32)
    full = np.where(np.arange(4)[None, :] > np.arange(4)[:, None], -np.inf, 0)
    assert_close(out, naive(q, k, v, full, 0.3))


def test_full_mask_and_reference() -> None:
    """A [seq, seq] mask on an empty cache; the module's reference agrees with the naive one."""
    rng = np.random.default_rng(2)
    q, k, v = rand(rng, 3, 2, 4), rand(rng, 3, 1, 4), rand(rng, 3, 1, 4)
    mask = rand(rng, 1, 1, 3, 3)
    r = Runner(param(output_c4=False), 2, 1, 4, NCHW)
    out = r.run(q, k, v, mask)
    want = naive(q, k, v, mask.reshape(3, 3), 0.5)
    assert out.shape == (1, 3, 8)
    assert_close(out.reshape(3, 8), want)
    op = OpDef(0, OpType.Attention, "a", (0, 1, 2, 3), (4,), param(output_c4=False),
               OpParameter.AttentionParam, NCHW)  # fmt: skip
    assert_close(reference(op, [q[None], k[None], v.reshape(3, 4, 1, 1), mask])[0], out)


def test_without_kv_cache_each_run_is_alone() -> None:
    rng = np.random.default_rng(3)
    r = Runner(param(kv_cache=False), 2, 2, 4)
    for n in (3, 2):
        q, k, v = rand(rng, n, 2, 4), rand(rng, n, 2, 4), rand(rng, n, 2, 4)
        m = causal(n).reshape(n, n)
        assert_close(r.run(q, k, v, causal(n)).reshape(n, 8), naive(q, k, v, m, 0.5))


def test_reset_erase_reserve() -> None:
    rng = np.random.default_rng(4)
    q, k, v = rand(rng, 6, 2, 4), rand(rng, 6, 1, 4), rand(rng, 6, 1, 4)
    r = Runner(param(), 2, 1, 4)
    reserve(r.s, 64)
    (cache,) = kv_caches(r.s)
    assert cache.capacity == 64 and kv_bytes(r.s, 64) == 64 * 2 * 4 * 4
    r.run(q[:4], k[:4], v[:4], causal(4))
    erase(r.s, 2)  # drop tokens 2, 3; run tokens 4, 5 as if they were 2, 3
    assert kv_length(r.s) == 2
    out = r.run(q[4:], k[4:], v[4:], causal(2)).reshape(2, 8)
    idx = [0, 1, 4, 5]
    m = np.where(np.arange(4)[None, :] > np.arange(2, 4)[:, None], LOWEST, 0)
    assert_close(out, naive(q[4:], k[idx], v[idx], m, 0.5))
    reset(r.s)
    out = r.run(q[:2], k[:2], v[:2], causal(2)).reshape(2, 8)
    assert_close(out, naive(q[:2], k[:2], v[:2], causal(2).reshape(2, 2), 0.5))
    assert cache.capacity == 64
    with pytest.raises(MNNError) as e:
        erase(r.s, 3)
    assert e.value.code == ErrorCode.INVALID_VALUE


def test_cache_counts_in_static_memory() -> None:
    r = Runner(param(), 4, 2, 16)
    before = r.s.memory_info().static
    reserve(r.s, 100)
    assert r.s.memory_info().static - before == kv_bytes(r.s, 100) == 100 * 2 * 2 * 16 * 4
    reserve(r.s, 200)  # the old block is given back when the bigger one replaces it
    assert r.s.memory_info().static - before == kv_bytes(r.s, 200)


def test_reserve_over_budget_names_bytes() -> None:
    r = Runner(
        param(), 2, 1, 4, config=ScheduleConfig(backend_config=BackendConfig(memory_budget=1 << 16))
    )
    with pytest.raises(MNNError) as e:
        reserve(r.s, 1 << 16)
    assert e.value.code == ErrorCode.OUT_OF_MEMORY
    assert str(2 * 4 * 4 * (1 << 16)) in str(e.value)


def test_bad_mask_and_heads() -> None:
    rng = np.random.default_rng(5)
    r = Runner(param(), 2, 1, 4)
    with pytest.raises(MNNError) as e:
        r.run(rand(rng, 2, 2, 4), rand(rng, 2, 1, 4), rand(rng, 2, 1, 4), rand(rng, 1, 1, 2, 3))
    assert e.value.code == ErrorCode.INVALID_VALUE and "mask" in str(e.value)
    assert kv_length(r.s) == 0  # refused before the cache changed
    with pytest.raises(MNNError) as e:
        Runner(param(), 3, 2, 4)
    assert e.value.code in (ErrorCode.COMPUTE_SIZE_ERROR, ErrorCode.NOT_SUPPORT)
