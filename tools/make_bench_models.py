#!/usr/bin/env python
"""Build the benchmark models (random weights) and cache them as .mnn + .onnx + .npz.

Usage (from the repository root; needs the ``bench`` extra: ``mnn``, ``onnx``, ``onnxruntime``,
and ``torch`` for the PyTorch-exported models)::

    python tools/make_bench_models.py [--out DIR] [--force] [name ...]

Two kinds of model, float32, batch 1, random weights from fixed seeds with He-like scales so
activations stay O(1):

- built with ``onnx.helper`` (``mobilenet_v2`` ... ``tiny_ops``): BatchNormalization kept as real
  nodes with random but sane statistics for the converter to fold;
- written in PyTorch and exported by ``torch.onnx.export`` as users' files are made
  (``tools/bench_torch_models.py``, ``tools/bench_torch_families.py``): the same six (``*_pt``)
  and ``efficientnet_b0``, ``convnext_atto``, ``llama_decoder``, ``audio_encoder``. Without torch
  the default list leaves them out, with a note.

Each graph is checked, written as ``<name>.onnx``, converted with MNN's converter to
``<name>.mnn``, and run by MNN's Session (CPU, 1 thread), onnxruntime (1 thread) and mnnpy
(1 thread) on a fixed random input. ``<name>.npz`` holds ``input:<tensor>``, ``output:<tensor>``
(MNN) and ``ort:<tensor>`` (onnxruntime); max|MNN - ORT|, MNN's latency and mnnpy's max
difference to each (within rtol 1e-3 / atol 1e-4 of the output scale, or not, or the error when
mnnpy refuses the file) are printed per model.

The cache directory is ``--out``, else ``$MNNPY_BENCH_DIR``, else ``~/.cache/mnnpy/bench``; it is
never committed. Models whose three files exist are skipped unless ``--force``; the ``.npz`` is
written last, so an interrupted run is redone next time. Other tools call
``ensure_models(names, out)``.

SAFETY: conversion only goes through ``tools/_mnn_convert.py`` (``_tools.mnnconvert`` in a
subprocess); never ``import MNN.tools``.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import sys
import tempfile
import time
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np

DEFAULT_DIR = Path.home() / ".cache" / "mnnpy" / "bench"
ENV_DIR = "MNNPY_BENCH_DIR"


# ---------------------------------------------------------------------------
# ONNX graph building
# ---------------------------------------------------------------------------


class GraphBuilder:
    """Collects ONNX nodes and initializers; layer helpers draw weights from one seeded RNG."""

    def __init__(self, name: str, seed: int) -> None:
        self.name = name
        self.rng = np.random.default_rng(seed)
        self.nodes: list[Any] = []
        self.inits: list[Any] = []
        self.counter = 0

    def uniq(self, base: str) -> str:
        self.counter += 1
        return f"{base}_{self.counter}"

    def randn(self, shape: Sequence[int], scale: float) -> np.ndarray:
        return self.rng.standard_normal(tuple(shape), dtype=np.float32) * np.float32(scale)

    def const(self, base: str, arr: np.ndarray) -> str:
        from onnx import numpy_helper

        name = self.uniq(base)
        self.inits.append(numpy_helper.from_array(np.ascontiguousarray(arr), name))
        return name

    def ints(self, values: Sequence[int]) -> str:
        return self.const("shape", np.array(values, np.int64))

    def scalar(self, value: float) -> str:
        return self.const("c", np.array(value, np.float32))

    def node(self, op: str, inputs: Sequence[str], out: str | None = None, **attrs: Any) -> str:
        return self.node_n(op, inputs, [out or self.uniq(op.lower())], **attrs)[0]

    def node_n(self, op: str, inputs: Sequence[str], outs: Sequence[str], **attrs: Any) -> list:
        from onnx import helper

        self.nodes.append(
            helper.make_node(op, list(inputs), list(outs), name=self.uniq(op), **attrs)
        )
        return list(outs)

    def conv(
        self,
        x: str,
        cin: int,
        cout: int,
        k: int,
        stride: int = 1,
        pad: int = 0,
        group: int = 1,
        bias: bool = True,
        out: str | None = None,
        gain: float = 2.0,
    ) -> str:
        """Conv with He-like weights: gain 2 suits inputs after a ReLU, 1 inputs without one."""
        fan_in = cin // group * k * k
        ins = [x, self.const("W", self.randn((cout, cin // group, k, k), np.sqrt(gain / fan_in)))]
        if bias:
            ins.append(self.const("B", self.randn((cout,), 0.1)))
        attrs = dict(kernel_shape=[k, k], strides=[stride, stride], pads=[pad] * 4, group=group)
        return self.node("Conv", ins, out, **attrs)

    def bn(self, x: str, c: int, gamma: float = 1.0) -> str:
        scale = (gamma * self.rng.uniform(0.8, 1.2, c)).astype(np.float32)
        shift = self.randn((c,), 0.1)
        mean = self.randn((c,), 0.1)
        var = self.rng.uniform(0.5, 1.5, c).astype(np.float32)
        stats = (scale, shift, mean, var)
        ins = [x] + [self.const(n, a) for n, a in zip("sbmv", stats, strict=True)]
        return self.node("BatchNormalization", ins, epsilon=1e-5)

    def act(self, x: str, kind: str | None) -> str:
        if kind == "relu":
            return self.node("Relu", [x])
        if kind == "relu6":
            return self.node("Clip", [x, self.scalar(0.0), self.scalar(6.0)])
        assert kind is None, kind
        return x

    def conv_bn(
        self,
        x: str,
        cin: int,
        cout: int,
        k: int,
        stride: int = 1,
        pad: int = 0,
        group: int = 1,
        act: str | None = "relu",
        gamma: float = 1.0,
        gain: float = 2.0,
    ) -> str:
        """Conv (no bias) + BatchNormalization + activation, as torchvision models export."""
        h = self.conv(x, cin, cout, k, stride, pad, group, bias=False, gain=gain)
        return self.act(self.bn(h, cout, gamma), act)

    def gemm(self, x: str, cin: int, cout: int, out: str | None = None) -> str:
        """A torch ``Linear`` on 2-D input: Gemm with the weight stored [cout, cin], transB=1."""
        w = self.const("W", self.randn((cout, cin), np.sqrt(1.0 / cin)))
        b = self.const("B", self.randn((cout,), 0.1))
        return self.node("Gemm", [x, w, b], out, alpha=1.0, beta=1.0, transB=1)

    def linear(self, x: str, cin: int, cout: int, gain: float = 1.0) -> str:
        """A torch ``Linear`` on 3-D input: MatMul with the weight stored [cin, cout], then Add."""
        h = self.node("MatMul", [x, self.const("W", self.randn((cin, cout), np.sqrt(gain / cin)))])
        return self.node("Add", [h, self.const("B", self.randn((cout,), 0.1))])

    def model(self, inputs: dict[str, list], outputs: dict[str, list], opset: int) -> Any:
        from onnx import TensorProto, helper

        def vi(name: str, shape: list) -> Any:
            return helper.make_tensor_value_info(name, TensorProto.FLOAT, shape)

        graph = helper.make_graph(
            self.nodes,
            self.name,
            [vi(n, s) for n, s in inputs.items()],
            [vi(n, s) for n, s in outputs.items()],
            initializer=self.inits,
        )
        m = helper.make_model(
            graph,
            opset_imports=[helper.make_opsetid("", opset)],
            producer_name="mnnpy-make_bench_models",
        )
        m.ir_version = 8
        return m


Built = tuple[Any, dict[str, np.ndarray]]  # (onnx.ModelProto, {input name: array})


def _image_input(g: GraphBuilder, size: int) -> dict[str, np.ndarray]:
    return {"input": g.randn((1, 3, size, size), 1.0)}


# torchvision MobileNetV2: (expansion t, out channels c, repeats n, first stride s)
MBV2_SETTINGS = [
    (1, 16, 1, 1),
    (6, 24, 2, 2),
    (6, 32, 3, 2),
    (6, 64, 4, 2),
    (6, 96, 3, 1),
    (6, 160, 3, 2),
    (6, 320, 1, 1),
]


def build_mobilenet_v2() -> Built:
    g = GraphBuilder("mobilenet_v2", seed=101)
    x, cin = g.conv_bn("input", 3, 32, 3, stride=2, pad=1, act="relu6", gain=1.0), 32
    for t, c, n, s in MBV2_SETTINGS:
        for i in range(n):
            stride, hidden = (s if i == 0 else 1), cin * t
            h = x if t == 1 else g.conv_bn(x, cin, hidden, 1, act="relu6")
            h = g.conv_bn(h, hidden, hidden, 3, stride, 1, group=hidden, act="relu6")
            h = g.conv_bn(h, hidden, c, 1, act=None, gamma=0.5)
            x = g.node("Add", [x, h]) if stride == 1 and cin == c else h
            cin = c
    x = g.conv_bn(x, cin, 1280, 1, act="relu6")
    x = g.node("Flatten", [g.node("GlobalAveragePool", [x])], axis=1)
    g.gemm(x, 1280, 1000, out="output")
    return g.model({"input": [1, 3, 224, 224]}, {"output": [1, 1000]}, 13), _image_input(g, 224)


def build_resnet18() -> Built:
    g = GraphBuilder("resnet18", seed=102)
    x = g.conv_bn("input", 3, 64, 7, stride=2, pad=3, gain=1.0)
    x = g.node("MaxPool", [x], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])
    cin = 64
    for cout in (64, 128, 256, 512):
        for i in range(2):
            stride = 2 if i == 0 and cout != 64 else 1
            h = g.conv_bn(x, cin, cout, 3, stride, 1)
            h = g.conv_bn(h, cout, cout, 3, 1, 1, act=None, gamma=0.5)
            short = x if stride == 1 else g.conv_bn(x, cin, cout, 1, stride, act=None)
            x, cin = g.node("Relu", [g.node("Add", [h, short])]), cout
    x = g.node("Flatten", [g.node("GlobalAveragePool", [x])], axis=1)
    g.gemm(x, 512, 1000, out="output")
    return g.model({"input": [1, 3, 224, 224]}, {"output": [1, 1000]}, 13), _image_input(g, 224)


def build_squeezenet1_1() -> Built:
    g = GraphBuilder("squeezenet1_1", seed=103)

    def pool(x: str) -> str:
        return g.node("MaxPool", [x], kernel_shape=[3, 3], strides=[2, 2], ceil_mode=1)

    def fire(x: str, cin: int, squeeze: int, e1: int, e3: int) -> str:
        s = g.act(g.conv(x, cin, squeeze, 1), "relu")
        a = g.act(g.conv(s, squeeze, e1, 1), "relu")
        b = g.act(g.conv(s, squeeze, e3, 3, pad=1), "relu")
        return g.node("Concat", [a, b], axis=1)

    x = pool(g.act(g.conv("input", 3, 64, 3, stride=2, gain=1.0), "relu"))  # 111 -> 55
    x = pool(fire(fire(x, 64, 16, 64, 64), 128, 16, 64, 64))  # 27
    x = pool(fire(fire(x, 128, 32, 128, 128), 256, 32, 128, 128))  # 13
    x = fire(fire(x, 256, 48, 192, 192), 384, 48, 192, 192)
    x = fire(fire(x, 384, 64, 256, 256), 512, 64, 256, 256)
    x = g.act(g.conv(x, 512, 1000, 1), "relu")
    g.node("Flatten", [g.node("GlobalAveragePool", [x])], "output", axis=1)
    return g.model({"input": [1, 3, 224, 224]}, {"output": [1, 1000]}, 13), _image_input(g, 224)


def build_shufflenet_v2() -> Built:
    """ShuffleNetV2 x1.0 as torchvision exports it: Split (chunk), Concat, channel shuffle."""
    g = GraphBuilder("shufflenet_v2", seed=104)

    def shuffle(x: str, c: int, hw: int) -> str:
        x = g.node("Reshape", [x, g.ints([1, 2, c // 2, hw, hw])])
        x = g.node("Transpose", [x], perm=[0, 2, 1, 3, 4])
        return g.node("Reshape", [x, g.ints([1, c, hw, hw])])

    def block(x: str, cin: int, cout: int, stride: int, hw: int) -> str:
        half = cout // 2
        if stride == 1:
            outs = [g.uniq("split"), g.uniq("split")]
            left, x = g.node_n("Split", [x, g.ints([half, half])], outs, axis=1)
        else:
            left = g.conv_bn(x, cin, cin, 3, 2, 1, group=cin, act=None)
            left = g.conv_bn(left, cin, half, 1, gain=1.0)
        right = g.conv_bn(x, cin if stride == 2 else half, half, 1)
        right = g.conv_bn(right, half, half, 3, stride, 1, group=half, act=None)
        right = g.conv_bn(right, half, half, 1, gain=1.0)
        return shuffle(g.node("Concat", [left, right], axis=1), cout, hw)

    x = g.conv_bn("input", 3, 24, 3, stride=2, pad=1, gain=1.0)
    x = g.node("MaxPool", [x], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])
    cin, hw = 24, 56
    for repeats, cout in ((4, 116), (8, 232), (4, 464)):
        hw //= 2
        x = block(x, cin, cout, 2, hw)
        for _ in range(repeats - 1):
            x = block(x, cout, cout, 1, hw)
        cin = cout
    x = g.conv_bn(x, cin, 1024, 1)
    x = g.node("ReduceMean", [x], axes=[2, 3], keepdims=0)  # torch: x.mean([2, 3])
    g.gemm(x, 1024, 1000, out="output")
    return g.model({"input": [1, 3, 224, 224]}, {"output": [1, 1000]}, 13), _image_input(g, 224)


def build_unet_small() -> Built:
    """3-level U-Net; the three decoder upsamplings use ConvTranspose, Resize nearest (scales)
    and Resize bilinear align_corners (sizes); an auxiliary head from the bottleneck uses Resize
    bilinear pytorch_half_pixel (scales 8) and is added to the output."""
    g = GraphBuilder("unet_small", seed=105)

    def double_conv(x: str, cin: int, cout: int, gain: float = 2.0) -> str:
        x = g.act(g.conv(x, cin, cout, 3, pad=1, gain=gain), "relu")
        return g.act(g.conv(x, cout, cout, 3, pad=1), "relu")

    def pool(x: str) -> str:
        return g.node("MaxPool", [x], kernel_shape=[2, 2], strides=[2, 2])

    def cat(a: str, b: str) -> str:
        return g.node("Concat", [a, b], axis=1)

    def resize(x: str, mode: str, ctm: str, scale: int = 0, sizes: Sequence[int] = ()) -> str:
        extra = {"nearest_mode": "floor"} if mode == "nearest" else {}
        if sizes:
            ins = [x, "", "", g.ints(sizes)]
        else:
            ins = [x, "", g.const("scales", np.array([1, 1, scale, scale], np.float32))]
        return g.node("Resize", ins, mode=mode, coordinate_transformation_mode=ctm, **extra)

    e1 = double_conv("input", 3, 16, gain=1.0)  # 128
    e2 = double_conv(pool(e1), 16, 32)  # 64
    e3 = double_conv(pool(e2), 32, 64)  # 32
    mid = double_conv(pool(e3), 64, 128)  # 16
    w = g.randn((128, 64, 2, 2), np.sqrt(2.0 / 128))  # [cin, cout, k, k]; fan-in cin per pixel
    up = g.node(
        "ConvTranspose",
        [mid, g.const("W", w), g.const("B", g.randn((64,), 0.1))],
        kernel_shape=[2, 2],
        strides=[2, 2],
    )
    d3 = double_conv(cat(up, e3), 128, 64)  # 32
    up = g.conv(resize(d3, "nearest", "asymmetric", scale=2), 64, 32, 1)  # 64
    d2 = double_conv(cat(up, e2), 64, 32)
    up = g.act(
        g.conv(resize(d2, "linear", "align_corners", sizes=[1, 32, 128, 128]), 32, 16, 3, pad=1),
        "relu",
    )
    d1 = double_conv(cat(up, e1), 32, 16)
    aux = resize(g.conv(mid, 128, 4, 1), "linear", "pytorch_half_pixel", scale=8)
    g.node("Add", [g.conv(d1, 16, 4, 1), aux], "output")
    inputs = {"input": g.randn((1, 3, 128, 128), 1.0)}
    return g.model({"input": [1, 3, 128, 128]}, {"output": [1, 4, 128, 128]}, 13), inputs


def build_transformer() -> Built:
    """Post-LN transformer encoder: 4 layers, d_model 256, 4 heads, FFN 1024, seq 128, with
    LayerNormalization (opset 17) and GELU in PyTorch's erf form."""
    g = GraphBuilder("transformer", seed=106)
    seq, d, heads, ffn = 128, 256, 4, 1024
    dh = d // heads

    def layer_norm(x: str) -> str:
        gamma = (1.0 + 0.1 * g.rng.standard_normal(d)).astype(np.float32)
        beta = g.randn((d,), 0.1)
        return g.node(
            "LayerNormalization",
            [x, g.const("ln_g", gamma), g.const("ln_b", beta)],
            axis=-1,
            epsilon=1e-5,
        )

    def gelu(x: str) -> str:  # x * 0.5 * (1 + erf(x / sqrt(2))), as torch.onnx exports it
        e = g.node("Erf", [g.node("Div", [x, g.scalar(float(np.sqrt(2.0)))])])
        h = g.node("Mul", [x, g.node("Add", [e, g.scalar(1.0)])])
        return g.node("Mul", [h, g.scalar(0.5)])

    def heads_of(x: str, perm: list[int]) -> str:
        return g.node("Transpose", [g.node("Reshape", [x, g.ints([1, seq, heads, dh])])], perm=perm)

    x = "input"
    for _ in range(4):
        q = heads_of(g.linear(x, d, d), [0, 2, 1, 3])  # [1, h, seq, dh]
        k = heads_of(g.linear(x, d, d), [0, 2, 3, 1])  # [1, h, dh, seq]
        v = heads_of(g.linear(x, d, d), [0, 2, 1, 3])
        s = g.node("Div", [g.node("MatMul", [q, k]), g.scalar(float(np.sqrt(dh)))])
        ctx = g.node("MatMul", [g.node("Softmax", [s], axis=-1), v])
        ctx = g.node("Transpose", [ctx], perm=[0, 2, 1, 3])
        ctx = g.node("Reshape", [ctx, g.ints([1, seq, d])])
        x = layer_norm(g.node("Add", [x, g.linear(ctx, d, d)]))
        f = g.linear(gelu(g.linear(x, d, ffn)), ffn, d, gain=2.0)
        x = layer_norm(g.node("Add", [x, f]))
    g.node("Identity", [x], "output")
    inputs = {"input": g.randn((1, seq, d), 1.0)}
    return g.model({"input": [1, seq, d]}, {"output": [1, seq, d]}, 17), inputs


