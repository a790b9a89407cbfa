#!/usr/bin/env python
"""Build the small `.mnn` test models in tests/data and their golden outputs.

Usage (from the repository root; needs the ``convert`` extra, i.e. the PyPI
packages ``mnn`` (3.6.1 was used), ``onnx``, ``onnxruntime`` and numpy)::

    pip install -e .[convert]
    python tools/make_test_models.py [--out tests/data] [--no-default] [--no-readme] [--variants]

``--variants`` also runs ``tools/make_variant_models.py`` (fp16 / weight-quantized / external /
static / int8 files of three small models in ``tests/data/variants``; see that script).

What it does, for every model in MODELS:

1. builds a small float32 ONNX graph with ``onnx.helper`` (opset 13, random
   weights from a fixed numpy seed, He-like scale so activations stay O(1));
2. converts it with MNN's own converter: ``_tools.mnnconvert`` (the C extension
   shipped in the ``mnn`` wheel), always run in a subprocess.  The random
   ``mnn_uuid`` the converter embeds is replaced by a content-derived one so
   re-runs give byte-identical files (conversion, MNN/onnxruntime runs and the
   ``.npz`` writer live in ``tools/_mnn_convert.py``, shared with
   ``tools/make_bench_models.py``);
3. runs the converted file with MNN's legacy Session API (CPU, 1 thread) and
   writes ``<name>.npz`` with the keys ``input:<tensor name>`` and
   ``output:<tensor name>`` (arrays in the layout the user sees: NCHW for NCHW
   inputs, NHWC for the NHWC-fed models);
4. runs the source ONNX graph with onnxruntime and prints max|MNN - ORT|.

``nhwc_dformat`` is derived from ``nhwc_input``: the converted file is dumped
to JSON with the converter, its Input op is switched to ``dformat: NHWC`` and
the Permute op is removed (an NHWC Input is what MNN's TF/TFLite front ends
emit; the ONNX front end never does), the weights are restored at full float32
precision (the JSON dump keeps only 6 digits) and the JSON is encoded back to
.mnn with the converter (``-f JSON``).

Outputs: ``<out>/<name>.mnn``, ``<out>/<name>.npz`` and ``<out>/README.md``
(a dump of every converted file's ops, made with the converter's own
``-f MNN --JsonFile`` dump, so flatc is not needed).  ``conv_relu_pool_fc`` is
also copied to ``mnnpy/models/default.mnn`` (+ ``default.npz``) unless
``--no-default``.  The ONNX sources only live in a temporary directory that is
deleted at the end.

Determinism: inputs/weights are seeded, the ``.npz`` files are written with a
fixed zip timestamp, and MNN's 1-thread CPU Session gives identical results
run to run (checked here by running every model twice), so re-running
reproduces byte-identical ``.npz`` and ``.mnn`` files.

SAFETY: never ``import MNN.tools`` and never run the ``mnnconvert``/``mnn``
console scripts (their Python wrapper pip-installs packages and uploads usage
logs).  Conversion only goes through ``tools/_mnn_convert.py``
(``_tools.mnnconvert`` in a subprocess).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
from types import ModuleType

import numpy as np

OPSET = 13
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


# ---------------------------------------------------------------------------
# ONNX graph building
# ---------------------------------------------------------------------------


class GraphBuilder:
    """Tiny helper around onnx.helper that collects nodes and initializers."""

    def __init__(self, name: str, seed: int):
        self.name = name
        self.rng = np.random.RandomState(seed)
        self.nodes = []
        self.inits = []
        self.counter = 0

    def _uniq(self, base: str) -> str:
        self.counter += 1
        return f"{base}_{self.counter}"

    def const(self, base: str, arr: np.ndarray) -> str:
        from onnx import numpy_helper

        name = self._uniq(base)
        self.inits.append(numpy_helper.from_array(np.ascontiguousarray(arr), name))
        return name

    def node(self, op: str, inputs, out: str | None = None, **attrs) -> str:
        from onnx import helper

        out = out or self._uniq(op.lower())
        self.nodes.append(helper.make_node(op, list(inputs), [out], name=self._uniq(op), **attrs))
        return out

    def conv(self, x, cin, cout, k, stride=1, pad=0, dilation=1, group=1, out=None):
        fan_in = (cin // group) * k * k
        w = (self.rng.randn(cout, cin // group, k, k) * np.sqrt(2.0 / fan_in)).astype(np.float32)
        b = (self.rng.randn(cout) * 0.1).astype(np.float32)
        return self.node(
            "Conv",
            [x, self.const("W", w), self.const("B", b)],
            out,
            kernel_shape=[k, k],
            strides=[stride, stride],
            pads=[pad, pad, pad, pad],
            dilations=[dilation, dilation],
            group=group,
        )

    def gemm(self, x, cin, cout, out=None):
        # Gemm with transB=1 (weight stored [cout, cin], like a torch Linear export)
        w = (self.rng.randn(cout, cin) * np.sqrt(2.0 / cin)).astype(np.float32)
        b = (self.rng.randn(cout) * 0.1).astype(np.float32)
        return self.node(
            "Gemm", [x, self.const("W", w), self.const("B", b)], out, alpha=1.0, beta=1.0, transB=1
        )

    def clip6(self, x):
        return self.node(
            "Clip",
            [
                x,
                self.const("min", np.array(0.0, np.float32)),
                self.const("max", np.array(6.0, np.float32)),
            ],
        )

    def model(self, inputs, outputs):
        """inputs/outputs: lists of (name, shape)."""
        import onnx
        from onnx import TensorProto, helper

        g = helper.make_graph(
            self.nodes,
            self.name,
            [helper.make_tensor_value_info(n, TensorProto.FLOAT, s) for n, s in inputs],
            [helper.make_tensor_value_info(n, TensorProto.FLOAT, s) for n, s in outputs],
            initializer=self.inits,
        )
        m = helper.make_model(
            g,
            opset_imports=[helper.make_opsetid("", OPSET)],
            producer_name="mnnpy-make_test_models",
        )
        m.ir_version = 8
        onnx.checker.check_model(m, full_check=True)
        return m


def build_conv_relu_pool_fc():
    g = GraphBuilder("conv_relu_pool_fc", seed=1)
    h = g.conv("x", 3, 8, 3, pad=1)  # 1x8x32x32
    h = g.node("Relu", [h])
    h = g.node("MaxPool", [h], kernel_shape=[2, 2], strides=[2, 2])  # 1x8x16x16
    h = g.conv(h, 8, 16, 3, stride=2, pad=1)  # 1x16x8x8
    h = g.clip6(h)  # ReLU6
    h = g.node("GlobalAveragePool", [h])  # 1x16x1x1
    h = g.node("Flatten", [h], axis=1)  # 1x16
    h = g.gemm(h, 16, 10, out="logits")
    g.node("Softmax", [h], out="prob", axis=1)
    x = g.rng.randn(1, 3, 32, 32).astype(np.float32)
    return g.model([("x", [1, 3, 32, 32])], [("prob", [1, 10])]), {"x": x}


def build_residual_add():
    g = GraphBuilder("residual_add", seed=2)
    a = g.conv("x", 4, 5, 3, pad=1)  # 1x5x15x15
    a = g.node("Relu", [a])
    b = g.conv(a, 5, 5, 3, pad=1)
    h = g.node("Add", [b, a])  # skip connection
    h = g.node("Relu", [h])
    h = g.node(
        "AveragePool",
        [h],
        kernel_shape=[3, 3],
        strides=[2, 2],
        pads=[1, 1, 1, 1],
        count_include_pad=0,
    )  # 1x5x8x8
    h = g.conv(h, 5, 17, 1)  # 1x17x8x8
    h = g.node("Relu", [h])
    h = g.node("Flatten", [h], axis=1)  # 1x1088
    g.gemm(h, 17 * 8 * 8, 7, out="y")
    x = g.rng.randn(1, 4, 15, 15).astype(np.float32)
    return g.model([("x", [1, 4, 15, 15])], [("y", [1, 7])]), {"x": x}


def build_nhwc_input():
    g = GraphBuilder("nhwc_input", seed=3)
    h = g.node("Transpose", ["x"], perm=[0, 3, 1, 2])  # 1x3x16x16
    h = g.conv(h, 3, 8, 3, pad=0, dilation=2)  # 1x8x12x12
    h = g.node("Relu", [h])
    h = g.node("MaxPool", [h], kernel_shape=[3, 3], strides=[2, 2], ceil_mode=1)  # 1x8x6x6
    h = g.node("Flatten", [h], axis=1)  # 1x288
    w = (g.rng.randn(288, 10) * np.sqrt(2.0 / 288)).astype(np.float32)
    bias = (g.rng.randn(10) * 0.1).astype(np.float32)
    h = g.node("MatMul", [h, g.const("W", w)])
    g.node("Add", [h, g.const("B", bias)], out="y")
    x = g.rng.randn(1, 16, 16, 3).astype(np.float32)
    return g.model([("x", [1, 16, 16, 3])], [("y", [1, 10])]), {"x": x}


def build_batch2():
    g = GraphBuilder("batch2", seed=4)
    h = g.conv("x", 3, 8, 5, stride=2, pad=2)  # 2x8x10x10
    h = g.node("Relu", [h])
    h = g.conv(h, 8, 8, 3, pad=1, group=8)  # depthwise
    h = g.node("Relu", [h])
    h = g.conv(h, 8, 12, 3, pad=1, group=2)  # grouped, 2x12x10x10
    h = g.node("Relu", [h])
    h = g.node("MaxPool", [h], kernel_shape=[2, 2], strides=[2, 2])  # 2x12x5x5
    h = g.conv(h, 12, 16, 1)
    h = g.clip6(h)
    h = g.node("GlobalAveragePool", [h])  # 2x16x1x1
    h = g.node("Flatten", [h], axis=1)  # 2x16
    h = g.gemm(h, 16, 10, out="logits")
    g.node("Softmax", [h], out="prob", axis=1)
    x = g.rng.randn(2, 3, 20, 20).astype(np.float32)
    return g.model([("x", [2, 3, 20, 20])], [("prob", [2, 10])]), {"x": x}


# name -> (builder, one-line description, derived-from)
MODELS = {
    "conv_relu_pool_fc": (
        build_conv_relu_pool_fc,
        "x 1x3x32x32 -> Conv3x3 p1 8ch + Relu -> MaxPool 2x2 s2 -> Conv3x3 s2 p1 16ch "
        "-> Clip(0,6) -> GlobalAveragePool -> Flatten -> Gemm(10, transB=1) -> Softmax(axis=1)",
        None,
    ),
    "residual_add": (
        build_residual_add,
        "x 1x4x15x15 -> Conv3x3 p1 5ch + Relu (=a) -> Conv3x3 p1 5ch -> Add(a) -> Relu "
        "-> AveragePool 3x3 s2 p1 count_include_pad=0 -> Conv1x1 17ch -> Relu -> Flatten "
        "-> Gemm(7, transB=1)",
        None,
    ),
    "nhwc_input": (
        build_nhwc_input,
        "x 1x16x16x3 (NHWC data) -> Transpose(0,3,1,2) -> Conv3x3 dilation 2 p0 8ch -> Relu "
        "-> MaxPool 3x3 s2 ceil_mode=1 -> Flatten -> MatMul(const 288x10) -> Add(bias)",
        None,
    ),
    "nhwc_dformat": (
        None,
        "same graph and weights as nhwc_input, but the Input op has dformat NHWC and the "
        "Permute op is gone (hand-edited converter JSON, re-encoded with `-f JSON`)",
        "nhwc_input",
    ),
    "batch2": (
        build_batch2,
        "x 2x3x20x20 -> Conv5x5 s2 p2 8ch + Relu -> depthwise Conv3x3 p1 (group 8) + Relu "
        "-> Conv3x3 p1 12ch group 2 + Relu -> MaxPool 2x2 s2 -> Conv1x1 16ch -> Clip(0,6) "
        "-> GlobalAveragePool -> Flatten -> Gemm(10, transB=1) -> Softmax(axis=1)",
        None,
    ),
}


# ---------------------------------------------------------------------------
# Conversion and goldens: tools/_mnn_convert.py
# ---------------------------------------------------------------------------


def _convert_helpers() -> ModuleType:
    """``tools/_mnn_convert.py``, importable whether this file runs as a script or is imported."""
    tools = os.path.dirname(os.path.abspath(__file__))
    if tools not in sys.path:
        sys.path.insert(0, tools)
    import _mnn_convert

    return _mnn_convert


def make_nhwc_dformat(src_mnn: str, onnx_model, dst: str, tmp: str) -> None:
    """nhwc_input.mnn -> same net with an NHWC Input and no Permute."""
    from onnx import numpy_helper

    mc = _convert_helpers()
    d = mc.dump_json(src_mnn, os.path.join(tmp, "nhwc_src.json"))
    ops = d["oplists"]
    assert ops[0]["type"] == "Input" and ops[0]["main"]["dformat"] == "NCHW", ops[0]
    perm = [o for o in ops if o["type"] == "Permute"]
    assert len(perm) == 1 and perm[0]["main"]["dims"] == [0, 3, 1, 2], perm
    perm = perm[0]
    ops[0]["main"]["dformat"] = "NHWC"
    (pin,), (pout,) = perm["inputIndexes"], perm["outputIndexes"]
    ops.remove(perm)
    for o in ops:
        if "inputIndexes" in o:
            o["inputIndexes"] = [pin if i == pout else i for i in o["inputIndexes"]]
            if o["type"] == "ConvertTensor" and pin in o["inputIndexes"]:
                assert o["main"]["source"] == "NCHW"
                o["main"]["source"] = "NHWC"
    # drop the now unused tensor and renumber
    del d["tensorName"][pout]
    ren = lambda i: i - 1 if i > pout else i  # noqa: E731
    for o in ops:
        for k in ("inputIndexes", "outputIndexes"):
            if k in o:
                o[k] = [ren(i) for i in o[k]]
    # Restore full float32 precision of every float array (the dump has 6 digits).
    cands = []
    for t in onnx_model.graph.initializer:
        a = numpy_helper.to_array(t).astype(np.float32)
        cands.append(a.ravel())
        if a.ndim == 2:
            cands.append(a.T.ravel())

    def restore(o):
        if isinstance(o, dict):
            for k, v in o.items():
                if isinstance(v, list) and len(v) > 1 and all(isinstance(x, float) for x in v):
                    arr = np.array(v, np.float32)
                    hits = [
                        c for c in cands if c.size == arr.size and np.max(np.abs(c - arr)) < 2e-6
                    ]
                    if len(hits) != 1:
                        raise RuntimeError(f"cannot restore float array {k} (len {len(v)})")
                    o[k] = [float(x) for x in hits[0]]
                else:
                    restore(v)
        elif isinstance(o, list):
            for v in o:
                restore(v)

    restore(ops)
    jpath = os.path.join(tmp, "nhwc_dformat.json")
    with open(jpath, "w") as f:
        json.dump(d, f)
    mc.json_to_mnn(jpath, dst)


# ---------------------------------------------------------------------------
# README (op dump of every converted file)
# ---------------------------------------------------------------------------

README_HEAD = """\
# Test models

