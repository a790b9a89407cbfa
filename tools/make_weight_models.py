#!/usr/bin/env python
"""Build tests/data/weights: weight formats the variant models (tests/data/variants) lack.

Usage (from the repository root; needs the ``convert`` extra: ``mnn`` 3.6.1, ``onnx``)::

    python tools/make_weight_models.py [--out tests/data/weights]

``tools/make_variant_models.py`` covers the converter's common flags (fp16, 2-8 bit, asymmetric,
block-wise, external). This adds the formats only other flags write, on two tiny networks
(1x1 convolution, depthwise 3x3, 1x1 convolution; 1x1 and depthwise convolutions so that MNN's
Winograd transforms, whose float error grows with sparse quantized weights, stay out of the
comparison):

* ``sparse.*``: 90% zero weights with ``--detectSparseSpeedUp``: IDST ``type`` 2 (run-length
  sparse codes) with 8 / 4 bit, asymmetric and symmetric (the 3.6.1 converter writes
  (min, scale) pairs by default and one scale per run with ``--weightQuantAsymmetric``);
  float weights stored as ``index`` + values (no quantization); both also with
  ``--saveExternalData`` (the index then lives in the weight file).
* ``scale.external``: a standalone BatchNormalization (a Scale op) with ``--saveExternalData``
  (``external = [offset, scale bytes, bias bytes]``).
* ``dense.*``: ``--hqq`` (asymmetric HQQ codes, per channel and ``--weightQuantBlock 32``) and
  ``--weightQuantScaleBit 16`` (scales stored as fp16 in ``alphaFp16``).

Each ``<net>.<variant>.mnn`` gets ``<net>.<variant>.npz`` with MNN's Session output (CPU, 1
thread) on a seeded input (keys ``input:x`` / ``output:y``). Files are byte-identical on re-runs
(seeded weights, content-derived uuid, fixed zip timestamps).

SAFETY: conversion only through ``tools/_mnn_convert.py`` (``_tools.mnnconvert`` in a
subprocess); never ``import MNN.tools``.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tools"))

from _mnn_convert import fix_uuid, mnnconvert, run_mnn, save_npz  # noqa: E402

SHAPE = (1, 16, 5, 5)
SEEDS = {"sparse": 100, "dense": 101, "scale": 102}
VARIANTS = {
    "sparse": {
        "float": ["--detectSparseSpeedUp"],
        "float_external": ["--detectSparseSpeedUp", "--saveExternalData"],
        "wq8": ["--weightQuantBits", "8", "--detectSparseSpeedUp"],
        "wq4_asym": ["--weightQuantBits", "4", "--weightQuantAsymmetric", "--detectSparseSpeedUp"],
        "wq8_external": ["--weightQuantBits", "8", "--detectSparseSpeedUp", "--saveExternalData"],
    },
    "scale": {"external": ["--saveExternalData"]},
    "dense": {
        "hqq4": ["--weightQuantBits", "4", "--hqq"],
        "hqq4_b32": ["--weightQuantBits", "4", "--hqq", "--weightQuantBlock", "32"],
        "wq8_scale16": ["--weightQuantBits", "8", "--weightQuantScaleBit", "16"],
    },
}


def build_onnx(path: str, net: str, seed: int) -> None:
    from onnx import TensorProto, helper, numpy_helper, save

    rng = np.random.RandomState(seed)
    inits, nodes = [], []
    sparse = net == "sparse"
    if net == "scale":
        c = SHAPE[1]
        for name, v in (("s", 1 + 0.1 * rng.randn(c)), ("b", 0.1 * rng.randn(c)),
                        ("m", 0.1 * rng.randn(c)), ("v", 1 + 0.1 * rng.rand(c))):  # fmt: skip
            inits.append(numpy_helper.from_array(v.astype(np.float32), name))
        nodes.append(helper.make_node("BatchNormalization", ["x", "s", "b", "m", "v"], ["y"]))
        graph = helper.make_graph(
            nodes, "w", [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(SHAPE))],
            [helper.make_tensor_value_info("y", TensorProto.FLOAT, list(SHAPE))], inits,
        )  # fmt: skip
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
        model.ir_version = 8
        save(model, path)
        return

    def conv(x: str, cin: int, cout: int, k: int, group: int, out: str) -> str:
        w = rng.randn(cout, cin // group, k, k).astype(np.float32) * np.sqrt(2 / (cin // group))
        if sparse:
            w *= rng.rand(*w.shape) < 0.1
        b = (rng.randn(cout) * 0.1).astype(np.float32)
        inits.extend(
            [numpy_helper.from_array(w, out + "_w"), numpy_helper.from_array(b, out + "_b")]
        )
        pads = [k // 2] * 4
        nodes.append(helper.make_node("Conv", [x, out + "_w", out + "_b"], [out], name=out,
                                      kernel_shape=[k, k], pads=pads, group=group))  # fmt: skip
        return out

    y = conv("x", 16, 64, 1, 1, "c1")
    nodes.append(helper.make_node("Relu", [y], ["r1"], name="r1"))
    y = conv("r1", 64, 64, 3, 64, "dw")
    y = conv(y, 64, 32, 1, 1, "y")
    graph = helper.make_graph(
        nodes, "w", [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(SHAPE))],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 32, 5, 5])], inits,
    )  # fmt: skip
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    save(model, path)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[1])
    ap.add_argument("--out", default=os.path.join(ROOT, "tests", "data", "weights"))
    args = ap.parse_args(argv)
    os.makedirs(args.out, exist_ok=True)
    x = np.random.RandomState(7).randn(*SHAPE).astype(np.float32)
    with tempfile.TemporaryDirectory() as tmp:
        for net, variants in VARIANTS.items():
            src = os.path.join(tmp, net + ".onnx")
            build_onnx(src, net, SEEDS[net])
            for variant, flags in variants.items():
                dst = os.path.join(args.out, f"{net}.{variant}.mnn")
                args_ = ["-f", "ONNX", "--modelFile", src, "--MNNModel", dst, "--bizCode", "mnnpy"]
                mnnconvert([*args_, *flags], expect=dst)
                fix_uuid(dst)
                outs, _ = run_mnn(dst, {"x": x}, runs=2)
                save_npz(dst[:-4] + ".npz", {"input:x": x, "output:y": outs["y"]})
                print(f"{net}.{variant}: {os.path.getsize(dst)} bytes")
    return 0


if __name__ == "__main__":
    sys.exit(main())
