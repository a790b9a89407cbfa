#!/usr/bin/env python
"""Build the small int8 test models in tests/data/int8 and MNN's golden outputs.

Usage (from the repository root; needs the ``convert`` extra: ``mnn`` 3.6.1, ``onnx``)::

    python tools/make_int8_models.py [--out tests/data/int8]

For every model in MODELS:

1. a float32 ONNX graph is built with ``GraphBuilder`` (``tools/make_test_models.py``) and
   converted to ``.mnn`` with MNN's converter (``tools/_mnn_convert.py``);
2. MNN's post-training quantizer runs on it in a subprocess:
   ``_tools.mnnquant(["quantized.out", float.mnn, int8.mnn, config.json])`` with a calibration
   set of 10 random RGB PNG images (seeded, written here with zlib) and the config
   ``format RGB, mean 127.5, normal 1/127.5, KL features, MAX_ABS weights``;
3. the int8 file is run with MNN's Session API (CPU, 1 thread, the input fed again before
   each of two runs, which must agree) and ``<name>.npz`` gets ``input:<tensor>`` and
   ``output:<tensor>`` arrays.

The float files and the images live in a temporary directory. The quantizer's output is
deterministic for a given input, so re-running rewrites identical files (the converter's uuid
is replaced by a content hash in the float file; the quantizer copies it).

SAFETY: never ``import MNN.tools`` and never run the ``mnnconvert`` / ``mnnquant`` console
scripts; the quantizer is only called through ``_tools.mnnquant`` in a subprocess.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile

import numpy as np

TOOLS = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(TOOLS)
sys.path.insert(0, TOOLS)

import _mnn_convert as mc  # noqa: E402
from make_test_models import GraphBuilder  # noqa: E402


def build_cnn_int8():
    """conv 3x3 + relu, depthwise + relu, 1x1, residual add + relu, max pool, strided conv,
    average pool, global pool, FC."""
    g = GraphBuilder("cnn_int8", seed=7)
    h = g.node("Relu", [g.conv("x", 3, 8, 3, pad=1)])
    a = g.node("Relu", [g.conv(h, 8, 8, 3, pad=1, group=8)])
    a = g.conv(a, 8, 8, 1)
    h = g.node("Relu", [g.node("Add", [a, h])])
    h = g.node("MaxPool", [h], kernel_shape=[2, 2], strides=[2, 2])
    h = g.node("Relu", [g.conv(h, 8, 16, 3, stride=2, pad=1)])
    h = g.node("AveragePool", [h], kernel_shape=[2, 2], strides=[2, 2])
    h = g.node("Flatten", [g.node("GlobalAveragePool", [h])], axis=1)
    g.gemm(h, 16, 10, out="y")
    return g.model([("x", [1, 3, 32, 32])], [("y", [1, 10])]), (1, 3, 32, 32)


def build_int8_edges():
    """Edges: 17 channels (NC4HW4 padding), 5x5 stride 2, ReLU6, a max pool over negative and
    positive values (no ReLU before it) with padding, an average pool whose windows overlap
    the padding, depthwise stride 2, Sub and Mul of two branches, batch 2."""
    g = GraphBuilder("int8_edges", seed=11)
    h = g.clip6(g.conv("x", 3, 17, 5, stride=2, pad=2))  # 2x17x12x12
    a = g.conv(h, 17, 17, 3, stride=2, pad=1, group=17)  # depthwise s2, no relu: 2x17x6x6
    a = g.node("MaxPool", [a], kernel_shape=[3, 3], strides=[1, 1], pads=[1, 1, 1, 1])
    b = g.node("AveragePool", [h], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1],
               count_include_pad=0)  # fmt: skip
    b = g.conv(b, 17, 17, 1)
    s = g.node("Sub", [a, b])
    m = g.node("Mul", [s, g.conv(b, 17, 17, 3, pad=1)])
    h = g.node("Relu", [g.conv(m, 17, 9, 3, pad=1)])
    h = g.node("Flatten", [g.node("GlobalAveragePool", [h])], axis=1)
    g.gemm(h, 9, 5, out="y")
    return g.model([("x", [2, 3, 24, 24])], [("y", [2, 5])]), (2, 3, 24, 24)


def build_int8_group_concat():
    """A grouped conv (the converter splits it: Slice, 4 convs, Concat), a Concat of two
    branches, global pool, FC."""
    g = GraphBuilder("int8_group_concat", seed=5)
    h = g.node("Relu", [g.conv("x", 3, 16, 3, pad=1)])
    h = g.node("Relu", [g.conv(h, 16, 32, 3, pad=1, group=4)])
    h = g.node("MaxPool", [h], kernel_shape=[2, 2], strides=[2, 2])
    h = g.node("Concat", [h, g.node("Relu", [g.conv(h, 32, 8, 1)])], axis=1)
    h = g.node("Flatten", [g.node("GlobalAveragePool", [h])], axis=1)
    g.gemm(h, 40, 6, out="y")
    return g.model([("x", [1, 3, 32, 32])], [("y", [1, 6])]), (1, 3, 32, 32)


MODELS = {
    "cnn_int8": build_cnn_int8,
    "int8_edges": build_int8_edges,
    "int8_group_concat": build_int8_group_concat,
}


def make(name: str, out: str, tmp: str) -> None:
    model, shape = MODELS[name]()
    onnx_path, float_path = os.path.join(tmp, name + ".onnx"), os.path.join(tmp, name + ".mnn")
    with open(onnx_path, "wb") as f:
        f.write(model.SerializeToString())
    mc.convert_onnx(onnx_path, float_path)
    images = os.path.join(tmp, name + "_calib")
    os.makedirs(images)
    rng = np.random.RandomState(0)
    for i in range(10):
        mc.write_png(
            os.path.join(images, f"{i}.png"), rng.randint(0, 256, (*shape[2:], 3), np.uint8)
        )
    config = dict(
        format="RGB", mean=[127.5] * 3, normal=[1 / 127.5] * 3, width=shape[3], height=shape[2],
        path=images + "/", used_sample_num=10, feature_quantize_method="KL",
        weight_quantize_method="MAX_ABS",
    )  # fmt: skip
    config_path = os.path.join(tmp, name + ".json")
    with open(config_path, "w") as f:
        json.dump(config, f)
    dst = os.path.join(out, name + ".mnn")
    mc.mnnquant(float_path, dst, config_path)
    if os.path.exists(dst + ".json"):  # the quantizer's own log of scales
        os.remove(dst + ".json")
    x = np.random.RandomState(1).randn(*shape).astype(np.float32)
    outs, _ = mc.run_mnn(dst, {"x": x}, runs=2, threads=1)
    arrays = {"input:x": x, **{"output:" + k: v for k, v in outs.items()}}
    mc.save_npz(os.path.join(out, name + ".npz"), arrays)
    print(f"{name}: {os.path.getsize(dst)} bytes, outputs {[v.shape for v in outs.values()]}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[1])
    ap.add_argument("--out", default=os.path.join(ROOT, "tests", "data", "int8"))
    ap.add_argument("names", nargs="*", default=list(MODELS))
    args = ap.parse_args(argv)
    os.makedirs(args.out, exist_ok=True)
    tmp = tempfile.mkdtemp(prefix="mnnpy_int8_")
    try:
        for name in args.names:
            make(name, args.out, tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