Generated by `tools/make_test_models.py` (MNN {mnn_version} converter via
`_tools.mnnconvert`, goldens from MNN's Session API, CPU, 1 thread).
Re-generate with `python tools/make_test_models.py` (needs the `convert`
extra: mnn, onnx, onnxruntime).  Do not edit by hand: this file is rewritten
by the script.

Each `<name>.npz` holds `input:<tensor>` and `output:<tensor>` float32
arrays (NCHW for NCHW inputs, NHWC for the NHWC-fed models, i.e. exactly the
array a user passes / gets).  `conv_relu_pool_fc` is also shipped as
`mnnpy/models/default.mnn` (+ `default.npz`).

Deployment variants (fp16, `--weightQuantBits` 2-8 symmetric / asymmetric /
block-wise, `--saveExternalData`, `--saveStaticModel`, int8 from `mnnquant`) of
three more models (`cnn`, `transformer`, `conv3d`) live in `variants/`, made
by `tools/make_variant_models.py` (or `python tools/make_test_models.py
--variants`); `variants/README.md` lists each file's flags, size, storage and
its MNN-vs-float difference, and the script's docstring records what the 3.6.1
converter refuses or does oddly.

The op tables below come from the converter's own JSON dump
(`-f MNN --JsonFile`).  Fields not listed are absent from the file (the
schema default applies); big float arrays are shown only as their length.
`dDF` = the op's `defaultDimentionFormat`.  Tensor indexes refer to the
net's `tensorName` list.

## Findings that matter for the runtime

{notes}
"""

NOTES = """\
* Op types used across all models: Input, ConvertTensor, Convolution,
  ConvolutionDepthwise, Pooling, Pooling3D, Flatten, Reshape, Const,
  BinaryOp, Shape, Rank, Unsqueeze, SliceTf, Concat, Slice, Softmax, Permute
  (Permute only in `nhwc_input`).
* Layouts: `Input` ops of ONNX models are always `dformat: NCHW` (even when
  the data is NHWC, see `nhwc_input`: the ONNX Transpose becomes a `Permute`
  op with dims [0,3,1,2] and the Input dims are simply [1,16,16,3]).  The
  converter inserts explicit `ConvertTensor` ops: NCHW->NC4HW4 in front of the
  first Convolution (tensor `<name>___tr4conv_<n>`), and NC4HW4->NCHW after the
  last Convolution (the MatMul-converted one).  Everything between is NC4HW4
  at run time: MNN propagates the format of input 0 to the outputs for
  Convolution/Pooling/BinaryOp/Flatten/Reshape/Concat/Slice (no more
  ConvertTensor ops are stored).  Logically all tensors are NCHW; NC4HW4 is
  only a memory layout, so a runtime that keeps plain NCHW arrays can treat
  NCHW<->NC4HW4 ConvertTensor ops as identity.  NHWC<->NC4HW4/NCHW (only in
  `nhwc_dformat`) is a real transpose.  Nothing is stored in
  `extraTensorDescribe`.
* Relu after Conv is fused: `Convolution2DCommon.relu = true`; Clip(0,6)
  after Conv is fused: `relu6 = true`.  Add + Relu becomes one `BinaryOp`
  (`opType ADD`, `activationType 1` = relu).
* Conv padding: `padMode CAFFE` with both `padX/padY` and `pads`
  ([top, left, bottom, right] in ONNX order, here always symmetric) set.  The
  MatMul-converted 1x1 convs have no `pads` vector.  Weights are OIHW
  (`outputCount * inputCount/group * kY * kX` floats), bias has outputCount
  floats.
* Depthwise conv (group == in == out) becomes `ConvolutionDepthwise`
  (`group 8`, weight 8*1*3*3).  A grouped conv with 1 < group < channels
  (batch2, group 2) is split by the converter: `Slice` (axis 1,
  slicePoints [4]) -> two plain `Convolution`s (group 1) -> `Concat` (axis 1).
* Gemm(transB=1) and MatMul(const) + Add(const) are both converted to:
  `Flatten`(axis 1, endAxis 0) -> `Reshape` to [-1, K, 1, 1] (dimType NCHW,
  shape from a `Const` int32 blob) -> 1x1 `Convolution` named
  `<out>__matmul_converted` (weight = [N, K] row-major, i.e. Gemm's B as is /
  MatMul's B transposed, bias = Gemm C / the Add constant) -> `ConvertTensor`
  NC4HW4->NCHW -> `Reshape` to a runtime shape computed by a small shape
  subgraph: `Shape`(flatten out) [dDF NCHW], `Rank`, `BinaryOp SUB`(rank, 2)
  (note `T: DT_FLOAT` although the operands are int32: use the input dtype),
  `Unsqueeze`(axis 0), two `SliceTf`(input, begin, size), `Concat`(axis 0)
  with the Const [N] -> [batch, N].  The last Reshape is named after the ONNX
  output (e.g. `logits`).
* `Const` ops hold a `Blob` (dims, dataFormat NCHW, dataType DT_INT32,
  int32s); a Blob without `dims` is a scalar (e.g. the `2` in rank - 2).
  `Rank` outputs a scalar int32, `Shape` a 1-D int32 vector.
* ONNX's own Flatten is kept as MNN `Flatten` (axis 1, endAxis 0 -> 2-D
  [outer, inner]).
* GlobalAveragePool becomes `Pooling3D` (Pool3D: `type AVEPOOL`,
  `padType CAFFE`, `isGlobal true`, no kernels/strides/pads); for 4-D input
  MNN runs it as a global 2-D average pool -> [N, C, 1, 1].
* Softmax(axis=1) stays `Softmax` with `Axis{axis: 1}` on the 2-D NCHW tensor.
* Pooling: `Pool` table. ONNX MaxPool without pads -> `padX = padY = 0`, no
  `pads` vector, `padType CAFFE`, `ceilModel false` (true for ceil_mode=1),
  `countType DEFAULT`.  AveragePool with pads -> `padX/padY = 1` *and*
  `pads [1,1,1,1]`, `countType DEFAULT` even for count_include_pad=0
  (count_include_pad=1 would give INCLUDE_PADDING).  MNN CPU semantics: if
  `pads` is present and padType is CAFFE, the pads (pads[0]=top,
  pads[1]=left) are used and padType is treated as VALID, so DEFAULT means
  EXCLUDE_PADDING (matches ONNX count_include_pad=0); with no `pads` vector
  and padType CAFFE, DEFAULT means INCLUDE_PADDING.  Output size for CAFFE
  padType: `ceilModel ? UP_DIV(in + pad_total - k, s) + 1 : (in + pad_total - k) / s + 1`
  (no "last window must start inside the input" correction).
* `Shape` ops carry `defaultDimentionFormat: NCHW` (all other ops NHWC, the
  schema default): MNN's Shape returns a rank-4 NHWC-ordered shape for an
  NC4HW4 input when dDF is NHWC, so the NCHW marker matters.
* The converter writes a random `mnn_uuid`; the script replaces it by a
  content hash so files are reproducible.
"""


def _short(v, limit=16):
    if isinstance(v, list):
        if len(v) > limit:
            kind = "floats" if any(isinstance(x, float) for x in v) else "values"
            return f"<{len(v)} {kind}>"
        return "[" + ", ".join(_short(x, limit) for x in v) + "]"
    if isinstance(v, dict):
        return "{" + ", ".join(f"{k}: {_short(x, limit)}" for k, x in v.items()) + "}"
    if isinstance(v, float):
        return f"{v:.6g}"
    if isinstance(v, bool):
        return "true" if v else "false"
    return str(v)


def _params(op: dict) -> str:
    main = op.get("main")
    mt = op.get("main_type", "NONE")
    if not main:
        return f"({mt})"
    if mt == "Convolution2D":
        parts = ["common: " + _short(main.get("common", {}))]
        for k, v in main.items():
            if k != "common":
                parts.append(
                    f"{k}: " + (f"<{len(v)} floats>" if isinstance(v, list) else _short(v))
                )
        return f"{mt} {{{'; '.join(parts)}}}"
    if mt == "Blob":
        return "Blob " + _short(main, limit=8)
    return f"{mt} {_short(main)}"


def describe_model(name: str, d: dict, info: dict) -> str:
    lines = [f"## {name}", ""]
    lines.append(f"ONNX source: {info['desc']}.")
    lines.append("")
    for k, (shape, fmt) in info["inputs"].items():
        lines.append(f"* input `{k}`: {'x'.join(map(str, shape))} float32 (Input dformat {fmt})")
    for k, shape in info["outputs"].items():
        lines.append(f"* output `{k}`: {'x'.join(map(str, shape))} float32")
    lines.append(
        f"* file size {info['size']} bytes; outputName {d.get('outputName')}; "
        f"sourceType {d.get('sourceType')}; bizCode {d.get('bizCode')}; "
        f"tensors {len(d.get('tensorName', []))}; ops {len(d['oplists'])}"
    )
    diffs = ", ".join(f"{k}: {v:.3g}" for k, v in info["diffs"].items())
    lines.append(f"* max |MNN - onnxruntime| = {diffs}")
    if d.get("extraTensorDescribe"):
        lines.append(f"* extraTensorDescribe: {_short(d['extraTensorDescribe'])}")
    lines.append("")
    lines.append("| # | type | name | in | out | dDF | params |")
    lines.append("|---|------|------|----|-----|-----|--------|")
    for i, op in enumerate(d["oplists"]):
        cells = [
            str(i),
            str(op.get("type")),
            f"`{op.get('name')}`",
            str(op.get("inputIndexes", [])),
            str(op.get("outputIndexes", [])),
            str(op.get("defaultDimentionFormat", "(NHWC)")),
            _params(op).replace("|", "\\|"),
        ]
        lines.append("| " + " | ".join(cells) + " |")
    lines.append("")
    lines.append("Tensors: " + ", ".join(f"{i} `{n}`" for i, n in enumerate(d["tensorName"])))
    lines.append("")
    return "\n".join(lines)


def write_readme(out: str, dumps: dict, results: dict) -> None:
    import MNN

    version = getattr(MNN, "version", lambda: "?")
    version = version() if callable(version) else version
    text = README_HEAD.format(mnn_version=version, notes=NOTES.rstrip())
    for name in MODELS:
        if name in dumps:
            text += "\n" + describe_model(name, dumps[name], results[name])
    with open(os.path.join(out, "README.md"), "w") as f:
        f.write(text)


# ---------------------------------------------------------------------------


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[1])
    ap.add_argument("--out", default=os.path.join(ROOT, "tests", "data"))
    ap.add_argument(
        "--no-default",
        action="store_true",
        help="don't copy conv_relu_pool_fc to mnnpy/models/default.{mnn,npz}",
    )
    ap.add_argument("--no-readme", action="store_true", help="don't rewrite <out>/README.md")
    ap.add_argument(
        "--variants",
        action="store_true",
        help="also build tests/data/variants with tools/make_variant_models.py",
    )
    args = ap.parse_args(argv)

    mc = _convert_helpers()
    os.makedirs(args.out, exist_ok=True)
    results, dumps, onnx_models, all_inputs = {}, {}, {}, {}
    tmp = tempfile.mkdtemp(prefix="mnnpy_models_")
    try:
        for name, (builder, desc, base) in MODELS.items():
            mnn_path = os.path.join(args.out, name + ".mnn")
            if builder is not None:
                model, inputs = builder()
                onnx_path = os.path.join(tmp, name + ".onnx")
                with open(onnx_path, "wb") as f:
                    f.write(model.SerializeToString())
                mc.convert_onnx(onnx_path, mnn_path)
            else:  # derived model (nhwc_dformat)
                model, inputs = onnx_models[base], all_inputs[base]
                make_nhwc_dformat(os.path.join(args.out, base + ".mnn"), model, mnn_path, tmp)
            onnx_models[name], all_inputs[name] = model, inputs

            outs, _ = mc.run_mnn(mnn_path, inputs, runs=2, threads=1)
            ref = mc.run_ort(model.SerializeToString(), inputs, threads=1)
            diffs = mc.max_abs_diffs(name, outs, ref)
            arrays = {"input:" + k: v for k, v in inputs.items()}
            arrays.update({"output:" + k: v for k, v in outs.items()})
            mc.save_npz(os.path.join(args.out, name + ".npz"), arrays)

            d = mc.dump_json(mnn_path, os.path.join(tmp, name + ".json"))
            dumps[name] = d
            fmts = {
                o["name"]: o["main"].get("dformat", "NC4HW4")
                for o in d["oplists"]
                if o["type"] == "Input"
            }
            results[name] = dict(
                desc=desc,
                diffs=diffs,
                size=os.path.getsize(mnn_path),
                inputs={k: (list(v.shape), fmts.get(k, "?")) for k, v in inputs.items()},
                outputs={k: list(v.shape) for k, v in outs.items()},
            )
            r = results[name]
            diff_text = ", ".join(f"{k}={v:.3g}" for k, v in diffs.items())
            print(
                f"{name:<18} {r['size']:6d} bytes  in {r['inputs']}  out {r['outputs']}"
                f"  max|MNN-ORT| {diff_text}"
            )
            for k, v in diffs.items():
                if v > 1e-4:
                    print(f"  WARNING: large MNN vs onnxruntime difference for {k}")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)

    if not args.no_default:
        mdir = os.path.join(ROOT, "mnnpy", "models")
        os.makedirs(mdir, exist_ok=True)
        for ext in (".mnn", ".npz"):
            shutil.copyfile(
                os.path.join(args.out, "conv_relu_pool_fc" + ext),
                os.path.join(mdir, "default" + ext),
            )
        print("copied conv_relu_pool_fc -> mnnpy/models/default.{mnn,npz}")
    if not args.no_readme:
        write_readme(args.out, dumps, results)
        print("wrote", os.path.join(args.out, "README.md"))
    if args.variants:
        _convert_helpers()  # puts tools/ on sys.path
        import make_variant_models

        make_variant_models.main(["--out", os.path.join(args.out, "variants")])
    return 0


if __name__ == "__main__":
    sys.exit(main())
