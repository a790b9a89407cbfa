#!/usr/bin/env python
"""Build the control-flow tests: ONNX ``If`` / ``Loop`` graphs converted by MNN's converter.

Usage (from the repository root; needs the ``convert`` extra: ``mnn`` 3.6.1, ``onnx``,
``onnxruntime``)::

    python tools/make_control_flow_models.py [--out tests/data/control_flow] [--only NAME ...]

For every graph in ``MODELS``: build it with ``onnx.helper`` (fixed seed), write ``<name>.onnx``,
convert it with MNN's converter (``tools/_mnn_convert.py``, uuid made reproducible) to
``<name>.mnn`` (If / While ops with ``subgraphs``), and write ``<name>.npz`` with, for each
input case ``c``: ``input:<tensor>@c``, ``ort:<tensor>@c`` (onnxruntime on the source ONNX graph,
the oracle the tests use) and, where MNN's Module API runs the file, ``mnn:<tensor>@c``
(``MNN.nn.load_module_from_file``, CPU, 1 thread, in a subprocess: MNN 3.6.1 crashes on a Loop
that runs no iteration when it has scan outputs, so those cases have no ``mnn:`` arrays). MNN's
Session API refuses these files ("The model has subgraphs, please use MNN::Express::Module").

``if_conv_ext`` is ``if_conv`` converted with ``--saveExternalData`` (weights, those of the
subgraphs included, in ``if_conv_ext.mnn.weight``).

``rnn_*`` are ONNX GRU / LSTM nodes (hidden 16) as PyTorch exports ``nn.GRU`` / ``nn.LSTM``
with ``batch_first=True`` and a Linear after; the converter turns each into While loops with
subgraphs (see the README's findings for the forms it cannot convert correctly).

Integer inputs (ONNX int64) are stored as int32, as MNN's converter makes them; onnxruntime gets
them as int64.

ONNX ``Scan``: MNN's converter refuses it ("These Op Not Support: ONNX::Scan"). ``scan`` is a
Scan graph; the file converted is the same computation written as a ``Loop`` (Gather of row
``i`` of each scan input, the scan outputs as Loop scan outputs), the rewriting a user has to do
for MNN; its ``ort:`` outputs come from the original Scan graph.

SAFETY: conversion only through ``tools/_mnn_convert.py`` (never ``MNN.tools`` or the console
scripts).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Callable

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _mnn_convert as mc  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OPSET = 13
F, I64, BOOL = 1, 7, 9  # onnx.TensorProto FLOAT, INT64, BOOL


def _vi(name: str, elem: int, shape: list) -> object:
    from onnx import helper

    return helper.make_tensor_value_info(name, elem, shape)


def _model(nodes, name, inputs, outputs, inits=()) -> object:
    import onnx
    from onnx import helper, numpy_helper

    g = helper.make_graph(
        nodes,
        name,
        inputs,
        outputs,
        initializer=[numpy_helper.from_array(np.asarray(v), k) for k, v in inits],
    )
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", OPSET)], producer_name="mnnpy")
    m.ir_version = 8
    onnx.checker.check_model(m, full_check=True)
    return m


def _node(op: str, ins: list[str], outs: list[str], **attrs) -> object:
    from onnx import helper

    return helper.make_node(op, ins, outs, name=outs[0] + "_node", **attrs)


def build_if() -> tuple:
    """If on sum(x) > 0: then x * w + b (2x3), else Concat(x, -x) (4x3): both branches read
    outer tensors (x and initializers), and the branches give different shapes; a Relu after."""
    rng = np.random.RandomState(31)
    then_g = _graph_of(
        [_node("Mul", ["x", "w"], ["tm"]), _node("Add", ["tm", "b"], ["t_out"])],
        "then_g",
        [],
        [_vi("t_out", F, ["r", 3])],
    )
    else_g = _graph_of(
        [_node("Neg", ["x"], ["en"]), _node("Concat", ["x", "en"], ["e_out"], axis=0)],
        "else_g",
        [],
        [_vi("e_out", F, ["r", 3])],
    )
    nodes = [
        _node("ReduceSum", ["x"], ["s"], keepdims=0),
        _node("Greater", ["s", "zero"], ["c"]),
        _node("If", ["c"], ["r"], then_branch=then_g, else_branch=else_g),
        _node("Relu", ["r"], ["y"]),
    ]
    inits = [
        ("w", rng.randn(2, 3).astype(np.float32)),
        ("b", rng.randn(3).astype(np.float32)),
        ("zero", np.array(0.0, np.float32)),
    ]
    m = _model(nodes, "if", [_vi("x", F, [2, 3])], [_vi("y", F, ["r", 3])], inits)
    x = np.abs(rng.randn(2, 3)).astype(np.float32)
    return m, [{"x": x}, {"x": -x}, {"x": x * 0.5}]


def build_if_conv() -> tuple:
    """If whose branches hold convolutions (NC4HW4 inside the subgraphs, the converter's
    ConvertTensor ops around them): then Conv 3x3 (1x4x5x5), else MaxPool + Conv 1x1 (1x4x4x4);
    a Conv after the If reads either."""
    rng = np.random.RandomState(36)
    then_g = _graph_of(
        [_node("Conv", ["x", "w1", "b1"], ["t_out"], kernel_shape=[3, 3], pads=[1, 1, 1, 1])],
        "then_g",
        [],
        [_vi("t_out", F, [1, 4, 5, 5])],
    )
    else_g = _graph_of(
        [
            _node("MaxPool", ["x"], ["e_p"], kernel_shape=[2, 2], strides=[1, 1]),
            _node("Conv", ["e_p", "w2", "b1"], ["e_out"], kernel_shape=[1, 1]),
        ],
        "else_g",
        [],
        [_vi("e_out", F, [1, 4, 4, 4])],
    )
    nodes = [
        _node("ReduceMean", ["x"], ["s"], keepdims=0),
        _node("Greater", ["s", "zero"], ["c"]),
        _node("If", ["c"], ["r"], then_branch=then_g, else_branch=else_g),
        _node("Conv", ["r", "w3", "b3"], ["y"], kernel_shape=[1, 1]),
    ]
    inits = [
        ("w1", (rng.randn(4, 3, 3, 3) * 0.3).astype(np.float32)),
        ("w2", rng.randn(4, 3, 1, 1).astype(np.float32)),
        ("b1", rng.randn(4).astype(np.float32)),
        ("w3", rng.randn(2, 4, 1, 1).astype(np.float32)),
        ("b3", rng.randn(2).astype(np.float32)),
        ("zero", np.array(0.0, np.float32)),
    ]
    outs = [_vi("y", F, [1, 2, "h", "w"])]
    m = _model(nodes, "if_conv", [_vi("x", F, [1, 3, 5, 5])], outs, inits)
    x = np.abs(rng.randn(1, 3, 5, 5)).astype(np.float32)
    return m, [{"x": x}, {"x": -x}]


def _graph_of(nodes, name, inputs, outputs) -> object:
    from onnx import helper

    return helper.make_graph(nodes, name, inputs, outputs)


def _body_inputs(carried: list[tuple[str, int, list]]) -> list:
    return [_vi("iter", I64, []), _vi("cond_in", BOOL, []), *(_vi(*c) for c in carried)]


def build_loop_const() -> tuple:
    """Loop with a constant trip count (4) and no condition: v = v * 0.5 + x + i, carried; the
    scan outputs v (float) and i * i (int64); x read from the outer graph."""
    body = _graph_of(
        [
            _node("Identity", ["cond_in"], ["cond_out"]),
            _node("Cast", ["iter"], ["fi"], to=F),
            _node("Mul", ["v_in", "half"], ["vh"]),
            _node("Add", ["vh", "x"], ["v2"]),
            _node("Add", ["v2", "fi"], ["v_out"]),
            _node("Identity", ["v_out"], ["scan_v"]),
            _node("Mul", ["iter", "iter"], ["scan_i"]),
        ],
        "body",
        _body_inputs([("v_in", F, [2, 3])]),
        [_vi("cond_out", BOOL, []), _vi("v_out", F, [2, 3])]
        + [_vi("scan_v", F, [2, 3]), _vi("scan_i", I64, [])],
    )
    nodes = [_node("Loop", ["M", "", "v0"], ["v_final", "vs", "is"], body=body)]
    inits = [("M", np.array(4, np.int64)), ("half", np.array(0.5, np.float32))]
    outs = [_vi("v_final", F, [2, 3]), _vi("vs", F, [4, 2, 3]), _vi("is", I64, [4])]
    m = _model(nodes, "loop_const", [_vi("x", F, [2, 3]), _vi("v0", F, [2, 3])], outs, inits)
    rng = np.random.RandomState(32)
    cases = [
        {"x": rng.randn(2, 3).astype(np.float32), "v0": rng.randn(2, 3).astype(np.float32)}
        for _ in range(2)
    ]
    return m, cases


def build_loop_count() -> tuple:
    """Loop whose trip count is an input (M, int64 scalar): a running product and its scan."""
    body = _graph_of(
        [
            _node("Identity", ["cond_in"], ["cond_out"]),
            _node("Mul", ["p_in", "x"], ["p_out"]),
            _node("ReduceSum", ["p_out"], ["scan_s"], keepdims=0),
        ],
        "body",
        _body_inputs([("p_in", F, [3])]),
        [_vi("cond_out", BOOL, []), _vi("p_out", F, [3]), _vi("scan_s", F, [])],
    )
    nodes = [_node("Loop", ["M", "", "p0"], ["p_final", "sums"], body=body)]
    ins = [_vi("x", F, [3]), _vi("p0", F, [3]), _vi("M", I64, [])]
    m = _model(nodes, "loop_count", ins, [_vi("p_final", F, [3]), _vi("sums", F, ["m"])])
    rng = np.random.RandomState(33)
    x, p0 = rng.uniform(0.5, 1.5, 3).astype(np.float32), rng.randn(3).astype(np.float32)
    return m, [{"x": x, "p0": p0, "M": np.array(n, np.int64)} for n in (3, 1, 6, 0)]


def build_loop_cond() -> tuple:
    """Loop stopped by a condition computed in the body (sum(v) < limit) before M = 50; the
    number of scan rows depends on the data. An If inside the body (nested subgraphs) adds
    2 * x on even iterations and x on odd ones."""
    even = _graph_of([_node("Mul", ["x", "two"], ["e_out"])], "even", [], [_vi("e_out", F, [2, 2])])
    odd = _graph_of([_node("Identity", ["x"], ["o_out"])], "odd", [], [_vi("o_out", F, [2, 2])])
    body = _graph_of(
        [
            _node("Mod", ["iter", "two_i"], ["par"]),
            _node("Equal", ["par", "zero_i"], ["is_even"]),
            _node("If", ["is_even"], ["step"], then_branch=even, else_branch=odd),
            _node("Add", ["v_in", "step"], ["v_out"]),
            _node("ReduceSum", ["v_out"], ["total"], keepdims=0),
            _node("Less", ["total", "limit"], ["cond_out"]),
            _node("Identity", ["total"], ["scan_t"]),
        ],
        "body",
        _body_inputs([("v_in", F, [2, 2])]),
        [_vi("cond_out", BOOL, []), _vi("v_out", F, [2, 2]), _vi("scan_t", F, [])],
    )
    nodes = [_node("Loop", ["M", "c0", "v0"], ["v_final", "totals"], body=body)]
    inits = [
        ("M", np.array(50, np.int64)),
        ("c0", np.array(True)),
        ("two", np.array(2.0, np.float32)),
        ("two_i", np.array(2, np.int64)),
        ("zero_i", np.array(0, np.int64)),
        ("limit", np.array(20.0, np.float32)),
    ]
    ins = [_vi("x", F, [2, 2]), _vi("v0", F, [2, 2])]
    outs = [_vi("v_final", F, [2, 2]), _vi("totals", F, ["t"])]
    m = _model(nodes, "loop_cond", ins, outs, inits)
    rng = np.random.RandomState(34)
    x = rng.uniform(0.2, 1.0, (2, 2)).astype(np.float32)
    v0 = rng.randn(2, 2).astype(np.float32)
    return m, [{"x": x, "v0": v0}, {"x": x * 3, "v0": v0}, {"x": x, "v0": v0 + 30}]


def build_loop_grow() -> tuple:
    """Loop whose carried value grows (v = Concat(v, x) on axis 0, 3 iterations): the body's
    input shapes change from one iteration to the next; the scan output is sum(v) each time."""
    body = _graph_of(
        [
            _node("Identity", ["cond_in"], ["cond_out"]),
            _node("Concat", ["v_in", "x"], ["v_out"], axis=0),
            _node("ReduceSum", ["v_out"], ["scan_s"], keepdims=0),
        ],
        "body",
        _body_inputs([("v_in", F, ["r", 2])]),
        [_vi("cond_out", BOOL, []), _vi("v_out", F, ["r2", 2]), _vi("scan_s", F, [])],
    )
    nodes = [_node("Loop", ["M", "", "v0"], ["v_final", "sums"], body=body)]
    ins = [_vi("x", F, [1, 2]), _vi("v0", F, [1, 2])]
    outs = [_vi("v_final", F, ["r", 2]), _vi("sums", F, [3])]
    m = _model(nodes, "loop_grow", ins, outs, [("M", np.array(3, np.int64))])
    rng = np.random.RandomState(37)
    return m, [{k: rng.randn(1, 2).astype(np.float32) for k in ("x", "v0")} for _ in range(2)]


def _scan_graph() -> object:
    """Scan: s = s + x_t; y_t = s * w_t (two scan inputs, a state, one scan output)."""
    body = _graph_of(
        [_node("Add", ["s_in", "x_t"], ["s_out"]), _node("Mul", ["s_out", "w_t"], ["y_t"])],
        "scan_body",
        [_vi("s_in", F, [3]), _vi("x_t", F, [3]), _vi("w_t", F, [3])],
        [_vi("s_out", F, [3]), _vi("y_t", F, [3])],
    )
    nodes = [_node("Scan", ["s0", "x", "w"], ["s_final", "ys"], body=body, num_scan_inputs=2)]
    ins = [_vi("s0", F, [3]), _vi("x", F, ["n", 3]), _vi("w", F, ["n", 3])]
    return _model(nodes, "scan", ins, [_vi("s_final", F, [3]), _vi("ys", F, ["n", 3])])


def build_scan() -> tuple:
    """The Scan graph of ``_scan_graph`` written as a Loop (MNN's converter refuses Scan): the
    trip count is Shape(x)[0] (5, then 7 rows), each iteration Gathers row ``iter`` of x and w."""
    body = _graph_of(
        [
            _node("Identity", ["cond_in"], ["cond_out"]),
            _node("Gather", ["x", "iter"], ["x_t"], axis=0),
            _node("Gather", ["w", "iter"], ["w_t"], axis=0),
            _node("Add", ["s_in", "x_t"], ["s_out"]),
            _node("Mul", ["s_out", "w_t"], ["y_t"]),
        ],
        "body",
        _body_inputs([("s_in", F, [3])]),
        [_vi("cond_out", BOOL, []), _vi("s_out", F, [3]), _vi("y_t", F, [3])],
    )
    nodes = [
        _node("Shape", ["x"], ["xs"]),
        _node("Gather", ["xs", "zero"], ["n"], axis=0),
        _node("Loop", ["n", "", "s0"], ["s_final", "ys"], body=body),
    ]
    ins = [_vi("s0", F, [3]), _vi("x", F, ["n", 3]), _vi("w", F, ["n", 3])]
    outs = [_vi("s_final", F, [3]), _vi("ys", F, ["n", 3])]
    m = _model(nodes, "scan_loop", ins, outs, [("zero", np.array(0, np.int64))])
    rng = np.random.RandomState(35)
    cases = [
        {
            k: rng.randn(*s).astype(np.float32)
            for k, s in (("s0", [3]), ("x", [n, 3]), ("w", [n, 3]))
        }
        for n in (5, 7)
    ]
    return m, cases, _scan_graph()


RNN_IN, RNN_HIDDEN, RNN_OUT = 8, 16, 4


def _rnn_model(name: str, layers: list[tuple], states: list[str], to_rows: list) -> tuple:
    """x [batch, seq, RNN_IN] -> Transpose -> ONNX GRU / LSTM ``layers`` -> Transpose -> Linear,
    as PyTorch exports ``nn.GRU`` / ``nn.LSTM`` (``batch_first=True``) and a Linear after.

    ``layers``: ``(op, inputs after X W R B, gates, directions, attributes)`` per node, chained
    through a Squeeze of the direction axis; the last one writes ``y_last`` ``[seq, dirs, batch,
    hidden]``, which the ``to_rows`` nodes turn into ``rows`` ``[seq, batch, dirs * hidden]``.
    ``states``: graph inputs ``[dirs, batch, hidden]`` (initial states of the first layer, or of
    each layer). Three cases: batch 2 and seq 5, another trip count (seq 3), another batch (1).
    """
    rng = np.random.RandomState(41 + len(name))
    limit = 1 / np.sqrt(RNN_HIDDEN)
    nodes, inits, x = [_node("Transpose", ["x"], ["xt"], perm=[1, 0, 2])], [], "xt"
    for k, (op, extra, gates, dirs, attrs) in enumerate(layers):
        rows = gates * RNN_HIDDEN
        shapes = [(dirs, rows, RNN_IN if k == 0 else RNN_HIDDEN), (dirs, rows, RNN_HIDDEN)]
        shapes.append((dirs, 2 * rows))
        names = [f"w{k}", f"r{k}", f"b{k}"]
        inits += [(n, rng.uniform(-limit, limit, sh).astype(np.float32))
                  for n, sh in zip(names, shapes, strict=True)]  # fmt: skip
        y = "y_last" if k == len(layers) - 1 else f"y{k}"
        outs = [y, f"{y}_h", f"{y}_c"][: 3 if op == "LSTM" else 1]  # the converter needs Y_c
        nodes.append(_node(op, [x, *names, *extra], outs, hidden_size=RNN_HIDDEN, **attrs))
        if y != "y_last":
            nodes.append(_node("Squeeze", [y, "one"], [f"s{k}"]))
            x = f"s{k}"
    dirs = layers[0][3]
    nodes += to_rows
    nodes += [
        _node("Transpose", ["rows"], ["bt"], perm=[1, 0, 2]),
        _node("MatMul", ["bt", "fc_w"], ["mm"]),
        _node("Add", ["mm", "fc_b"], ["y"]),
    ]
    inits += [
        ("one", np.array([1], np.int64)),
        ("rows_shape", np.array([0, 0, -1], np.int64)),
        ("fc_w", rng.uniform(-0.3, 0.3, (dirs * RNN_HIDDEN, RNN_OUT)).astype(np.float32)),
        ("fc_b", rng.uniform(-0.3, 0.3, RNN_OUT).astype(np.float32)),
    ]
    used = {i for n in nodes for i in n.input}
    inits = [(k, v) for k, v in inits if k in used]
    ins = [_vi("x", F, ["b", "s", RNN_IN])]
    ins += [_vi(t, F, [dirs, "b", RNN_HIDDEN]) for t in states]
    m = _model(nodes, name, ins, [_vi("y", F, ["b", "s", RNN_OUT])], inits)
    cases = []
    for batch, seq in ((2, 5), (2, 3), (1, 4)):
        case = {"x": rng.randn(batch, seq, RNN_IN).astype(np.float32)}
        for t in states:
            case[t] = (rng.randn(dirs, batch, RNN_HIDDEN) * 0.5).astype(np.float32)
        cases.append(case)
    return m, cases


def _squeezed() -> list:
    """Y ``[seq, 1, batch, hidden]`` of one direction as rows ``[seq, batch, hidden]``."""
    return [_node("Squeeze", ["y_last", "one"], ["rows"])]


def build_rnn_gru2() -> tuple:
    """2-layer GRU (linear_before_reset=1 as PyTorch's nn.GRU, 8 -> 16, each layer's initial
    state an input), then a Linear (16 -> 4): the converter makes each GRU a While loop whose
    body convolves the NCHW hidden state with no ConvertTensor (mnnpy: format_wrap)."""
    lbr = {"linear_before_reset": 1}
    layers = [("GRU", ["", "h0"], 3, 1, lbr), ("GRU", ["", "h1"], 3, 1, lbr)]
    return _rnn_model("rnn_gru2", layers, ["h0", "h1"], _squeezed())


def build_rnn_gru1() -> tuple:
    """1-layer GRU (linear_before_reset=1) with no initial state, then a Linear: the While
    body's Convolution reads an NCHW tensor. (With ONNX's default linear_before_reset=0 MNN's
    converter writes a graph whose outputs differ from onnxruntime's by 1e-2: not used.)"""
    return _rnn_model("rnn_gru1", [("GRU", [], 3, 1, {"linear_before_reset": 1})], [], _squeezed())


def build_rnn_lstm() -> tuple:
    """1-layer LSTM (8 -> 16, initial h and c inputs), then a Linear: a While loop whose body
    convolves the NCHW hidden state."""
    layers = [("LSTM", ["", "h0", "c0"], 4, 1, {})]
    return _rnn_model("rnn_lstm", layers, ["h0", "c0"], _squeezed())


def build_rnn_bilstm() -> tuple:
    """Bidirectional LSTM (8 -> 2 x 16, initial h and c inputs), PyTorch's Transpose + Reshape
    of Y to [seq, batch, 32], then a Linear: the converter's backward While loop is followed by
    a Reverse along the sequence axis."""
    layers = [("LSTM", ["", "h0", "c0"], 4, 2, {"direction": "bidirectional"})]
    to_rows = [
        _node("Transpose", ["y_last"], ["yt"], perm=[0, 2, 1, 3]),
        _node("Reshape", ["yt", "rows_shape"], ["rows"]),
    ]
    return _rnn_model("rnn_bilstm", layers, ["h0", "c0"], to_rows)


MODELS: dict[str, Callable[[], tuple]] = {
    "if_branches": build_if,
    "if_conv": build_if_conv,
    "if_conv_ext": build_if_conv,  # converted with --saveExternalData (weights in .mnn.weight)
    "loop_const": build_loop_const,
    "loop_count": build_loop_count,
    "loop_grow": build_loop_grow,
    "loop_cond": build_loop_cond,
    "scan": build_scan,
    "rnn_gru2": build_rnn_gru2,
    "rnn_gru1": build_rnn_gru1,
    "rnn_lstm": build_rnn_lstm,
    "rnn_bilstm": build_rnn_bilstm,
}

_MODULE_RUNNER = """
import json, sys
import numpy as np
import MNN
path, npz, names, out = sys.argv[1], sys.argv[2], json.loads(sys.argv[3]), sys.argv[4]
data = np.load(npz)
ins = [data[k] for k in names]
m = MNN.nn.load_module_from_file(path, [k.split(":")[1] for k in names], json.loads(sys.argv[5]))
F = MNN.expr
vs = [F.const(a, list(a.shape), F.NCHW, F.float if a.dtype == np.float32 else F.int) for a in ins]
res = m.forward(vs)
np.savez(out, **{str(i): np.array(r.read()) for i, r in enumerate(res)})
"""


def _run_module(path: str, inputs: dict[str, np.ndarray], outs: list[str]) -> dict | None:
    """MNN's Module API on the file in a subprocess; None when it fails or crashes."""
    with tempfile.TemporaryDirectory() as tmp:
        npz = os.path.join(tmp, "in.npz")
        np.savez(npz, **{f"input:{k}": v for k, v in inputs.items()})
        res = os.path.join(tmp, "out.npz")
        keys = [f"input:{k}" for k in inputs]
        argv = [sys.executable, "-c", _MODULE_RUNNER, path, npz, json.dumps(keys), res]
        p = subprocess.run([*argv, json.dumps(outs)], capture_output=True, text=True)
        if p.returncode != 0 or not os.path.exists(res):
            print(f"  MNN Module API failed (rc={p.returncode}) on {path}")
            return None
        data = np.load(res)
        return {name: data[str(i)] for i, name in enumerate(outs)}


def _mnn_inputs(case: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    return {k: v.astype(np.int32) if v.dtype == np.int64 else v for k, v in case.items()}


def make(name: str, out_dir: str) -> None:
    import onnx

    built = MODELS[name]()
    model, cases = built[0], built[1]
    oracle = built[2] if len(built) > 2 else model
    onnx.save(oracle, os.path.join(out_dir, f"{name}.onnx"))
    converted = os.path.join(out_dir, f"{name}.onnx" if oracle is model else f"{name}_loop.onnx")
    onnx.save(model, converted)
    dst = os.path.join(out_dir, f"{name}.mnn")
    if name.endswith("_ext"):
        flags = ["--bizCode", "mnnpy", "--saveExternalData"]
        mc.mnnconvert(["-f", "ONNX", "--modelFile", converted, "--MNNModel", dst, *flags], dst)
        mc.fix_uuid(dst)
    else:
        mc.convert_onnx(converted, dst)
    outs = [o.name for o in model.graph.output]
    arrays: dict[str, np.ndarray] = {}
    for c, case in enumerate(cases):
        ort = mc.run_ort(oracle.SerializeToString(), case)
        for k, v in _mnn_inputs(case).items():
            arrays[f"input:{k}@{c}"] = v
        for k, v in ort.items():
            arrays[f"ort:{k}@{c}"] = v
        mnn = _run_module(dst, _mnn_inputs(case), outs)
        for k, v in (mnn or {}).items():
            arrays[f"mnn:{k}@{c}"] = v
            diff = np.abs(v.astype(np.float64) - ort[k]).max() if v.size else 0.0
            print(f"  case {c}: {k} {v.shape} max|MNN - ort| = {diff:.3g}")
    mc.save_npz(os.path.join(out_dir, f"{name}.npz"), arrays)
    print(f"{name}: {os.path.getsize(dst)} bytes, {len(cases)} cases")


README = """# Control-flow test models

Written by `tools/make_control_flow_models.py` (do not edit by hand): ONNX graphs with `If` /
`Loop`, converted by MNN 3.6.1's converter into `If` / `While` ops with `subgraphs`. Each
`<name>.npz` holds, per input case `c`, `input:<tensor>@c`, `ort:<tensor>@c` (onnxruntime on the
source ONNX graph: the oracle) and `mnn:<tensor>@c` (MNN's Module API on the `.mnn` file) where
MNN runs the case. MNN's Session API refuses all of these files.

| file | what it covers | cases |
|---|---|---|
{rows}

Findings: MNN's converter refuses ONNX `Scan` ("These Op Not Support: ONNX::Scan"), so `scan.mnn`
is converted from `scan_loop.onnx` (the same computation as a Loop) and checked against
`scan.onnx`; MNN's Module API crashes (SIGSEGV) on a Loop with scan outputs that runs no
iteration (`loop_count` case 3, M = 0), so that case has onnxruntime outputs only.

The `rnn_*` files are ONNX GRU / LSTM nodes shaped as PyTorch exports them, which the converter
turns into While loops (a bidirectional one into two, the backward one followed by a `Reverse`);
their bodies convolve the NCHW hidden state without the ConvertTensor ops it writes around a
main graph's convolutions. The converter crashes (SIGSEGV / SIGABRT) on an ONNX LSTM node that
lacks its `Y_h` and `Y_c` outputs, so the LSTMs declare all three; for a GRU with ONNX's default
`linear_before_reset=0` it writes a graph whose outputs differ from onnxruntime's by about 1e-2
(mnnpy's equal MNN's), so the GRUs use `linear_before_reset=1`, as PyTorch does.
"""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default=os.path.join(ROOT, "tests", "data", "control_flow"))
    ap.add_argument("--only", nargs="*", choices=sorted(MODELS))
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    for name in args.only or sorted(MODELS):
        make(name, args.out)
    rows = []
    for name in sorted(MODELS):
        doc = " ".join((MODELS[name].__doc__ or "").split())
        with np.load(os.path.join(args.out, f"{name}.npz")) as z:
            cases = len({k.rsplit("@", 1)[1] for k in z.files})
            mnn = len({k.rsplit("@", 1)[1] for k in z.files if k.startswith("mnn:")})
        rows.append(f"| `{name}.mnn` | {doc} | {cases} ({mnn} with MNN outputs) |")
    with open(os.path.join(args.out, "README.md"), "w") as f:
        f.write(README.format(rows="\n".join(rows)))


if __name__ == "__main__":
    main()