TINY_OPS = 200


def build_tiny_ops() -> Built:
    """A chain of TINY_OPS element-wise ops (Add, Neg, Mul, Abs; no Relu, which the converter
    fuses into the Add) on 16 floats: the kernels are next to free, so the run time is the
    engine's per-op overhead."""
    g = GraphBuilder("tiny_ops", seed=107)
    x = "input"
    for i in range(TINY_OPS - 1):
        kind = i % 4
        if kind == 0:
            x = g.node("Add", [x, g.const("c", g.randn((16,), 0.1))])
        elif kind == 1:
            x = g.node("Neg", [x])
        elif kind == 2:
            x = g.node("Mul", [x, g.const("c", 0.9 + g.randn((16,), 0.05))])
        else:
            x = g.node("Abs", [x])
    g.node("Neg", [x], "output")
    inputs = {"input": g.randn((1, 16), 1.0)}
    return g.model({"input": [1, 16]}, {"output": [1, 16]}, 17), inputs


def _torch(name: str) -> Callable[[], Built]:
    """A model written in PyTorch and exported by ``torch.onnx.export`` (tools/bench_torch_*)."""

    def build() -> Built:
        _convert_helpers()  # puts tools/ on the path
        import bench_torch_models

        return bench_torch_models.builder(name)()

    return build


