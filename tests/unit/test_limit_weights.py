"""LIMIT / Memory_Low: quantized and fp16 convolution weights stay compressed in STATIC memory.

Files converted by MNN's converter (tests/data/limit, made by tools/make_limit_models.py, and
tests/data/variants) run in LIMIT mode within rtol 1e-3 / atol 1e-4 of the output scale of MNN's
Session output on the same file, holding about the bytes the file stores as STATIC memory.

The execution-level tests build ``WeightTable`` s by quantizing random float weights (every bit
width, symmetric and asymmetric, per channel and block-wise, fp16) and hand them to the LIMIT
creator in place of the decoder's; the oracle is the same op run on ``table.floats()`` as a
float32 weight (the float kernel on the numbers the dequantization must produce, so the outputs
are equal bit for bit) and the NumPy reference.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import mnnpy
from mnnpy._schema.MNN.Convolution2D import Convolution2DT
from mnnpy._schema.MNN.Convolution2DCommon import Convolution2DCommonT
from mnnpy._schema.MNN.IDSTQuan import IDSTQuanT
from mnnpy._schema.MNN.InnerProduct import InnerProductT
from mnnpy.backend.cpu.executions import convolution as C
from mnnpy.backend.cpu.executions import convolution_gemm_limit as GL
from mnnpy.backend.cpu.executions import matmul_limit as ML
from mnnpy.errors import ErrorCode, MNNError
from mnnpy.net import OpDef, OpParameter, OpType
from mnnpy.ops import reference_of
from mnnpy.tensor_format import DimensionFormat
from mnnpy.tooling.memory_report import weight_bytes
from mnnpy.weights import WeightTable
from tests.helpers import assert_close, make_single_op_net

CONV, DW = OpType.Convolution, OpType.ConvolutionDepthwise


def quantize(w: np.ndarray, bits: int, asym: bool = False, block: int = 0) -> WeightTable:
    """``w`` (rows first) as a WeightTable of ``bits`` (16: fp16); ``block`` 0: per channel."""
    if bits == 16:
        return WeightTable(w.shape, w.astype(np.float16), 16, stored_bytes=2 * w.size)
    rows = w.reshape(w.shape[0], -1)
    block = block or rows.shape[1]
    r = rows.reshape(rows.shape[0], -1, block)
    lo, hi = -(2 ** (bits - 1)), 2 ** (bits - 1) - 1
    if asym:
        mn, mx = r.min(axis=2), r.max(axis=2)
        scale = np.where(mx > mn, (mx - mn) / (2**bits - 1), 1).astype(np.float32)
        offset = (mn - lo * scale).astype(np.float32)
        q = np.rint((r - offset[:, :, None]) / scale[:, :, None])
    else:
        amax = np.abs(r).max(axis=2)
        scale = np.where(amax > 0, amax / hi, 1).astype(np.float32)
        offset = None
        q = np.rint(r / scale[:, :, None])
    codes = np.clip(q, lo, hi).astype(np.int8).reshape(w.shape)
    n = scale.size * (2 if asym else 1)
    return WeightTable(w.shape, codes, bits, scale, offset, (w.size * bits + 7) // 8 + 4 * n)


def conv_param(c: int, oc: int, k: int, group: int, table: WeightTable, **common) -> Convolution2DT:
    p = Convolution2DT()
    p.common = Convolution2DCommonT(
        kernelY=k, kernelX=k, outputCount=oc, inputCount=c, group=group, **common
    )
    p.weight = table.floats().ravel()
    p.bias = np.random.default_rng(3).standard_normal(oc).astype(np.float32)
    return p


def run(x, param, op_type, memory, threads=1):
    model = make_single_op_net(op_type, [x], param, OpParameter.Convolution2D)
    interp = mnnpy.Interpreter.from_buffer(model)
    cfg = mnnpy.BackendConfig(memory=memory)
    session = interp.create_session(mnnpy.ScheduleConfig(num_thread=threads, backend_config=cfg))
    interp.get_session_input(session, "in0").copy_from(x)
    interp.run_session(session)
    return interp.get_session_output(session, "out0").numpy(), session


def with_table(monkeypatch, table: WeightTable, bias: np.ndarray) -> None:
    """The LIMIT creator gets ``table`` as if the op stored it quantized."""
    monkeypatch.setattr(
        C, "limit_table", lambda b, op, dims: (table, bias) if b.low_memory else None
    )


CASES = {  # name: (channels, outputs, kernel, group, op type, common fields, batch, hw)
    "dense3x3": (5, 17, 3, 1, CONV, {"padX": 1, "padY": 1}, 2, (7, 6)),
    "dense1x1": (8, 20, 1, 1, CONV, {}, 1, (5, 5)),
    "matmul1x1_batch": (12, 33, 1, 1, CONV, {}, 6, (1, 1)),
    "stride2": (4, 16, 3, 1, CONV, {"strideX": 2, "strideY": 2}, 1, (9, 8)),
    "depthwise": (5, 5, 3, 5, DW, {"padX": 1, "padY": 1}, 2, (6, 7)),
    "grouped": (6, 10, 3, 2, CONV, {}, 1, (6, 6)),
}
FORMATS = [(8, False, 0), (8, True, 0), (4, False, 0), (4, True, 0), (16, False, 0),
           (2, False, 0), (3, True, 0), (5, False, 0), (6, True, 0), (7, False, 0),
           (4, False, "block"), (8, True, "block")]  # fmt: skip


@pytest.mark.parametrize("case", list(CASES))
@pytest.mark.parametrize(("bits", "asym", "block"), FORMATS)
def test_limit_matches_float_weights(monkeypatch, case, bits, asym, block):
    # bit for bit: the dequantized path (the fused GEMV of few pixels: test_limit_gemv.py)
    monkeypatch.setattr(GL, "GEMV_TOKENS", 0)
    c, oc, k, group, op_type, common, batch, hw = CASES[case]
    rng = np.random.default_rng(bits)
    w = rng.standard_normal((oc, c // group, k, k)).astype(np.float32)
    # block-wise: blocks of one kernel window (k * k codes), several per row when c > 1
    table = quantize(w, bits, asym, k * k if block and c // group > 1 else 0)
    param = conv_param(c, oc, k, group, table, **common)
    x = rng.standard_normal((batch, c, *hw)).astype(np.float32)
    want, _ = run(x, param, op_type, "LIMIT")  # the float path on the same numbers
    with_table(monkeypatch, table, np.asarray(param.bias))
    got, session = run(x, param, op_type, "LIMIT")
    two, _ = run(x, param, op_type, "LIMIT", threads=2)
    ex = [u.execution for u in session.pipelines[0].units if u.op.name == "op"][0]
    assert ex.compressed is not None, "the LIMIT creator did not keep the table compressed"
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(two, got)
    op = OpDef(0, op_type, "op", (0,), (1,), param, OpParameter.Convolution2D, DimensionFormat.NHWC)
    assert_close(got, reference_of(op_type)(op, [x])[0])


@pytest.mark.parametrize(
    ("bits", "ratio"), [(4, 1 / 8 + 0.01), (8, 1 / 4 + 0.01), (16, 1 / 2 + 0.01)]
)
def test_static_bytes_are_the_compressed_size(monkeypatch, bits, ratio):
    rng = np.random.default_rng(0)
    w = rng.standard_normal((64, 32, 3, 3)).astype(np.float32)
    table = quantize(w, bits)
    param = conv_param(32, 64, 3, 1, table)
    x = rng.standard_normal((1, 32, 8, 8)).astype(np.float32)
    _, normal = run(x, param, CONV, "NORMAL")
    _, limit_float = run(x, param, CONV, "LIMIT")
    with_table(monkeypatch, table, np.asarray(param.bias))
    _, limit = run(x, param, CONV, "LIMIT")
    float_bytes = limit_float.info().memory.static
    assert float_bytes == normal.info().memory.static or normal.info().memory.static > float_bytes
    weight_bytes = w.size * 4
    static = limit.info().memory.static
    assert static <= 1.1 * table.stored_bytes + 4 * 64  # + the float32 bias
    assert static < ratio * weight_bytes + 4 * 64 + 1024
    # the float panels live in the DYNAMIC arena, only while the op runs
    assert limit.info().memory.scratch >= weight_bytes


def inner_product(x, param, memory, threads=1):
    model = make_single_op_net(
        OpType.InnerProduct, [x], param, OpParameter.InnerProduct, fmt=DimensionFormat.NCHW
    )
    interp = mnnpy.Interpreter.from_buffer(model)
    cfg = mnnpy.BackendConfig(memory=memory)
    session = interp.create_session(mnnpy.ScheduleConfig(num_thread=threads, backend_config=cfg))
    interp.get_session_input(session, "in0").copy_from(x)
    interp.run_session(session)
    ex = [u.execution for u in session.pipelines[0].units if u.op.name == "op"][0]
    return interp.get_session_output(session, "out0").numpy(), session, ex


@pytest.mark.parametrize("chunk", ["layer", "panel"])
@pytest.mark.parametrize(("bits", "asym", "block"), FORMATS)
def test_inner_product_limit(monkeypatch, bits, asym, block, chunk):
    if chunk == "panel":  # one 16-column panel per chunk: 37 columns in 3 chunks
        monkeypatch.setattr(ML, "_CHUNK_FLOATS", 1)
    n, k = 37, 40
    rng = np.random.default_rng(bits)
    table = quantize(rng.standard_normal((n, k)).astype(np.float32), bits, asym, 8 * bool(block))
    p = InnerProductT()
    p.outputCount, p.biasTerm = n, 1
    p.bias = rng.standard_normal(n).astype(np.float32)
    p.weight = table.floats().ravel()
    x = rng.standard_normal((3, k)).astype(np.float32)
    want, _, _ = inner_product(x, p, "LIMIT")
    monkeypatch.setattr(
        ML,
        "limit_inner_product",
        lambda b, op, k: ML.CPUInnerProductLimit(b, table, p.bias) if b.low_memory else None,
    )
    got, session, ex = inner_product(x, p, "LIMIT")
    assert isinstance(ex, ML.CPUInnerProductLimit) and ex._chunk == (1 if chunk == "panel" else 3)
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(inner_product(x, p, "LIMIT", threads=2)[0], got)
    assert_close(got, x @ table.floats().T + p.bias)


def test_inner_product_fp16_file_table_limit():
    """A real fp16 ``quanParameter`` (IDST type 3) through the decoder, kept as fp16."""
    n, k = 6, 10
    rng = np.random.default_rng(5)
    w = rng.standard_normal((n, k)).astype(np.float32)
    p = InnerProductT()
    p.outputCount, p.biasTerm = n, 1
    p.bias = rng.standard_normal(n).astype(np.float32)
    q = IDSTQuanT()
    q.type, q.buffer = 3, np.frombuffer(w.astype("<f2").tobytes(), np.int8)
    p.quanParameter = q
    x = rng.standard_normal((3, k)).astype(np.float32)
    got, limit, ex = inner_product(x, p, "LIMIT")
    assert ex.compressed is not None and ex.compressed.bits == 16
    _, normal, _ = inner_product(x, p, "NORMAL")
    np.testing.assert_allclose(got, x @ w.astype(np.float16).astype(np.float32).T + p.bias,
                               rtol=1e-5, atol=1e-5)  # fmt: skip
    assert limit.info().memory.static < normal.info().memory.static


@pytest.mark.parametrize("case", ["dense3x3", "dense1x1", "stride2", "matmul1x1_batch"])
@pytest.mark.parametrize(("bits", "asym", "block"), [(4, True, "block"), (8, False, 0), (16, 0, 0)])
@pytest.mark.parametrize("batch", [1, 2])
def test_chunks_of_panels(monkeypatch, case, bits, asym, block, batch):
    """One 16-channel panel per chunk (dequantize, convolve, next): same as the float path."""
    monkeypatch.setattr(GL, "_CHUNK_FLOATS", 1)
    monkeypatch.setattr(GL, "GEMV_TOKENS", 0)  # one pixel would take the fused GEMV
    c, oc, k, group, op_type, common, _, hw = CASES[case]
    oc = 37  # three chunks, the last one partial
    rng = np.random.default_rng(bits + batch)
    w = rng.standard_normal((oc, c, k, k)).astype(np.float32)
    table = quantize(w, bits, asym, k * k if block else 0)
    param = conv_param(c, oc, k, group, table, **common)
    x = rng.standard_normal((batch, c, *hw)).astype(np.float32)
    want, _ = run(x, param, op_type, "LIMIT")
    with_table(monkeypatch, table, np.asarray(param.bias))
    got, session = run(x, param, op_type, "LIMIT")
    ex = [u.execution for u in session.pipelines[0].units if u.op.name == "op"][0]
    assert isinstance(ex, GL.CPUConvolutionGemmLimit)
    assert ex._chunk == 1
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(run(x, param, op_type, "LIMIT", threads=3)[0], got)
    # the arena holds one panel of floats, not the layer
    assert ex._weight_scratch.size == 4 * 16 * ex.compressed.k * ex._chunk


# -- converted files: MNN's converter wrote them, MNN's Session computed their goldens ----------
DATA = Path(__file__).resolve().parents[1] / "data"
# (file, whether STATIC <= 1.1 x stored holds: cnn.* has a Deconvolution, which LIMIT keeps as
# float32, and 8-channel layers padded to 16-lane panels)
FILES = [
    *((f"limit/cnn16.{v}", True) for v in ("fp16", "wq8", "wq4", "wq4_asym_b32", "wq8_b32")),
    *((f"variants/transformer.{v}", True) for v in ("fp16", "wq8", "wq4", "wq4_asym_b32")),
    *((f"variants/cnn.{v}", False) for v in ("fp16", "wq8", "wq4", "wq2", "wq8_b32")),
    ("variants/cnn.wq4_external", False),  # codes read from cnn.wq4_external.mnn.weight
]


def session_of(path: Path, memory: str, threads: int = 1, budget: int | None = None):
    interp = mnnpy.Interpreter(str(path))
    cfg = mnnpy.BackendConfig(memory=memory, memory_budget=budget)
    session = interp.create_session(mnnpy.ScheduleConfig(num_thread=threads, backend_config=cfg))
    return interp, session


def outputs_of(interp, session, inputs):
    for name, value in inputs.items():
        interp.get_session_input(session, name).copy_from(value)
    interp.run_session(session)
    return {n: t.numpy() for n, t in interp.get_session_output_all(session).items()}


def held(session) -> int:
    m = session.info().memory
    return m.static + m.dynamic + m.separate


@pytest.mark.parametrize(("name", "tight"), FILES)
def test_converted_file_in_limit(name, tight):
    path = DATA / f"{name}.mnn"
    with np.load(DATA / f"{name}.npz") as z:
        inputs = {k[6:]: z[k] for k in z.files if k.startswith("input:")}
        golden = {k[7:]: z[k] for k in z.files if k.startswith("output:")}
    interp, limit = session_of(path, "Memory_Low")
    got = outputs_of(interp, limit, inputs)
    for key, want in golden.items():
        scale = float(np.abs(want).max()) or 1.0
        np.testing.assert_allclose(got[key], want, rtol=1e-3, atol=1e-4 * scale, err_msg=key)
    interp2, two = session_of(path, "Memory_Low", threads=2)
    for key, value in outputs_of(interp2, two, inputs).items():
        np.testing.assert_array_equal(value, got[key])
    convs = [u for u in limit.pipelines[0].units if u.op.type in (CONV, DW)]
    assert convs and all(u.execution.compressed is not None for u in convs)
    static, stored = limit.info().memory.static, weight_bytes(limit).stored
    _, normal = session_of(path, "Memory_Normal")
    assert static < (0.6 if tight else 0.7) * normal.info().memory.static
    if tight:
        assert static <= 1.1 * stored, (static, stored)


def test_budget_between_compressed_and_float():
    """The budget counts compressed weights as held: LIMIT fits, NORMAL does not."""
    path = DATA / "limit" / "cnn16.wq8.mnn"
    low, normal = (held(session_of(path, m)[1]) for m in ("Memory_Low", "Memory_Normal"))
    assert low < normal
    budget = (low + normal) // 2
    _, limit = session_of(path, "Memory_Low", budget=budget)
    assert held(limit) <= budget
    with pytest.raises(MNNError) as err:
        session_of(path, "Memory_Normal", budget=budget)
    assert err.value.code == ErrorCode.OUT_OF_MEMORY
    with pytest.raises(MNNError) as err:  # and LIMIT too when the compressed weights do not fit
        session_of(path, "Memory_Low", budget=limit.info().memory.static // 2)
    assert err.value.code == ErrorCode.OUT_OF_MEMORY


def test_float32_file_keeps_todays_limit_path():
    path = DATA / "limit" / "cnn16.fp32.mnn"
    _, limit = session_of(path, "Memory_Low")
    convs = [u for u in limit.pipelines[0].units if u.op.type in (CONV, DW)]
    assert convs and all(getattr(u.execution, "compressed", None) is None for u in convs)
    assert not any(isinstance(u.execution, GL.CPUConvolutionGemmLimit) for u in convs)


@pytest.mark.parametrize("name", ["limit/cnn16.wq4_asym_b32", "variants/transformer.fp16"])
def test_run_with_callbacks_uses_on_execute(name):
    """With callbacks the pipeline calls ``on_execute`` instead of the bound calls."""
    path = DATA / f"{name}.mnn"
    with np.load(DATA / f"{name}.npz") as z:
        inputs = {k[6:]: z[k] for k in z.files if k.startswith("input:")}
    interp, session = session_of(path, "Memory_Low")
    want = outputs_of(interp, session, inputs)
    seen = []
    for key, value in inputs.items():
        interp.get_session_input(session, key).copy_from(value)
    interp.run_session_with_callback(session, after=lambda ts, op: seen.append(op) or True)
    assert seen
    for key, value in interp.get_session_output_all(session).items():
        np.testing.assert_array_equal(value.numpy(), want[key])


def test_cli_mem_low_shows_static_next_to_the_file():
    import re
    import subprocess
    import sys

    def mem(mode):
        r = subprocess.run(
            [sys.executable, "-m", "mnnpy", "mem", str(DATA / "limit" / "cnn16.wq8.mnn"),
             "--memory", mode], capture_output=True, text=True, timeout=120,
        )  # fmt: skip
        assert r.returncode == 0, r.stderr
        static = int(re.search(r"static \(weights\)\s+(\d+) B", r.stdout).group(1))
        stored = re.search(r"weights in the file\s+(\d+) B .* (\S+) MB as float32", r.stdout)
        return static, int(stored.group(1)), float(stored.group(2)), r.stdout

    low, stored, as_float, text = mem("low")
    normal, stored2, _, _ = mem("normal")
    assert "memory mode LOW" in text and stored == stored2
    assert low <= 1.1 * stored < normal and stored / 2**20 < as_float


def test_decodable_corrupted_tables_compress_exactly():
    """Tables the decoder accepts after corruption (codes in MNN's own ranges, odd scales)
    compress and dequantize to exactly the packed ``floats()``, in every execution's layout."""
    from mnnpy.backend.cpu.backend import CPUBackend
    from mnnpy.backend.cpu.executions.convolution_limit import CompressedPanels
    from mnnpy.weights import conv_table
    from tests.unit.test_weights import conv_op, quan
    from tests.unit.test_weights_fuzz import IC, OC, K, mutate, tables

    backend = CPUBackend(1, mnnpy.BackendConfig(memory="Memory_Low"))
    packs = [
        (C.CPUConvolutionGemm.pack_weight, 16),
        (lambda w: C.CPUConvolutionGroup.pack_weight(w, 2), 16),
    ]
    rng = np.random.default_rng(16)
    kinds, decoded = tables(rng), 0
    for case in range(120):
        name, buf, alpha, kind, extra = kinds[case % len(kinds)]
        try:
            table = conv_table(
                conv_op(OC, IC, K, quan(mutate(buf, rng), alpha, kind=kind, **extra))
            )
        except MNNError:
            continue
        if table.bits == 32:
            continue
        decoded += 1
        for pack, lanes in packs:
            panels = CompressedPanels(backend, table, pack, lanes, owner=backend)
            got = np.full(panels.floats, np.nan, np.float32)
            panels.bind(got, 2)()
            want = pack(table.floats())
            same = (got == want) | (np.isnan(got) & np.isnan(want))
            assert same.all(), (name, table.bits)
    assert decoded > 20


def _compressed_files():
    from tests.models import test_weight_fuzz as F

    return [p for p in F.FILES if any(t in p.name for t in (".wq", ".fp16", "wq4", "fp16"))]


@pytest.mark.parametrize("path", _compressed_files(), ids=lambda p: p.name)
def test_mutated_compressed_models_in_limit(monkeypatch, path):
    """The weights fuzz (mutated model and weight-file bytes), in LIMIT mode: MNNError only."""
    import functools

    from tests.models import test_weight_fuzz as F

    monkeypatch.setattr(F, "BackendConfig", functools.partial(F.BackendConfig, memory="Memory_Low"))
    F.test_mutated_weight_models(path)


def test_resize_in_limit():
    """A LIMIT session resized to a batch and another size: its chunks and scratch follow."""
    path = DATA / "limit" / "cnn16.wq4_asym_b32.mnn"
    x = np.random.default_rng(4).standard_normal((3, 16, 13, 11)).astype(np.float32)
    got = {}
    for memory in ("Memory_Low", "Memory_Normal"):
        interp, session = session_of(path, memory)
        interp.resize_tensor(interp.get_session_input(session, "x"), x.shape)
        interp.resize_session(session)
        got[memory] = outputs_of(interp, session, {"x": x})["y"]
    assert got["Memory_Low"].shape == (3, 32)
    assert_close(got["Memory_Low"], got["Memory_Normal"])
