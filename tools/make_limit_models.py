#!/usr/bin/env python
"""Build the LIMIT / Memory_Low test models: a small CNN, converted by MNN's converter with each
weight storage, and MNN's outputs on each file.

    python tools/make_limit_models.py [--out tests/data/limit]

The CNN (ONNX, built with ``onnx.helper``, fixed seed) has the layer kinds LIMIT keeps
compressed: a dense 3x3 convolution, a depthwise and a grouped one, a 1x1 one, and a fully
connected layer (``Gemm``, which MNN's converter turns into a 1x1 Convolution), with channel
counts that are multiples of 16, so the STATIC memory of the compressed panels can be compared
with the bytes the file stores without padding in the way. Files: ``cnn16.<variant>.mnn`` for
fp32, fp16, wq8, wq4, wq4_asym_b32 and wq8_b32, and ``cnn16.<variant>.npz`` with ``input:x``
and ``output:y`` from MNN's Session (CPU, 1 thread) on the same file.

SAFETY: conversion only goes through ``tools/_mnn_convert.py``.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _mnn_convert import fix_uuid, mnnconvert, run_mnn, save_npz  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
VARIANTS = {
    "fp32": [],
    "fp16": ["--fp16"],
    "wq8": ["--weightQuantBits", "8"],
    "wq4": ["--weightQuantBits", "4"],
    "wq4_asym_b32": [
        "--weightQuantBits",
        "4",
        "--weightQuantAsymmetric",
        "--weightQuantBlock",
        "32",
    ],
    "wq8_b32": ["--weightQuantBits", "8", "--weightQuantBlock", "32"],
}


def build_onnx(path: str) -> None:
    """x [1, 16, 10, 10] -> conv3x3 32 -> relu -> depthwise 3x3 -> grouped (2) 3x3 64 -> relu
    -> conv1x1 64 -> global average pool -> flatten -> Gemm 32 -> y. (MNN's converter splits
    the grouped convolution into one convolution per group.)"""
    import onnx
    from onnx import TensorProto, helper

    rng = np.random.default_rng(16)
    inits, nodes = [], []

    def weight(name: str, shape: tuple[int, ...]) -> str:
        fan_in = int(np.prod(shape[1:]))
        w = (rng.standard_normal(shape) * np.sqrt(2.0 / fan_in)).astype(np.float32)
        inits.append(helper.make_tensor(name, TensorProto.FLOAT, shape, w.ravel()))
        return name

    def conv(x: str, y: str, oc: int, ic: int, k: int, group: int = 1) -> None:
        w = weight(f"{y}_w", (oc, ic // group, k, k))
        b = weight(f"{y}_b", (oc,))
        nodes.append(
            helper.make_node(
                "Conv", [x, w, b], [y], kernel_shape=[k, k], pads=[k // 2] * 4, group=group
            )
        )

    conv("x", "c1", 32, 16, 3)
    nodes.append(helper.make_node("Relu", ["c1"], ["r1"]))
    conv("r1", "dw", 32, 32, 3, group=32)
    conv("dw", "g2", 64, 32, 3, group=2)
    nodes.append(helper.make_node("Relu", ["g2"], ["r2"]))
    conv("r2", "c3", 64, 64, 1)
    nodes.append(helper.make_node("GlobalAveragePool", ["c3"], ["gap"]))
    nodes.append(helper.make_node("Flatten", ["gap"], ["flat"], axis=1))
    fc_w, fc_b = weight("fc_w", (32, 64)), weight("fc_b", (32,))
    nodes.append(helper.make_node("Gemm", ["flat", fc_w, fc_b], ["y"], transB=1))
    graph = helper.make_graph(
        nodes, "cnn16",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 16, 10, 10])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 32])], inits,
    )  # fmt: skip
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    onnx.checker.check_model(model)
    onnx.save(model, path)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=str(ROOT / "tests" / "data" / "limit"))
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    x = np.random.default_rng(1).standard_normal((1, 16, 10, 10)).astype(np.float32)
    with tempfile.TemporaryDirectory() as tmp:
        src = os.path.join(tmp, "cnn16.onnx")
        build_onnx(src)
        for variant, flags in VARIANTS.items():
            dst = os.path.join(args.out, f"cnn16.{variant}.mnn")
            mnnconvert(
                ["-f", "ONNX", "--modelFile", src, "--MNNModel", dst, "--bizCode", "mnnpy", *flags],
                expect=dst,
            )
            fix_uuid(dst)
            outputs, _ = run_mnn(dst, {"x": x})
            arrays = {"input:x": x, **{f"output:{k}": v for k, v in outputs.items()}}
            save_npz(os.path.join(args.out, f"cnn16.{variant}.npz"), arrays)
            print(f"{dst}: {os.path.getsize(dst)} bytes, outputs {sorted(outputs)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