MODELS: dict[str, Callable[[], Built]] = {
    "mobilenet_v2": build_mobilenet_v2,
    "resnet18": build_resnet18,
    "squeezenet1_1": build_squeezenet1_1,
    "shufflenet_v2": build_shufflenet_v2,
    "unet_small": build_unet_small,
    "transformer": build_transformer,
    "tiny_ops": build_tiny_ops,  # not a default model: ``bench --runtime`` uses it
    # the same six written in PyTorch and exported as users' files are (needs torch)
    "mobilenet_v2_pt": _torch("mobilenet_v2"),
    "resnet18_pt": _torch("resnet18"),
    "squeezenet1_1_pt": _torch("squeezenet1_1"),
    "shufflenet_v2_pt": _torch("shufflenet_v2"),
    "transformer_pt": _torch("transformer"),
    "tiny_ops_pt": _torch("tiny_ops"),  # not a default model either
    # families exported from PyTorch (needs torch)
    "efficientnet_b0": _torch("efficientnet_b0"),
    "convnext_atto": _torch("convnext_atto"),
    "llama_decoder": _torch("llama_decoder"),
    "audio_encoder": _torch("audio_encoder"),
}
TORCH_MODELS = frozenset(n for n in MODELS if n.endswith("_pt")) | {
    "efficientnet_b0",
    "convnext_atto",
    "llama_decoder",
    "audio_encoder",
}
DEFAULT = tuple(n for n in MODELS if not n.startswith("tiny_ops"))
# mnnpy is checked against MNN and ONNX Runtime when a model is made: |a - b| <= ATOL * scale +
# RTOL * |b|, scale = max |reference| (the project's float32 tolerance, relative to the output)
RTOL, ATOL = 1e-3, 1e-4


