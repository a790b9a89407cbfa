#!/usr/bin/env python
"""Build the activation-model tests: EfficientNet-like and ConvNeXt-like ONNX graphs (SiLU,
hard-swish, GELU in three spellings) converted by MNN's converter.

Usage (from the repository root; needs the ``convert`` extra: ``mnn`` 3.6.1, ``onnx``,
``onnxruntime``)::

    python tools/make_activation_models.py [--out tests/data/activations] [--size 32]

For every graph in ``MODELS``: build it with ``onnx.helper`` (opset 20, fixed seed), convert with
MNN's converter (``tools/_mnn_convert.py``, uuid made reproducible), run the converted file with
MNN's Session API (CPU, 1 thread, twice) and write ``<name>.npz`` (``input:<name>`` /
``output:<name>``) and ``README.md`` with the op types the converter wrote (it turns
``x * sigmoid(x)`` into UnaryOp SILU, HardSwish into HARDSWISH, the Gelu op into GELU, keeps the
erf spelling as ERF and binary ops) and max|MNN - onnxruntime| as a sanity check of the graph.
``--size 224`` writes the same graphs at ImageNet resolution for per-op timing (not committed:
the weights are the same, only the input grows).

SAFETY: conversion only through ``tools/_mnn_convert.py`` (never ``MNN.tools`` or the console
scripts).
"""

from __future__ import annotations

import argparse
import collections
import os
import shutil
import sys
import tempfile
from collections.abc import Callable

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _mnn_convert as mc  # noqa: E402
from make_test_models import GraphBuilder  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OPSET = 20  # the Gelu op
Built = tuple  # (onnx model, {input name: array})


def _f32(v: float) -> np.ndarray:
    return np.array(v, np.float32)


def _model(g: GraphBuilder, inputs: list, outputs: list):
    import onnx
    from onnx import TensorProto, helper

    graph = helper.make_graph(
        g.nodes,
        g.name,
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, s) for n, s in inputs],
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, s) for n, s in outputs],
        initializer=g.inits,
    )
    m = helper.make_model(
        graph, opset_imports=[helper.make_opsetid("", OPSET)], producer_name="mnnpy"
    )
    m.ir_version = 9
    onnx.checker.check_model(m, full_check=True)
    return m


def _silu(g: GraphBuilder, x: str) -> str:
    return g.node("Mul", [x, g.node("Sigmoid", [x])])  # as torch exports nn.SiLU


def _se(g: GraphBuilder, x: str, c: int, r: int, act: Callable, gate: Callable) -> str:
    """Squeeze-excitation: pool, reduce + act, expand, gate, scale."""
    s = g.node("GlobalAveragePool", [x])
    s = gate(g.conv(act(g, g.conv(s, c, r, 1)), r, c, 1))
    return g.node("Mul", [x, s])


def build_efficientnet(size: int) -> Built:
    """EfficientNet-B0-like: SiLU as x * sigmoid(x) after the stem, expand, 5x5 depthwise and SE
    convolutions; a MobileNetV3-like block with HardSwish and a HardSigmoid SE gate; head."""
    g = GraphBuilder("efficientnet", seed=31)

    def hswish(gb: GraphBuilder, x: str) -> str:
        return gb.node("HardSwish", [x])

    def hsigmoid(x: str) -> str:
        return g.node("HardSigmoid", [x], alpha=1 / 6, beta=0.5)

    def sigmoid(x: str) -> str:
        return g.node("Sigmoid", [x])

    h = _silu(g, g.conv("x", 3, 16, 3, stride=2, pad=1))
    h = _silu(g, g.conv(h, 16, 64, 1))
    h = _silu(g, g.conv(h, 64, 64, 5, pad=2, group=64))
    h = _se(g, h, 64, 8, _silu, sigmoid)
    h = g.conv(h, 64, 24, 1)
    h = hswish(g, g.conv(h, 24, 72, 1))
    h = hswish(g, g.conv(h, 72, 72, 3, stride=2, pad=1, group=72))
    h = _se(g, h, 72, 16, lambda gb, v: gb.node("Relu", [v]), hsigmoid)
    h = g.conv(h, 72, 40, 1)
    h = _silu(g, g.conv(h, 40, 96, 1))
    f = g.node("Flatten", [g.node("GlobalAveragePool", [h])], axis=1)
    g.gemm(f, 96, 10, out="y")
    x = g.rng.randn(1, 3, size, size).astype(np.float32)
    return _model(g, [("x", [1, 3, size, size])], [("y", [1, 10])]), {"x": x}


def _gelu_erf(g: GraphBuilder, x: str) -> str:
    """``x * 0.5 * (1 + erf(x / sqrt 2))`` as torch exports ``nn.GELU()``."""
    e = g.node("Erf", [g.node("Div", [x, g.const("sqrt2", _f32(1.4142135381698608))])])
    e = g.node("Add", [e, g.const("one", _f32(1.0))])
    return g.node("Mul", [g.node("Mul", [x, e]), g.const("half", _f32(0.5))])


def _gelu_tanh(g: GraphBuilder, x: str) -> str:
    """``0.5 * x * (1 + tanh(sqrt(2 / pi) * (x + 0.044715 x^3)))`` spelled out."""
    x3 = g.node("Pow", [x, g.const("three", _f32(3.0))])
    inner = g.node("Add", [x, g.node("Mul", [x3, g.const("c", _f32(0.044715))])])
    t = g.node("Tanh", [g.node("Mul", [inner, g.const("k", _f32(0.7978845608))])])
    t = g.node("Add", [t, g.const("one", _f32(1.0))])
    return g.node("Mul", [g.node("Mul", [x, g.const("half", _f32(0.5))]), t])


