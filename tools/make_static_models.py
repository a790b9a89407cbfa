#!/usr/bin/env python
"""Build the static-model tests: small ONNX graphs converted with ``--saveStaticModel``.

Usage (from the repository root; needs the ``convert`` extra: ``mnn`` 3.6.1, ``onnx``,
``onnxruntime``)::

    python tools/make_static_models.py [--out tests/data/static] [--only NAME ...]

For every graph in ``MODELS``: build it with ``make_test_models.GraphBuilder`` (fixed seed), write
an input config (``input_size``, ``input_names``, ``input_dims``), convert with MNN's converter
(``tools/_mnn_convert.py``: ``-f ONNX ... --saveStaticModel --inputConfigFile F``, uuid made
reproducible; the describes and constants of a static file come in the order of the
converter's tensor addresses, so reruns may differ byte-wise), run the converted file with
MNN's Session API (CPU, 1 thread, twice) and write ``<name>.npz`` (``input:<name>`` /
``output:<name>``) and ``README.md``. The converter runs MNN's geometry on the declared input
shapes, so the files hold ``Raster`` ops (Transpose, Concat, Slice, Reshape, Pad,
layout conversions) and ``While`` ops with a ``LoopParam`` (Gather, GatherND, batched and
broadcast MatMul, ScatterND, CumSum, ...). The op types each file holds are printed, and
max|MNN - onnxruntime| as a sanity check of the graph.

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
Built = tuple  # (onnx model, {input name: array})


def _i64(values) -> np.ndarray:
    return np.asarray(values, np.int64)


def build_movement() -> Built:
    """Transpose, Concat, Slice, Reshape, Pad, Squeeze / Unsqueeze, Tile, Expand, Flatten."""
    g = GraphBuilder("movement", seed=11)
    t = g.node("Transpose", ["x"], perm=[0, 2, 3, 1])  # 2x5x6x3
    r = g.node("Relu", [t])
    c = g.node("Concat", [r, t], axis=3)  # 2x5x6x6
    s = g.node(
        "Slice",
        [c, g.const("st", _i64([1, 0])), g.const("en", _i64([5, 5])), g.const("ax", _i64([1, 3]))],
    )  # 2x4x6x5
    s2 = g.node(
        "Slice",
        [
            s,
            g.const("st", _i64([5])),
            g.const("en", _i64([-100])),
            g.const("ax", _i64([2])),
            g.const("sp", _i64([-2])),
        ],
    )  # 2x4x3x5 (reversed, stride 2)
    p = g.node("Pad", [s2, g.const("pads", _i64([0, 1, 0, 2, 0, 0, 1, 0]))], mode="constant")
    rs = g.node("Reshape", [p, g.const("shape", _i64([2, -1, 7]))])  # 2x5x4x7 -> 2x20x7
    tl = g.node("Tile", [rs, g.const("rep", _i64([1, 1, 2]))])  # 2x20x14
    u = g.node("Unsqueeze", [tl, g.const("axes", _i64([1]))])  # 2x1x20x14
    e = g.node("Expand", [u, g.const("es", _i64([2, 3, 20, 14]))])
    g.node("Flatten", [e], out="y", axis=2)  # 6x280
    x = g.rng.randn(2, 3, 5, 6).astype(np.float32)
    return g.model([("x", [2, 3, 5, 6])], [("y", [6, 280])]), {"x": x}


def build_cnn() -> Built:
    """NC4HW4 tensors around rasters: Conv, Concat of channels 3 + 5, channel Slice, Flatten."""
    g = GraphBuilder("cnn", seed=12)
    a = g.node("Relu", [g.conv("x", 3, 3, 3, pad=1)])  # 1x3x9x9
    b = g.node("Relu", [g.conv("x", 3, 5, 1)])  # 1x5x9x9
    c = g.node("Concat", [a, b], axis=1)  # 1x8x9x9
    s = g.node(
        "Slice",
        [c, g.const("st", _i64([1])), g.const("en", _i64([7])), g.const("ax", _i64([1]))],
    )  # 1x6x9x9
    h = g.node("MaxPool", [s], kernel_shape=[2, 2], strides=[2, 2])  # 1x6x4x4
    h = g.conv(h, 6, 7, 3, pad=1)
    t = g.node("Transpose", [h], perm=[0, 2, 1, 3])  # 1x4x7x4
    f = g.node("Flatten", [t], axis=1)  # 1x112
    g.gemm(f, 112, 10, out="y")
    x = g.rng.randn(1, 3, 9, 9).astype(np.float32)
    return g.model([("x", [1, 3, 9, 9])], [("y", [1, 10])]), {"x": x}


def build_gather() -> Built:
    """Gather on axes 0 and 2 (one with a negative index), GatherElements, GatherND."""
    g = GraphBuilder("gather", seed=13)
    g0 = g.node("Gather", ["x", g.const("i", _i64([[3, 0], [1, 1], [2, 3]]))], axis=0)
    g2 = g.node("Gather", ["x", g.const("i", _i64([4, -1, 0]))], axis=2)  # 4x3x3x2
    ge = g.node("GatherElements", ["x", g.const("i", g.rng.randint(0, 5, (4, 3, 2, 2)))], axis=2)
    gn = g.node("GatherND", ["x", g.const("i", _i64([[0, 1], [3, 2], [2, 0]]))])  # 3x5x2
    g.node("Identity", [g0], out="y0")
    g.node("Identity", [g2], out="y1")
    g.node("Identity", [ge], out="y2")
    g.node("Identity", [gn], out="y3")
    x = g.rng.randn(4, 3, 5, 2).astype(np.float32)
    outs = [("y0", [3, 2, 3, 5, 2]), ("y1", [4, 3, 3, 2]), ("y2", [4, 3, 2, 2]), ("y3", [3, 5, 2])]
    return g.model([("x", [4, 3, 5, 2])], outs), {"x": x}


def build_embedding() -> Built:
    """A transformer-like block: embedding Gather, batched MatMuls with broadcasting, Softmax."""
    g = GraphBuilder("embedding", seed=14)
    table = g.rng.randn(11, 8).astype(np.float32)
    ids = g.const("ids", _i64([[1, 5, 0, 10, 3], [2, 2, 9, 7, 4]]))
    e = g.node("Gather", [g.const("table", table), ids], axis=0)  # 2x5x8
    h = g.node("Add", [e, "x"])
    w = g.const("wq", (g.rng.randn(8, 8) * 0.3).astype(np.float32))
    q = g.node("MatMul", [h, w])  # 2x5x8
    q4 = g.node("Reshape", [q, g.const("s", _i64([2, 5, 2, 4]))])
    q4 = g.node("Transpose", [q4], perm=[0, 2, 1, 3])  # 2x2x5x4
    k4 = g.node("Transpose", [q4], perm=[0, 1, 3, 2])  # 2x2x4x5
    a = g.node("MatMul", [q4, k4])  # 2x2x5x5
    a = g.node("Softmax", [a], axis=-1)
    o = g.node("MatMul", [a, q4])  # 2x2x5x4
    bias = g.const("b", g.rng.randn(4, 3).astype(np.float32))
    g.node("MatMul", [o, bias], out="y")  # 2x2x5x3 (weight broadcast over the batch)
    x = g.rng.randn(2, 5, 8).astype(np.float32)
    return g.model([("x", [2, 5, 8])], [("y", [2, 2, 5, 3])]), {"x": x}


def build_batch_matmul() -> Built:
    """MatMul of two inputs with batch broadcasting (2x1x3x4 @ 3x4x5) and transposes."""
    g = GraphBuilder("batch_matmul", seed=15)
    m = g.node("MatMul", ["a", "b"])  # 2x3x3x5
    bt = g.node("Transpose", ["b"], perm=[0, 2, 1])  # 3x5x4
    m2 = g.node("MatMul", [bt, g.node("Transpose", ["a"], perm=[0, 1, 3, 2])])  # 2x3x5x3
    g.node("Add", [m, g.node("Transpose", [m2], perm=[0, 1, 3, 2])], out="y")
    a = g.rng.randn(2, 1, 3, 4).astype(np.float32)
    b = g.rng.randn(3, 4, 5).astype(np.float32)
    return g.model([("a", [2, 1, 3, 4]), ("b", [3, 4, 5])], [("y", [2, 3, 3, 5])]), {"a": a, "b": b}


def build_scatter() -> Built:
    """ScatterND, ScatterElements, CumSum, OneHot."""
    g = GraphBuilder("scatter", seed=16)
    upd = g.node("Mul", ["x", g.const("two", np.array(2.0, np.float32))])  # 4x3
    idx = g.const("i", _i64([[2], [0]]))
    s = g.node(
        "ScatterND",
        [
            "x",
            idx,
            g.node(
                "Slice",
                [upd, g.const("st", _i64([0])), g.const("en", _i64([2])), g.const("ax", _i64([0]))],
            ),
        ],
    )
    sa = g.node(
        "ScatterElements",
        [
            "x",
            g.const("i", _i64([[1, 0, 3], [2, 3, 0]])),
            g.node(
                "Slice",
                [upd, g.const("st", _i64([1])), g.const("en", _i64([3])), g.const("ax", _i64([0]))],
            ),
        ],
        axis=0,
    )
    g.node("Identity", [s], out="y0")
    g.node("Identity", [sa], out="y1")
    g.node("CumSum", ["x", g.const("axis", np.array(0, np.int64))], out="y2")
    oh = g.node(
        "OneHot",
        [
            g.const("ids", _i64([1, 0, 3, 2])),
            g.const("depth", _i64([5])),
            g.const("v", np.array([0.0, 1.0], np.float32)),
        ],
        axis=-1,
    )  # 4x5
    g.node("MatMul", [g.node("Transpose", ["x"], perm=[1, 0]), oh], out="y3")  # 3x5
    x = g.rng.randn(4, 3).astype(np.float32)
    outs = [("y0", [4, 3]), ("y1", [4, 3]), ("y2", [4, 3]), ("y3", [3, 5])]
    return g.model([("x", [4, 3])], outs), {"x": x}


def build_broadcast() -> Built:
    """Element-wise ops whose broadcasting geometry lowers to loops, Reduce and Softmax axes."""
    g = GraphBuilder("broadcast", seed=17)
    b = g.node("Add", ["x", g.const("c", g.rng.randn(1, 3, 1, 4).astype(np.float32))])
    s = g.node("Sub", [b, g.node("ReduceMean", [b], axes=[2], keepdims=1)])
    mx = g.node("Max", [s, g.node("ReduceMax", [s], axes=[1], keepdims=1)])
    sm = g.node("Softmax", [mx], axis=1)
    g.node(
        "Mul",
        [sm, g.node("Sigmoid", [g.node("ReduceSum", [mx, g.const("ax", _i64([3]))], keepdims=1)])],
        out="y",
    )
    x = g.rng.randn(2, 3, 5, 4).astype(np.float32)
    return g.model([("x", [2, 3, 5, 4])], [("y", [2, 3, 5, 4])]), {"x": x}


def build_spatial() -> Built:
    """Around a convolution (NC4HW4): DepthToSpace, SpaceToDepth, reflect Pad, nearest Resize
    (its output shape only in the file), ReduceMean over channels."""
    g = GraphBuilder("spatial", seed=22)
    c = g.node("Relu", [g.conv("x", 3, 8, 3, pad=1)])  # 1x8x6x6
    g.node("DepthToSpace", [c], out="y0", blocksize=2, mode="CRD")  # 1x2x12x12
    g.node("SpaceToDepth", [c], out="y1", blocksize=2)  # 1x32x3x3
    g.node("Pad", [c, g.const("pads", _i64([0, 0, 1, 2, 0, 0, 2, 1]))], out="y2", mode="reflect")
    scales = g.const("sc", np.array([1, 1, 2, 2], np.float32))
    g.node("Resize", [c, "", scales], out="y3", mode="nearest")
    g.node("ReduceMean", [c], out="y4", axes=[1], keepdims=1)
    x = g.rng.randn(1, 3, 6, 6).astype(np.float32)
    outs = [
        ("y0", [1, 2, 12, 12]),
        ("y1", [1, 32, 3, 3]),
        ("y2", [1, 8, 9, 9]),
        ("y3", [1, 8, 12, 12]),
        ("y4", [1, 1, 6, 6]),
    ]
    return g.model([("x", [1, 3, 6, 6])], outs), {"x": x}


def build_misc() -> Built:
    """TopK, ArgMax (int output cast back), Where, Softmax of a transpose, InstanceNorm."""
    from onnx import helper

    g = GraphBuilder("misc", seed=23)
    g.nodes.append(helper.make_node("TopK", ["x", g.const("k", _i64([2]))], ["y0", "ti"], axis=-1))
    g.node("Cast", [g.node("ArgMax", ["x"], axis=1, keepdims=0)], out="y1", to=1)
    pos = g.node("Greater", ["x", g.const("z", np.array(0.0, np.float32))])
    g.node("Where", [pos, "x", g.node("Neg", ["x"])], out="y2")
    g.node("Softmax", [g.node("Transpose", ["x"], perm=[0, 2, 1])], out="y3", axis=1)
    x4 = g.node("Unsqueeze", ["x", g.const("a", _i64([3]))])
    gamma, beta = g.const("s", np.ones(3, np.float32)), g.const("b", np.zeros(3, np.float32))
    g.node("InstanceNormalization", [x4, gamma, beta], out="y4")
    x = g.rng.randn(3, 3, 4).astype(np.float32)
    outs = [
        ("y0", [3, 3, 2]),
        ("y1", [3, 4]),
        ("y2", [3, 3, 4]),
        ("y3", [3, 4, 3]),
        ("y4", [3, 3, 4, 1]),
    ]
    return g.model([("x", [3, 3, 4])], outs), {"x": x}


def build_shuffle() -> Built:
    """Channel shuffles between convolutions (NC4HW4 rasters read and written in place), with
    groups of 4 and of 3 channels (blocks not aligned to the groups), and a channel Split."""
    g = GraphBuilder("shuffle", seed=24)
    h = g.node("Relu", [g.conv("x", 3, 8, 3, pad=1)])  # 1x8x5x5
    for groups, c in ((2, 8), (3, 6)):
        if c != 8:
            h = g.node("Relu", [g.conv(h, 8, c, 1)])
        r = g.node("Reshape", [h, g.const("s", _i64([1, groups, c // groups, 5, 5]))])
        t = g.node("Transpose", [r], perm=[0, 2, 1, 3, 4])
        h = g.node("Reshape", [t, g.const("s", _i64([1, c, 5, 5]))])
        h = g.node("Relu", [g.conv(h, c, 8, 3, pad=1, group=2)])
    from onnx import helper

    split = g.const("sp", _i64([3, 5]))
    g.nodes.append(helper.make_node("Split", [h, split], ["sa", "sb"], axis=1))
    g.node("Add", [g.conv("sa", 3, 5, 1), "sb"], out="y")
    x = g.rng.randn(1, 3, 5, 5).astype(np.float32)
    return g.model([("x", [1, 3, 5, 5])], [("y", [1, 5, 5, 5])]), {"x": x}


def build_opset16() -> Built:
    """Opset 16: ScatterElements with reduction add and ScatterND with mul (loops with
    ``fuse``; MNN's results differ from onnxruntime's here, the goldens are MNN's), Einsum,
    reversed exclusive CumSum, ReverseSequence (negative region strides), Trilu, GridSample,
    linear Resize."""
    import make_test_models

    opset = make_test_models.OPSET
    make_test_models.OPSET = 16
    try:
        g = GraphBuilder("opset16", seed=25)
        x2 = g.node("Reshape", ["x", g.const("s", _i64([4, 6]))])
        upd = g.node("Mul", [x2, g.const("two", np.array(2.0, np.float32))])
        i_el = g.const("i", _i64([[1, 0, 3, 2, 2, 0], [1, 3, 0, 0, 1, 1], [2, 2, 2, 3, 3, 3]]))
        u3 = g.node(
            "Slice",
            [upd, g.const("a", _i64([0])), g.const("b", _i64([3])), g.const("c", _i64([0]))],
        )
        g.node("ScatterElements", [x2, i_el, u3], out="y0", axis=0, reduction="add")
        i_nd = g.const("i", _i64([[1], [1], [3], [0]]))
        g.node("ScatterND", [x2, i_nd, upd], out="y1", reduction="mul")
        w = g.const("w", g.rng.randn(4, 5).astype(np.float32))
        g.node("Einsum", ["x", w], out="y2", equation="bij,jk->bik")
        g.node("CumSum", ["x", g.const("ax", _i64([2]))], out="y3", reverse=1, exclusive=1)
        t = g.node("Transpose", ["x"], perm=[1, 0, 2])
        g.node(
            "ReverseSequence", [t, g.const("l", _i64([1, 2]))], out="y4", batch_axis=1, time_axis=0
        )
        g.node("Trilu", ["x"], out="y5", upper=1)
        x4 = g.node("Unsqueeze", ["x", g.const("a", _i64([0]))])
        grid = g.const("gr", (g.rng.rand(1, 3, 3, 2) * 2 - 1).astype(np.float32))
        g.node("GridSample", [x4, grid], out="y6")
        scales = g.const("sc", np.array([1, 1, 2, 1.5], np.float32))
        g.node("Resize", [x4, "", scales], out="y7", mode="linear")
        x = g.rng.randn(2, 3, 4).astype(np.float32)
        outs = [
            ("y0", [4, 6]),
            ("y1", [4, 6]),
            ("y2", [2, 3, 5]),
            ("y3", [2, 3, 4]),
            ("y4", [3, 2, 4]),
            ("y5", [2, 3, 4]),
            ("y6", [1, 2, 3, 3]),
            ("y7", [1, 2, 6, 6]),
        ]
        return g.model([("x", [2, 3, 4])], outs), {"x": x}
    finally:
        make_test_models.OPSET = opset


MODELS: dict[str, Callable[[], Built]] = {
    "movement": build_movement,
    "cnn": build_cnn,
    "gather": build_gather,
    "embedding": build_embedding,
    "batch_matmul": build_batch_matmul,
    "scatter": build_scatter,
    "broadcast": build_broadcast,
    "spatial": build_spatial,
    "misc": build_misc,
    "shuffle": build_shuffle,
    "opset16": build_opset16,
}


def convert_static(onnx_path: str, dst: str, inputs: dict[str, np.ndarray], tmp: str) -> None:
    """``onnx_path`` -> static ``dst`` at the shapes of ``inputs``."""
    cfg = os.path.join(tmp, os.path.basename(dst) + ".cfg")
    with open(cfg, "w") as f:
        f.write(f"input_size = {len(inputs)}\n")
        f.write(f"input_names = {','.join(inputs)}\n")
        f.write(f"input_dims = {','.join('x'.join(map(str, v.shape)) for v in inputs.values())}\n")
    args = ["-f", "ONNX", "--modelFile", onnx_path, "--MNNModel", dst, "--bizCode", "mnnpy"]
    mc.mnnconvert([*args, "--saveStaticModel", "--inputConfigFile", cfg], expect=dst)
    mc.fix_uuid(dst)


def op_types(path: str, tmp: str) -> collections.Counter:
    d = mc.dump_json(path, os.path.join(tmp, "dump.json"))
    return collections.Counter(o["type"] for o in d["oplists"])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[1])
    ap.add_argument("--out", default=os.path.join(ROOT, "tests", "data", "static"))
    ap.add_argument("--only", nargs="*", default=None)
    args = ap.parse_args(argv)
    os.makedirs(args.out, exist_ok=True)
    tmp = tempfile.mkdtemp(prefix="mnnpy_static_")
    rows = []
    try:
        for name, builder in MODELS.items():
            if args.only and name not in args.only:
                continue
            model, inputs = builder()
            onnx_path = os.path.join(tmp, name + ".onnx")
            with open(onnx_path, "wb") as f:
                f.write(model.SerializeToString())
            dst = os.path.join(args.out, name + ".mnn")
            convert_static(onnx_path, dst, inputs, tmp)
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
    if not args.only:
        with open(os.path.join(args.out, "README.md"), "w") as f:
            f.write(README + "\n".join(rows) + "\n")
    return 0


README = """# Static models

Written by `tools/make_static_models.py`: small ONNX graphs converted by MNN 3.6.1's converter
with `--saveStaticModel --inputConfigFile` (shapes fixed, geometry precomputed: `Raster` ops
and `While` ops with a `LoopParam`), and `<name>.npz` with the input (`input:<name>`) and MNN's
Session outputs (`output:<name>`, CPU, 1 thread). `tests/models/test_static_models.py` runs
them in mnnpy. max|MNN-ORT| compares MNN with onnxruntime on the source graph (a sanity check of
the graph; MNN's scatter reductions differ from onnxruntime's, the goldens are MNN's). The
converter writes a static file's tensor describes and constants in the order of its tensors'
addresses, so a rerun may give a different (equivalent) file for the same graph.

| model | bytes | graph | ops in the file | max abs MNN - ORT |
|---|---|---|---|---|
"""


if __name__ == "__main__":
    sys.exit(main())