# ---------------------------------------------------------------------------
# Conversion, goldens, cache
# ---------------------------------------------------------------------------


def _convert_helpers() -> ModuleType:
    """``tools/_mnn_convert.py``, importable whether this file runs as a script or is imported."""
    tools = str(Path(__file__).resolve().parent)
    if tools not in sys.path:
        sys.path.insert(0, tools)
    import _mnn_convert

    return _mnn_convert


def bench_dir(out: str | os.PathLike | None = None) -> Path:
    """The cache directory: ``out``, else ``$MNNPY_BENCH_DIR``, else ``~/.cache/mnnpy/bench``."""
    return Path(out or os.environ.get(ENV_DIR) or DEFAULT_DIR).expanduser()


def _files(d: Path, name: str) -> tuple[Path, Path, Path]:
    return d / f"{name}.mnn", d / f"{name}.onnx", d / f"{name}.npz"


def make_model(name: str, out: Path) -> dict[str, Any]:
    """Build, convert and record one model into ``out``; returns what it measured."""
    import onnx

    conv = _convert_helpers()
    mnn_path, onnx_path, npz_path = _files(out, name)
    start = time.perf_counter()
    model, inputs = MODELS[name]()
    onnx.checker.check_model(model, full_check=True)
    # Files appear under their final names only once complete (atomic renames from a scratch
    # directory next to them), so a crash or a concurrent reader never sees half a file.
    with tempfile.TemporaryDirectory(dir=out, prefix=f".{name}.") as scratch:
        tmp = Path(scratch)
        onnx.save(model, str(tmp / onnx_path.name))
        os.replace(tmp / onnx_path.name, onnx_path)
        conv.convert_onnx(onnx_path, tmp / mnn_path.name)
        os.replace(tmp / mnn_path.name, mnn_path)
        outs, seconds = conv.run_mnn(mnn_path, inputs, runs=3)
        ref = conv.run_ort(onnx_path, inputs)
        diffs = conv.max_abs_diffs(name, outs, ref)
        checked = check_mnnpy(mnn_path, inputs, {"MNN": outs, "ORT": ref})
        arrays = {f"input:{k}": v for k, v in inputs.items()}
        arrays.update({f"output:{k}": v for k, v in outs.items()})
        arrays.update({f"ort:{k}": v for k, v in ref.items()})
        conv.save_npz(tmp / npz_path.name, arrays)
        os.replace(tmp / npz_path.name, npz_path)  # last: its presence marks the model complete
    return dict(
        diffs=diffs,
        scale={k: float(np.max(np.abs(v))) for k, v in ref.items()},
        mnn_ms=1e3 * min(seconds),
        mnnpy=checked,
        total_s=time.perf_counter() - start,
        size=mnn_path.stat().st_size,
    )


