#!/usr/bin/env python
"""Build the deployment variants of three small models with MNN's converter, plus MNN's goldens.

Usage (from the repository root; needs the ``convert`` extra: ``mnn`` 3.6.1, ``onnx``,
``onnxruntime``)::

    python tools/make_variant_models.py [--out tests/data/variants] [--models cnn,...]
    python tools/make_test_models.py --variants      # the same, after the plain test models

Models (ONNX graphs built with ``onnx.helper``, random weights from fixed seeds):

* ``cnn``: x 1x3x32x32 -> Conv3x3 16 + Relu -> depthwise Conv3x3 + Relu6 -> grouped Conv3x3
  32 (group 4) + Relu -> MaxPool 2x2 -> Conv1x1 64 + Relu -> Conv1x1 64 (input channels 64, so
  ``--weightQuantBlock 32`` splits every row in two blocks) + residual Add + Relu ->
  ConvTranspose 2x2 s2 64->16 + Relu -> AveragePool 2x2 -> GlobalAveragePool -> Flatten ->
  Gemm 16->10.
* ``transformer``: ids int32 1x16 -> Gather(embedding 32x64) -> LayerNormalization ->
  single-head self-attention (MatMul with 64x64 weights for Q, K, V, MatMul Q.K^T, scale,
  Softmax, MatMul with V; no output projection, to keep files small) + residual ->
  LayerNormalization -> MLP
  (MatMul 64x32 + bias, GELU written with Erf, MatMul 32x64 + bias) + residual -> y 1x16x64.
  Opset 17 (LayerNormalization).
* ``conv3d``: x 1x4x8x8x8 -> Conv3d 3x3x3 p1 8 ch + bias -> Max(h, 0) (a ReLU; see the
  findings) -> y 1x8x8x8x8.

Variants (converter flags; ``<model>.<variant>.mnn`` in ``--out``):

======================  ==============================================================
fp32                    (none)
fp16                    ``--fp16``
wq8 / wq6 / wq4 / wq2   ``--weightQuantBits N``
wq8_asym                ``--weightQuantBits 8 --weightQuantAsymmetric``
wq4_asym_b32            ``--weightQuantBits 4 --weightQuantAsymmetric --weightQuantBlock 32``
wq8_b32                 ``--weightQuantBits 8 --weightQuantBlock 32``
external                ``--saveExternalData`` (also writes ``<file>.weight``, kept beside it)
wq4_external            ``--weightQuantBits 4 --saveExternalData``
static                  ``--saveStaticModel --inputConfigFile F`` (F names the model's input
                        and its dims)
int8                    ``_tools.mnnquant(["quantized.out", fp32.mnn, int8.mnn, config.json])``
                        on the fp32 file, calibrated on 10 random 32x32 RGB PNGs (``cnn``) or
                        10 random ``input_type: sequence`` samples (the others)
======================  ==============================================================

Every file gets a content-derived uuid (``fix_uuid``). ``<model>.<variant>.npz`` holds
``input:<name>`` and ``output:<name>`` from MNN's Session API on that same file (CPU, 1 thread,
fed again before each of two runs, which must agree), i.e. for ``int8`` MNN's int8 run. The
float ONNX Runtime output on the same input is printed for reference (``max|MNN - ORT|``), and
``README.md`` in ``--out`` lists sizes, those differences and each file's op/storage summary.

Findings with the ``mnn`` 3.6.1 wheel (what the converter and MNN's runtime do with these files;
recorded here, not worked around silently):

* An ONNX ``Relu`` directly after a 3-D ``Conv`` makes the converter drop every op but the Input
  (the file then has no output; MNN: "can't find input: x", and ``--saveStaticModel`` writes a
  net MNN refuses: "Invalid net, for null oplist"). ``Max(h, 0)``, ``LeakyRelu`` and ``Sigmoid``
  after it convert fine, so ``conv3d`` uses ``Max(h, 0)``. The 3-D conv is lowered to
  Shape/SliceTf/Reshape -> ``Im2Col`` -> Transpose/Reshape -> ``Unpack`` into 3 (kernel depth)
  -> 3 Convolutions (4 in, 8 out, 3x3) -> ``Eltwise`` SUM -> Reshape/Transpose.
* ``--weightQuantBits N`` alone stores 2 ``alpha`` values per output channel ((min, scale)
  pairs, ``aMin`` -128), and adding ``--weightQuantAsymmetric`` stores 1 per channel (``aMin``
  0): in 3.6.1 the flag behaves as the opposite of its name. ``--weightQuantBlock 32`` splits a
  row only where the input channels x kernel exceed the block (``cnn``'s 64x64 1x1 conv and the
  transformer's 64-input MatMuls: 2 blocks per row, so 4 resp. 2 alphas per channel); the
  conv3d's 4x3x3 rows are not split (``conv3d.wq8_b32`` is byte-identical to ``conv3d.wq8``).
* ``--weightQuantBits`` quantizes Convolution/Deconvolution/depthwise weights and the
  MatMul-with-constant weights (converted to ``..._matmul_converted`` Convolutions) but not the
  embedding table (Gather's Const stays ``DT_FLOAT``); ``--fp16`` stores the table ``DT_HALF``
  and conv weights as ``quanParameter`` type 3; ``--saveExternalData`` moves conv weights, the
  embedding Const and LayerNorm gamma/beta to ``<file>.weight`` (for ``wq4_external`` the
  quantized buffers and alphas go there too: 0 alphas left in the file).
* ``--weightQuantBits 2`` files run, but the output is far from the float one (max diff 2.9
  on an output scale of 4.3 for ``cnn``): expected at 2 bits, kept as a decoding test.
* ``--saveStaticModel``: ``cnn`` becomes Convolutions + ``Raster`` (8) ops; ``transformer``
  gets ``Raster`` (10) and ``While`` (3) ops (the activation MatMuls and the Gather become loops).
* ``mnnquant`` accepts the transformer and the conv3d with ``input_type: sequence`` (one folder
  per sample with ``<input>.txt`` and ``input.json``); image calibration only fits ``cnn``.
  MNN's int8 run vs the float ONNX model: ``cnn`` 0.26 (scale 4.3), ``transformer`` 0.086
  (scale 3.65, only the MatMul-as-Convolutions are int8; LayerNorm, Softmax, Gather stay float),
  ``conv3d`` 2.86 (scale 2.93): MNN's own int8 run of the Im2Col lowering is far from float
  (43% of outputs off by > 0.1; 79% of outputs are 0 against 51% in float). The file and its
  MNN golden are kept: the int8 kernels must match MNN's arithmetic, whatever its quality.
* The int8 files keep ``quanParameter`` (+ ``symmetricQuan``) on the convolutions and per-tensor
  ``extraTensorDescribe[].quantInfo`` (scale, zero, min, max, DT_INT8); there are no explicit
  FloatToInt8 / Int8ToFloat ops in the file (MNN's runtime inserts the casts).

SAFETY: conversion only through ``tools/_mnn_convert.py`` (``_tools.mnnconvert`` in a
subprocess) and ``_tools.mnnquant`` in a subprocess; never ``import MNN.tools``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
from collections.abc import Mapping
from types import ModuleType
from typing import Any

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT_OUT = os.path.join(ROOT, "tests", "data", "variants")

# variant name -> converter flags ("{config}" is replaced by the static-model input config path)
VARIANTS: dict[str, list[str]] = {
    "fp32": [],
    "fp16": ["--fp16"],
    "wq8": ["--weightQuantBits", "8"],
    "wq6": ["--weightQuantBits", "6"],
    "wq4": ["--weightQuantBits", "4"],
    "wq2": ["--weightQuantBits", "2"],
    "wq8_asym": ["--weightQuantBits", "8", "--weightQuantAsymmetric"],
    "wq4_asym_b32": [
        "--weightQuantBits",
        "4",
        "--weightQuantAsymmetric",
        "--weightQuantBlock",
        "32",
    ],
    "wq8_b32": ["--weightQuantBits", "8", "--weightQuantBlock", "32"],
    "external": ["--saveExternalData"],
    "wq4_external": ["--weightQuantBits", "4", "--saveExternalData"],
    "static": ["--saveStaticModel", "--inputConfigFile", "{config}"],
}
INT8_MODELS = ("cnn", "transformer", "conv3d")  # full int8 with mnnquant


# ---------------------------------------------------------------------------
# ONNX graphs
# ---------------------------------------------------------------------------


def _builder_class() -> type:
    tools = os.path.dirname(os.path.abspath(__file__))
    if tools not in sys.path:
        sys.path.insert(0, tools)
    from make_test_models import GraphBuilder

    return GraphBuilder


def _model(g: Any, inputs, outputs, opset: int):
    """Like GraphBuilder.model but with typed inputs ((name, shape, onnx elem type)) and opset."""
    import onnx
    from onnx import TensorProto, helper

    graph = helper.make_graph(
        g.nodes,
        g.name,
        [helper.make_tensor_value_info(n, t, s) for n, s, t in inputs],
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, s) for n, s in outputs],
        initializer=g.inits,
    )
    m = helper.make_model(
        graph,
        opset_imports=[helper.make_opsetid("", opset)],
        producer_name="mnnpy-make_variant_models",
    )
    m.ir_version = 8
    onnx.checker.check_model(m, full_check=True)
    return m


def _input(seed: int, shape: tuple[int, ...]) -> np.ndarray:
    """Uniform in [-1, 1] on a 1/64 grid, like (pixel - 127.5) / 127.5; the grid keeps the .npz
    small (few distinct float32 values compress well)."""
    x = np.random.RandomState(seed).uniform(-1, 1, shape)
    return (np.round(x * 64) / 64).astype(np.float32)


def build_cnn():
    from onnx import TensorProto

    g = _builder_class()("cnn", seed=11)
    h = g.node("Relu", [g.conv("x", 3, 16, 3, pad=1)])  # 1x16x32x32
    h = g.clip6(g.conv(h, 16, 16, 3, pad=1, group=16))  # depthwise + ReLU6
    h = g.node("Relu", [g.conv(h, 16, 32, 3, pad=1, group=4)])  # grouped
    h = g.node("MaxPool", [h], kernel_shape=[2, 2], strides=[2, 2])  # 1x32x16x16
    a = g.node("Relu", [g.conv(h, 32, 64, 1)])  # 1x64x16x16
    b = g.conv(a, 64, 64, 1)  # input channels 64: two 32-wide quantization blocks per row
    h = g.node("Relu", [g.node("Add", [b, a])])
    w = (g.rng.randn(64, 16, 2, 2) * np.sqrt(2.0 / 64)).astype(np.float32)  # (cin, cout, k, k)
    bias = (g.rng.randn(16) * 0.1).astype(np.float32)
    h = g.node(
        "ConvTranspose",
        [h, g.const("Wt", w), g.const("Bt", bias)],
        kernel_shape=[2, 2],
        strides=[2, 2],
    )  # 1x16x32x32
    h = g.node("Relu", [h])
    h = g.node("AveragePool", [h], kernel_shape=[2, 2], strides=[2, 2])  # 1x16x16x16
    h = g.node("GlobalAveragePool", [h])
    h = g.node("Flatten", [h], axis=1)
    g.gemm(h, 16, 10, out="y")
    x = _input(111, (1, 3, 32, 32))
    return _model(g, [("x", [1, 3, 32, 32], TensorProto.FLOAT)], [("y", [1, 10])], 13), {"x": x}


def build_transformer():
    from onnx import TensorProto

    seq, d, hidden, vocab = 16, 64, 32, 32
    g = _builder_class()("transformer", seed=12)

    def weight(rows, cols):
        return g.const("W", (g.rng.randn(rows, cols) / np.sqrt(rows)).astype(np.float32))

    def layer_norm(x):
        gamma = (1.0 + 0.1 * g.rng.randn(d)).astype(np.float32)
        beta = (0.1 * g.rng.randn(d)).astype(np.float32)
        return g.node(
            "LayerNormalization",
            [x, g.const("gamma", gamma), g.const("beta", beta)],
            axis=-1,
            epsilon=1e-5,
        )

    table = (g.rng.randn(vocab, d) * 0.5).astype(np.float32)
    emb = g.node("Gather", [g.const("emb", table), "ids"], axis=0)  # 1x16x64
    h = layer_norm(emb)
    q = g.node("MatMul", [h, weight(d, d)])
    k = g.node("MatMul", [h, weight(d, d)])
    v = g.node("MatMul", [h, weight(d, d)])
    kt = g.node("Transpose", [k], perm=[0, 2, 1])
    s = g.node("MatMul", [q, kt])
    s = g.node("Mul", [s, g.const("scale", np.array(1.0 / np.sqrt(d), np.float32))])
    p = g.node("Softmax", [s], axis=-1)
    h1 = g.node("Add", [emb, g.node("MatMul", [p, v])])  # no output projection: small files
    m = g.node("MatMul", [layer_norm(h1), weight(d, hidden)])
    m = g.node("Add", [m, g.const("b", (0.1 * g.rng.randn(hidden)).astype(np.float32))])
    # GELU(x) = 0.5 x (1 + erf(x / sqrt 2))
    e = g.node("Erf", [g.node("Mul", [m, g.const("c", np.array(0.7071068, np.float32))])])
    e = g.node("Add", [e, g.const("one", np.array(1.0, np.float32))])
    m = g.node("Mul", [g.node("Mul", [m, e]), g.const("half", np.array(0.5, np.float32))])
    m = g.node("MatMul", [m, weight(hidden, d)])
    m = g.node("Add", [m, g.const("b", (0.1 * g.rng.randn(d)).astype(np.float32))])
    g.node("Add", [h1, m], out="y")
    ids = np.random.RandomState(112).randint(0, vocab, (1, seq)).astype(np.int32)
    model = _model(g, [("ids", [1, seq], TensorProto.INT32)], [("y", [1, seq, d])], 17)
    return model, {"ids": ids}


def build_conv3d():
    from onnx import TensorProto

    g = _builder_class()("conv3d", seed=13)
    w = (g.rng.randn(8, 4, 3, 3, 3) * np.sqrt(2.0 / (4 * 27))).astype(np.float32)
    b = (g.rng.randn(8) * 0.1).astype(np.float32)
    h = g.node(
        "Conv",
        ["x", g.const("W", w), g.const("B", b)],
        kernel_shape=[3, 3, 3],
        pads=[1, 1, 1, 1, 1, 1],
    )
    # ReLU as Max(h, 0): an ONNX Relu right after a 3-D Conv makes the 3.6.1 converter drop the
    # whole graph (see the docstring's findings); Max becomes a BinaryOp MAXIMUM, same values.
    g.node("Max", [h, g.const("zero", np.array(0.0, np.float32))], out="y")
    x = _input(113, (1, 4, 8, 8, 8))
    model = _model(g, [("x", [1, 4, 8, 8, 8], TensorProto.FLOAT)], [("y", [1, 8, 8, 8, 8])], 13)
    return model, {"x": x}


MODELS = {"cnn": build_cnn, "transformer": build_transformer, "conv3d": build_conv3d}


# ---------------------------------------------------------------------------
# Helpers: converter, PNG calibration set, mnnquant, MNN runs
# ---------------------------------------------------------------------------


def _mc() -> ModuleType:
    tools = os.path.dirname(os.path.abspath(__file__))
    if tools not in sys.path:
        sys.path.insert(0, tools)
    import _mnn_convert

    return _mnn_convert


def write_png(path: str, rgb: np.ndarray) -> None:
    """A minimal RGB PNG for the calibration folder (``_mnn_convert.write_png``)."""
    _mc().write_png(path, rgb)


def calibration_set(
    folder: str, count: int = 10, size: int | tuple[int, int] = 32, seed: int = 7
) -> str:
    """``count`` random RGB PNGs of ``size`` (side, or (height, width)) in ``folder``."""
    h, w = (size, size) if isinstance(size, int) else size
    os.makedirs(folder, exist_ok=True)
    rng = np.random.RandomState(seed)
    for i in range(count):
        img = rng.uniform(0, 255, (h, w, 3)).astype(np.uint8)
        write_png(os.path.join(folder, f"calib_{i:02d}.png"), img)
    return folder


def sequence_set(folder: str, inputs: Mapping[str, np.ndarray], count: int = 10, seed: int = 8):
    """``count`` calibration samples for ``input_type: sequence``: one sub-folder per sample with
    ``<input name>.txt`` (whitespace-separated numbers, read as float then cast) and
    ``input.json`` (the shapes). Values are drawn like the golden input: ids in the same range,
    floats uniform in [-1, 1]."""
    rng = np.random.RandomState(seed)
    for i in range(count):
        sample = os.path.join(folder, f"sample_{i:02d}")
        os.makedirs(sample, exist_ok=True)
        spec = []
        for name, arr in inputs.items():
            if arr.dtype.kind == "i":
                value = rng.randint(0, int(arr.max()) + 1, arr.shape)
            else:
                value = np.round(rng.uniform(-1, 1, arr.shape) * 64) / 64
            with open(os.path.join(sample, f"{name}.txt"), "w") as f:
                f.write(" ".join(f"{v:g}" for v in value.ravel()) + "\n")
            spec.append({"name": name, "shape": list(arr.shape)})
        with open(os.path.join(sample, "input.json"), "w") as f:
            json.dump({"inputs": spec, "outputs": []}, f)
    return folder


def mnnquant(src: str, dst: str, config: dict[str, Any], tmp: str) -> str:
    """Full int8 post-training quantization of ``src`` with ``_tools.mnnquant`` (subprocess)."""
    config = {"feature_quantize_method": "KL", "weight_quantize_method": "MAX_ABS", **config}
    cfg = os.path.join(tmp, "quant.json")
    with open(cfg, "w") as f:
        json.dump(config, f)
    return _mc().mnnquant(src, dst, cfg)


def quant_config(name: str, inputs: Mapping[str, np.ndarray], tmp: str) -> dict[str, Any]:
    """The mnnquant JSON for a model: random PNGs for the image model (``cnn``: pixel p maps to
    (p - 127.5) / 127.5, the golden input's range), ``input_type: sequence`` for the others."""
    calib = os.path.join(tmp, f"calib_{name}")
    if name == "cnn":
        return {
            "format": "RGB",
            "mean": [127.5, 127.5, 127.5],
            "normal": [1 / 127.5, 1 / 127.5, 1 / 127.5],
            "width": 32,
            "height": 32,
            "path": calibration_set(calib) + "/",
            "used_sample_num": 10,
        }
    return {
        "input_type": "sequence",
        "path": sequence_set(calib, inputs) + "/",
        "used_sample_num": 10,
        "inputs": [{"name": k, "shape": list(v.shape)} for k, v in inputs.items()],
    }


def run_mnn(path: str, inputs: Mapping[str, np.ndarray], runs: int = 2) -> dict[str, np.ndarray]:
    """MNN's Session (CPU, 1 thread), fed again before each run; float32 and int32 inputs."""
    import MNN

    interp = MNN.Interpreter(path)
    sess = interp.createSession({"numThread": 1})
    outs: dict[str, np.ndarray] | None = None
    for _ in range(runs):
        for name, arr in inputs.items():
            t_in = interp.getSessionInput(sess, name)
            if arr.dtype == np.int32:
                kind, arr = MNN.Halide_Type_Int, np.ascontiguousarray(arr, np.int32)
            else:
                kind, arr = MNN.Halide_Type_Float, np.ascontiguousarray(arr, np.float32)
            host = MNN.Tensor(list(arr.shape), kind, arr, MNN.Tensor_DimensionType_Caffe)
            t_in.copyFrom(host)
        interp.runSession(sess)
        res = {}
        for name, t_out in interp.getSessionOutputAll(sess).items():
            shape = list(t_out.getShape())
            host = MNN.Tensor(
                shape,
                MNN.Halide_Type_Float,
                np.zeros(shape, np.float32),
                MNN.Tensor_DimensionType_Caffe,
            )
            t_out.copyToHostTensor(host)
            res[name] = np.array(host.getNumpyData(), np.float32).reshape(shape).copy()
        if outs is not None:
            for k, v in res.items():
                if not np.array_equal(v, outs[k]):
                    raise RuntimeError(f"{path}: MNN output {k} differs between two runs")
        outs = res
    assert outs is not None
    return outs


def storage_summary(dump: dict) -> str:
    """Per-op weight storage seen in the converter's JSON dump (quanParameter / external / ...)."""
    kinds: dict[str, int] = {}
    for op in dump["oplists"]:
        main = op.get("main") or {}
        key = op["type"]
        if isinstance(main, dict):
            q = main.get("quanParameter")
            if q:
                # alpha values per output channel: 1 = symmetric scale, 2 = (min, scale) pairs,
                # 2 x blocks for block-wise files
                cout = main.get("common", {}).get("outputCount") or 1
                per = len(q.get("alpha", [])) / cout
                key += f"[quan type={q.get('type')} bits={q.get('aMaxOrBits', '?')} a/oc={per:g}]"
            elif main.get("external"):
                key += "[external]"
            elif op["type"] == "Const" and main.get("dataType") not in (None, "DT_INT32"):
                key += f"[{main.get('dataType')}]"
            elif main.get("symmetricQuan"):
                key += "[int8]"
        kinds[key] = kinds.get(key, 0) + 1
    return ", ".join(f"{k} x{v}" for k, v in sorted(kinds.items()))


# ---------------------------------------------------------------------------


def make_model(name: str, out: str, tmp: str, only: list[str] | None) -> list[dict[str, Any]]:
    mc = _mc()
    model, inputs = MODELS[name]()
    onnx_path = os.path.join(tmp, f"{name}.onnx")
    with open(onnx_path, "wb") as f:
        f.write(model.SerializeToString())
    ref = mc.run_ort(model.SerializeToString(), inputs, threads=1)
    config = os.path.join(tmp, f"{name}.config.txt")
    ((iname, arr),) = inputs.items()
    with open(config, "w") as f:
        dims = "x".join(str(s) for s in arr.shape)
        f.write(f"input_size = 1\ninput_names = {iname}\ninput_dims = {dims}\n")
    rows = []
    variants = list(VARIANTS) + (["int8"] if name in INT8_MODELS else [])
    for variant in variants:
        if only and variant not in only:
            continue
        dst = os.path.join(out, f"{name}.{variant}.mnn")
        row: dict[str, Any] = {"model": name, "variant": variant}
        try:
            if variant == "int8":
                src = os.path.join(tmp, f"{name}.fp32.mnn")
                mc.convert_onnx(onnx_path, src)
                config = quant_config(name, inputs, tmp)
                row["log"] = mnnquant(src, dst, config, tmp)
                # mnnquant also writes <dst>.json (its per-tensor scales, also in the file)
                if os.path.exists(dst + ".json"):
                    os.remove(dst + ".json")
                mc.fix_uuid(dst)
                what = "PNGs" if name == "cnn" else "sequence samples"
                row["flags"] = f"mnnquant (KL / MAX_ABS, 10 random {what})"
            else:
                flags = [f.replace("{config}", config) for f in VARIANTS[variant]]
                weight = dst + ".weight"
                if os.path.exists(weight):
                    os.remove(weight)
                mc.mnnconvert(
                    ["-f", "ONNX", "--modelFile", onnx_path, "--MNNModel", dst,
                     "--bizCode", "mnnpy", *flags],
                    expect=dst,
                )  # fmt: skip
                mc.fix_uuid(dst)
                row["flags"] = " ".join(VARIANTS[variant]).replace("{config}", "F")
            outs = run_mnn(dst, inputs)
        except Exception as e:  # noqa: BLE001 - a refused combination is recorded, not fatal
            row["error"] = f"{type(e).__name__}: {e}"[:300]
            for p in (dst, dst + ".weight"):
                if os.path.exists(p):
                    os.remove(p)
            print(f"{name}.{variant}: REFUSED/FAILED: {row['error']}")
            rows.append(row)
            continue
        arrays = {"input:" + k: v for k, v in inputs.items()}
        arrays.update({"output:" + k: v for k, v in outs.items()})
        mc.save_npz(os.path.join(out, f"{name}.{variant}.npz"), arrays)
        row["size"] = os.path.getsize(dst)
        if os.path.exists(dst + ".weight"):
            row["weight_size"] = os.path.getsize(dst + ".weight")
        row["diff_ort"] = {k: float(np.max(np.abs(outs[k] - ref[k]))) for k in ref if k in outs}
        row["scale"] = {k: float(np.max(np.abs(ref[k]))) for k in ref}
        try:
            row["storage"] = storage_summary(mc.dump_json(dst, os.path.join(tmp, "dump.json")))
        except Exception as e:  # noqa: BLE001 - the dump is informative only
            row["storage"] = f"(dump failed: {e})"
        print(
            f"{name}.{variant:<13} {row['size']:7d} B"
            + (f" + {row['weight_size']} B .weight" if "weight_size" in row else "")
            + f"  max|MNN-ORT| {row['diff_ort']} (scale {row['scale']})"
        )
        rows.append(row)
    return rows


def _cpu_flags() -> str:
    wanted = ("avx2", "fma", "avx512f", "avx512_vnni", "avx_vnni", "asimddp", "i8mm", "fphp")
    try:
        with open("/proc/cpuinfo") as f:
            lines = [line for line in f if line.startswith(("flags", "Features"))]
        flags = {w for line in lines for w in line.split()}
    except OSError:
        return "unknown"
    return ", ".join(w for w in wanted if w in flags) or "none of " + ", ".join(wanted)


def write_readme(out: str, rows: list[dict[str, Any]]) -> None:
    import MNN

    version = getattr(MNN, "version", lambda: "?")
    version = version() if callable(version) else version
    lines = [
        "# Variant test models",
        "",
        f"Generated by `tools/make_variant_models.py` (MNN {version} converter through",
        "`_tools.mnnconvert`, int8 through `_tools.mnnquant`, goldens from MNN's Session API on",
        "the same file, CPU, 1 thread). Do not edit by hand: the script rewrites this file.",
        "`<model>.<variant>.npz` holds `input:<name>` / `output:<name>`.",
        "",
        f"CPU features of the machine that made the goldens (MNN picks its int8 kernels by "
        f"them): {_cpu_flags()}.",
        "",
        "| file | flags | bytes | .weight bytes | max abs MNN - ORT(float) | output scale "
        "| storage (converter dump) |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        fname = f"{r['model']}.{r['variant']}.mnn"
        if "error" in r:
            lines.append(f"| {fname} | {r.get('flags', '')} | refused: {r['error']} | | | | |")
            continue
        diff = ", ".join(f"{k}: {v:.3g}" for k, v in r["diff_ort"].items())
        scale = ", ".join(f"{k}: {v:.3g}" for k, v in r["scale"].items())
        lines.append(
            f"| {fname} | `{r['flags']}` | {r['size']} | {r.get('weight_size', '')} | {diff} "
            f"| {scale} | {r['storage']} |"
        )
    with open(os.path.join(out, "README.md"), "w") as f:
        f.write("\n".join(lines) + "\n")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[1])
    ap.add_argument("--out", default=DEFAULT_OUT)
    ap.add_argument("--models", default=",".join(MODELS), help="comma-separated model names")
    ap.add_argument("--variants", default="", help="comma-separated variants (default: all)")
    ap.add_argument("--no-readme", action="store_true")
    args = ap.parse_args(argv)
    os.makedirs(args.out, exist_ok=True)
    only = [v for v in args.variants.split(",") if v] or None
    rows: list[dict[str, Any]] = []
    tmp = tempfile.mkdtemp(prefix="mnnpy_variants_")
    try:
        for name in [m for m in args.models.split(",") if m]:
            rows += make_model(name, args.out, tmp, only)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    if not args.no_readme:
        write_readme(args.out, rows)
    total = sum(os.path.getsize(os.path.join(args.out, f)) for f in os.listdir(args.out))
    print(f"{args.out}: {total} bytes in all")
    return 0


if __name__ == "__main__":
    sys.exit(main())