def _convnext_block(g: GraphBuilder, x: str, c: int, gelu: Callable) -> str:
    """dwconv 7x7, channels-last LayerNorm, Linear 4c, GELU, Linear c, layer scale, residual."""
    h = g.conv(x, c, c, 7, pad=3, group=c)
    h = g.node("Transpose", [h], perm=[0, 2, 3, 1])
    gamma = g.const("ln_g", (1 + 0.1 * g.rng.randn(c)).astype(np.float32))
    beta = g.const("ln_b", (0.1 * g.rng.randn(c)).astype(np.float32))
    h = g.node("LayerNormalization", [h, gamma, beta], axis=-1, epsilon=1e-6)
    w1 = g.const("w1", (g.rng.randn(c, 4 * c) / np.sqrt(c)).astype(np.float32))
    b1 = g.const("b1", (g.rng.randn(4 * c) * 0.1).astype(np.float32))
    h = g.node("Add", [g.node("MatMul", [h, w1]), b1])
    h = gelu(g, h)
    w2 = g.const("w2", (g.rng.randn(4 * c, c) / np.sqrt(4 * c)).astype(np.float32))
    h = g.node("MatMul", [h, w2])
    h = g.node("Mul", [h, g.const("ls", np.full(c, 0.5, np.float32))])
    return g.node("Add", [x, g.node("Transpose", [h], perm=[0, 3, 1, 2])])


def build_convnext(size: int) -> Built:
    """ConvNeXt-like: 4x4 stride-4 stem, three blocks (7x7 depthwise, LayerNorm over channels,
    MLP) with GELU as torch's erf spelling, as the Gelu op and spelled out with Tanh; a second
    output log(1 + exp(-|h|)) covers EXP, LOG and ABS."""
    g = GraphBuilder("convnext", seed=32)
    c = 16
    h = g.conv("x", 3, c, 4, stride=4)
    for gelu in (_gelu_erf, lambda gb, v: gb.node("Gelu", [v]), _gelu_tanh):
        h = _convnext_block(g, h, c, gelu)
    f = g.node("Flatten", [g.node("GlobalAveragePool", [h])], axis=1)
    g.gemm(f, c, 10, out="y")
    e = g.node("Exp", [g.node("Neg", [g.node("Abs", [h])])])
    g.node("Log", [g.node("Add", [e, g.const("one", _f32(1.0))])], out="y2")
    x = g.rng.randn(1, 3, size, size).astype(np.float32)
    s = size // 4
    outs = [("y", [1, 10]), ("y2", [1, c, s, s])]
    return _model(g, [("x", [1, 3, size, size])], outs), {"x": x}


MODELS: dict[str, Callable[[int], Built]] = {
    "efficientnet": build_efficientnet,
    "convnext": build_convnext,
}


def op_types(path: str, tmp: str) -> collections.Counter:
    d = mc.dump_json(path, os.path.join(tmp, "dump.json"))
    kinds = collections.Counter(o["type"] for o in d["oplists"])
    for o in d["oplists"]:
        if o["type"] == "UnaryOp":
            kinds["UnaryOp " + o["main"]["opType"]] += 1
    return kinds


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[1])
    ap.add_argument("--out", default=os.path.join(ROOT, "tests", "data", "activations"))
    ap.add_argument("--size", type=int, default=32, help="input height and width")
    args = ap.parse_args(argv)
    os.makedirs(args.out, exist_ok=True)
    tmp = tempfile.mkdtemp(prefix="mnnpy_act_")
    rows = []
    try:
        for name, builder in MODELS.items():
            model, inputs = builder(args.size)
            onnx_path = os.path.join(tmp, name + ".onnx")
            with open(onnx_path, "wb") as f:
                f.write(model.SerializeToString())
            dst = os.path.join(args.out, name + ".mnn")
            mc.convert_onnx(onnx_path, dst)
            outs, _ = mc.run_mnn(dst, inputs, runs=2, threads=1)
            ref = mc.run_ort(model.SerializeToString(), inputs, threads=1)
            diffs = mc.max_abs_diffs(name, outs, ref)
            arrays = {"input:" + k: v for k, v in inputs.items()}
            arrays.update({"output:" + k: v for k, v in outs.items()})
            mc.save_npz(os.path.join(args.out, name + ".npz"), arrays)
            kinds = dict(sorted(op_types(dst, tmp).items()))
            diff_text = ", ".join(f"{k}={v:.3g}" for k, v in diffs.items())
            print(f"{name:<14} {os.path.getsize(dst):6d} bytes  max|MNN-ORT| {diff_text}")
            print(f"  ops: {kinds}")
            doc = " ".join((builder.__doc__ or "").split())
            ops = ", ".join(f"{k} {v}" for k, v in kinds.items())
            rows.append(f"| `{name}` | {os.path.getsize(dst)} | {doc} | {ops} | {diff_text} |")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    with open(os.path.join(args.out, "README.md"), "w") as f:
        f.write(README.format(size=args.size) + "\n".join(rows) + "\n")
    return 0


README = """# Activation models

Written by `tools/make_activation_models.py` (input 1x3x{size}x{size}): EfficientNet-like and
ConvNeXt-like ONNX graphs (opset 20, random weights) converted by MNN 3.6.1's converter, and
`<name>.npz` with the input (`input:<name>`) and MNN's Session outputs (`output:<name>`, CPU,
1 thread). `tests/models/test_activation_models.py` runs them in mnnpy. max|MNN-ORT| compares
MNN with onnxruntime on the source graph (a sanity check of the graph; MNN's GELU op is its tanh
approximation, the ONNX Gelu op the erf form).

| model | bytes | graph | ops in the file | max abs MNN - ORT |
|---|---|---|---|---|
"""


if __name__ == "__main__":
    raise SystemExit(main())