def check_mnnpy(
    mnn_path: Path, inputs: dict[str, np.ndarray], refs: dict[str, dict[str, np.ndarray]]
) -> dict[str, Any]:
    """Run the file with mnnpy (1 thread) and compare with each reference (MNN's, ORT's).

    Returns:
        ``{"error": why}`` when mnnpy refuses the file or fails, else per reference name its
        max |mnnpy - reference| over the outputs and whether every output is within tolerance.
    """
    root = str(Path(__file__).resolve().parents[1])
    if "mnnpy" not in sys.modules and root not in sys.path:
        sys.path.insert(0, root)  # a source checkout checks its own mnnpy
    try:
        import mnnpy

        interp = mnnpy.Interpreter(mnn_path)
        session = interp.create_session(mnnpy.ScheduleConfig(num_thread=1))
        for key, value in inputs.items():
            interp.get_session_input(session, key).copy_from(value)
        interp.run_session(session)
        got = {k: interp.get_session_output(session, k).numpy() for k in refs["ORT"]}
    except Exception as e:  # noqa: BLE001 - reported (an op mnnpy refuses), the files are fine
        return {"error": f"{type(e).__name__}: {e}"[:300]}
    result: dict[str, Any] = {}
    for peer, ref in refs.items():
        diff, ok = 0.0, True
        for k, want in ref.items():
            have = got[k]
            if have.shape != want.shape:
                return {"error": f"output {k}: mnnpy {got[k].shape} vs {peer} {want.shape}"}
            err = np.abs(have.astype(np.float64) - want)
            scale = float(np.max(np.abs(want))) if want.size else 0.0
            diff = max(diff, float(err.max(initial=0.0)))
            ok = ok and bool(np.all(err <= ATOL * scale + RTOL * np.abs(want)))
        result[peer] = {"max_abs_diff": diff, "ok": ok}
    return result


def _report(name: str, r: dict[str, Any]) -> None:
    diffs = ", ".join(f"{k}={v:.3g} (max|ORT| {r['scale'][k]:.3g})" for k, v in r["diffs"].items())
    print(
        f"{name:16s} {r['size'] / 1e6:7.2f} MB  MNN {r['mnn_ms']:7.1f} ms  "
        f"built in {r['total_s']:5.1f} s  max|MNN-ORT| {diffs}",
        flush=True,
    )
    got = r["mnnpy"]
    if "error" in got:
        print(f"{'':16s} mnnpy REFUSES this model: {got['error']}", flush=True)
        return
    cells = [
        f"max|mnnpy-{p}| {c['max_abs_diff']:.3g} ({'ok' if c['ok'] else 'OUT OF TOLERANCE'})"
        for p, c in got.items()
    ]
    print(f"{'':16s} {', '.join(cells)}", flush=True)


def ensure_models(
    names: Iterable[str] | None = None, out: str | os.PathLike | None = None, force: bool = False
) -> dict[str, Path]:
    """Make sure the named benchmark models exist in the cache; build the missing ones.

    Args:
        names: model names (keys of MODELS); the DEFAULT ones when None.
        out: cache directory (see :func:`bench_dir`).
        force: rebuild even when the files exist.

    Returns:
        name -> path of ``<name>.mnn``; ``<name>.onnx`` and ``<name>.npz`` sit next to it.
    """
    if names is None:
        names = list(DEFAULT)
        if importlib.util.find_spec("torch") is None:
            names = [n for n in names if n not in TORCH_MODELS]
            print(
                "note: torch is not installed, so the PyTorch-exported models are skipped "
                f"({', '.join(sorted(TORCH_MODELS & set(DEFAULT)))}); pip install -e '.[bench]'",
                file=sys.stderr,
            )
    names = list(names)
    unknown = [n for n in names if n not in MODELS]
    if unknown:
        raise KeyError(f"unknown benchmark model(s) {unknown}; known: {list(MODELS)}")
    d = bench_dir(out)
    d.mkdir(parents=True, exist_ok=True)
    paths = {}
    for name in names:
        files = _files(d, name)
        if force or not all(p.exists() for p in files):
            r = make_model(name, d)
            _report(name, r)
        paths[name] = files[0]
    return paths


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("names", nargs="*", metavar="name", help=f"default: {list(DEFAULT)}")
    ap.add_argument("--out", help=f"cache directory (default ${ENV_DIR} or {DEFAULT_DIR})")
    ap.add_argument("--force", action="store_true", help="rebuild models that already exist")
    args = ap.parse_args(argv)
    unknown = [n for n in args.names if n not in MODELS]
    if unknown:
        ap.error(f"unknown model(s) {unknown}; known: {list(MODELS)}")
    paths = ensure_models(args.names or None, args.out, force=args.force)
    print(f"{len(paths)} model(s) in {bench_dir(args.out)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
