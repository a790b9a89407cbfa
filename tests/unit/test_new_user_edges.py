"""What a new user hits first (issue 20 part 6).

The CLI's --input names, the default thread count, py.typed, warnings attributed to the user's
line, non-MNN files named with how to convert them, corrupted files naming the broken field,
misspelled op_backend names, and ``mnnpy.check`` / ``python -m mnnpy check``.
"""

from __future__ import annotations

import io
import os
import pickle
import subprocess
import sys
import warnings
import zipfile
from pathlib import Path
from types import SimpleNamespace

import flatbuffers
import numpy as np
import pytest

import mnnpy
import mnnpy.compat as MNN
from mnnpy._schema.MNN.Net import NetT
from mnnpy._schema.MNN.Op import OpT
from mnnpy._schema.MNN.Reshape import ReshapeT
from mnnpy.backend import Backend, BackendInfo, ForwardType, StorageType, registry
from mnnpy.config import default_num_thread
from mnnpy.errors import ErrorCode, InvalidModelError, InvalidValueError
from mnnpy.model_format import identify
from mnnpy.net import OpParameter, OpType, load_net, pack_net
from mnnpy.tensor_format import DimensionFormat
from tests.helpers import input_op, make_single_op_net
from tests.models.test_fuzz import mutate

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "tests" / "data"
BENCH = Path.home() / ".cache" / "mnnpy" / "bench"
XPU = ForwardType.USER_3


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "mnnpy", *args],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
    )


# -- CLI --input -----------------------------------------------------------------------------
def test_cli_run_refuses_an_input_the_model_does_not_have(tmp_path: Path) -> None:
    np.save(tmp_path / "x.npy", np.zeros((1, 4, 15, 15), np.float32))
    r = _cli("run", str(DATA / "residual_add.mnn"), "--input", f"y={tmp_path / 'x.npy'}")
    assert r.returncode == 1
    assert "no input(s) ['y']" in r.stderr and "inputs are ['x']" in r.stderr
    assert "random" not in r.stdout


def test_cli_unnamed_input_needs_a_single_input_model(tmp_path: Path) -> None:
    np.save(tmp_path / "x.npy", np.zeros((1, 4, 15, 15), np.float32))
    r = _cli("run", str(DATA / "residual_add.mnn"), "--input", str(tmp_path / "x.npy"))
    assert r.returncode == 0 and "random" not in r.stdout  # one input: the name is implied
    reshape = ReshapeT()
    reshape.dimType = int(DimensionFormat.NCHW)
    two = make_single_op_net(
        OpType.Reshape,
        [np.zeros((2, 3), np.float32), np.array([3, 2], np.int32)],
        reshape,
        OpParameter.Reshape,
        fmt=DimensionFormat.NCHW,
    )
    (tmp_path / "two.mnn").write_bytes(two)
    r = _cli("run", str(tmp_path / "two.mnn"), "--input", str(tmp_path / "x.npy"))
    assert r.returncode == 1 and "['in0', 'in1']" in r.stderr and "NAME=FILE" in r.stderr


# -- threads ---------------------------------------------------------------------------------
@pytest.mark.parametrize(("cores", "want"), [(1, 1), (2, 2), (3, 3), (4, 4), (64, 4)])
def test_default_threads_are_the_usable_cores_up_to_4(
    monkeypatch: pytest.MonkeyPatch, cores: int, want: int
) -> None:
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(cores)), raising=False)
    assert default_num_thread() == want
    assert mnnpy.ScheduleConfig().num_thread == want


def test_default_threads_without_affinity(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delattr(os, "sched_getaffinity", raising=False)
    monkeypatch.setattr(os, "cpu_count", lambda: 2)
    assert default_num_thread() == 2


def test_default_threads_reach_sessions_and_the_cli() -> None:
    net = mnnpy.Interpreter(DATA / "residual_add.mnn")
    session = net.create_session()
    assert session.backend.num_thread == default_num_thread() == session.info().thread_number
    r = _cli("run", "--runs", "1")
    assert r.returncode == 0, r.stderr
    assert f"with {default_num_thread()} thread(s)" in r.stdout


# -- py.typed --------------------------------------------------------------------------------
def test_py_typed_is_shipped() -> None:
    assert (ROOT / "mnnpy" / "py.typed").is_file()
    text = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    package_data = text.split("[tool.setuptools.package-data]", 1)[1].split("\n[", 1)[0]
    assert '"mnnpy" = ["py.typed"]' in package_data


# -- warnings point at the caller --------------------------------------------------------------
class _Xpu(Backend):
    """Host memory, plain layouts, ReLU only: everything else falls back to the CPU."""

    forward_type = XPU

    def __init__(self, info: BackendInfo) -> None:
        super().__init__(info.num_thread)
        self.held: list = []

    def storage_format(self, tensor):
        return tensor.dimension_format

    def on_acquire_buffer(self, tensor, storage_type):
        tensor.describe.backend, tensor.describe.storage_type = self, storage_type
        if storage_type == StorageType.STATIC:
            tensor.host = np.zeros(tensor.storage_elements, tensor.dtype)
        else:
            self.held.append(tensor)

    def on_release_buffer(self, tensor, storage_type):
        pass

    def on_allocate_buffer(self):
        for t in self.held:
            t.host = np.zeros(t.storage_elements, t.dtype)

    def on_clear_buffer(self):
        for t in self.held:
            t.host = None
        self.held = []

    def on_copy_buffer(self, src, dst):
        dst.copy_from_host_tensor(src)


class _XRelu(mnnpy.Execution):
    def on_execute(self, inputs, outputs):
        np.maximum(inputs[0].host, 0, out=outputs[0].host)


@_Xpu.register_creator(OpType.ReLU)
def _relu(op, inputs, outputs, backend):
    return _XRelu(backend)


class _Creator:
    def on_create(self, info):
        return _Xpu(info)


@pytest.fixture
def xpu():
    registry._CREATORS.pop(XPU, None)
    assert mnnpy.insert_extra_backend_creator(XPU, _Creator())
    yield XPU
    registry._CREATORS.pop(XPU, None)


def _chain(types: list[tuple[int, str]]) -> bytes:
    """x (NCHW 2x5x3x3) through one-input ops in order; the last writes y."""
    net = NetT()
    net.tensorName = ["x"] + [f"t{i}" for i in range(len(types) - 1)] + ["y"]
    ops = [input_op("x", 0, (2, 5, 3, 3), fmt=DimensionFormat.NCHW)]
    for i, (op_type, name) in enumerate(types):
        op = OpT()
        op.type, op.name, op.inputIndexes, op.outputIndexes = op_type, name, [i], [i + 1]
        ops.append(op)
    net.oplists, net.outputName = ops, ["y"]
    return pack_net(net)


CHAIN = [(OpType.ReLU, "r1"), (OpType.Sigmoid, "sig"), (OpType.ReLU, "r2")]


def test_fallback_warning_points_at_the_users_line(xpu: ForwardType) -> None:
    net = mnnpy.Interpreter.from_buffer(_chain(CHAIN))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        session = net.create_session(mnnpy.ScheduleConfig(type=xpu))  # the line warned about
        net.resize_tensor(net.get_session_input(session), (1, 5, 3, 3))
        net.resize_session(session)
        sess = mnnpy.InferenceSession(_chain(CHAIN), backend="user_3")
    fell = [w for w in caught if "fell back" in str(w.message)]
    assert len(fell) == 2 and sess.session.placement()[1].fell_back
    assert all(w.filename == __file__ for w in fell), [w.filename for w in fell]


def test_compat_warning_points_at_the_users_line() -> None:
    interp = MNN.Interpreter(str(DATA / "residual_add.mnn"))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        interp.createSession({"backend": 11})  # USER_3 is not registered: warns, uses the CPU
    assert caught and all(w.filename == __file__ for w in caught)


# -- files that are not MNN models ----------------------------------------------------------
def _tflite_like() -> bytes:
    builder = flatbuffers.Builder(64)
    builder.StartObject(1)
    builder.PrependInt32Slot(0, 3, 0)
    builder.Finish(builder.EndObject(), file_identifier=b"TFL3")
    return bytes(builder.Output())


def _zip(names: list[str]) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        for name in names:
            z.writestr(name, b"x")
    return buf.getvalue()


def _onnx_bytes() -> bytes:
    onnx = pytest.importorskip("onnx")
    from onnx import TensorProto, helper

    graph = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["y"])],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 3])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    onnx.checker.check_model(model)
    return model.SerializeToString()


def _npy() -> bytes:
    buf = io.BytesIO()
    np.save(buf, np.zeros(3))
    return buf.getvalue()


OTHER_FILES = {
    "TensorFlow Lite": (_tflite_like, "-f TFLITE"),
    "TorchScript": (lambda: _zip(["m/constants.pkl", "m/code/m.py", "m/data.pkl"]), "-f TORCH"),
    "PyTorch checkpoint": (lambda: _zip(["m/data.pkl", "m/data/0"]), "torch.onnx.export"),
    "NumPy .npz": (lambda: _zip(["a.npy", "b.npy"]), "arrays"),
    "HDF5": (lambda: b"\x89HDF\r\n\x1a\n" + bytes(64), "Keras"),
    "NumPy .npy": (_npy, "array"),
    "pickle": (lambda: pickle.dumps({"w": [1, 2]}, protocol=4), "pickle"),
    "Git LFS pointer": (lambda: b"version https://git-lfs.github.com/spec/v1\noid x\n", "git lfs"),
    "HTML": (lambda: b"<!DOCTYPE html><html><body>404</body></html>", "download"),
    "JSON": (lambda: b'{"oplists": []}', "-f JSON"),
}


@pytest.mark.parametrize("kind", sorted(OTHER_FILES))
def test_other_formats_are_named_with_how_to_convert(kind: str, tmp_path: Path) -> None:
    make, hint = OTHER_FILES[kind]
    data = make()
    path = tmp_path / "model.bin"
    path.write_bytes(data)
    with pytest.raises(InvalidModelError) as e:
        mnnpy.Interpreter(path)
    assert e.value.code == ErrorCode.INVALID_VALUE
    assert str(path) in str(e.value) and kind.split()[0] in str(e.value) and hint in str(e.value)
    with pytest.raises(InvalidModelError, match=kind.split()[0]):
        mnnpy.Interpreter.from_buffer(data)


def test_onnx_file_is_named_even_when_truncated(tmp_path: Path) -> None:
    data = _onnx_bytes()
    path = tmp_path / "net.onnx"
    path.write_bytes(data)
    with pytest.raises(InvalidModelError) as e:
        mnnpy.InferenceSession(path)
    text = str(e.value)
    assert "is an ONNX model" in text and "-f ONNX" in text and f"--modelFile {path}" in text
    assert "unpack_from" not in text
    with pytest.raises(InvalidModelError, match=r"ONNX model \(truncated\)"):
        mnnpy.Interpreter.from_buffer(data[: len(data) // 2])
    if (BENCH / "resnet18.onnx").exists():  # a real exported network, when generated
        with pytest.raises(InvalidModelError, match="is an ONNX model"):
            mnnpy.Interpreter(BENCH / "resnet18.onnx")


def test_every_mnn_file_is_still_an_mnn_file() -> None:
    files = sorted(DATA.rglob("*.mnn")) + sorted(BENCH.glob("*.mnn"))
    assert len(files) > 50
    for path in files:
        assert identify(path.read_bytes()) is None, path


# -- corrupted files name the table and field --------------------------------------------------
def test_truncated_model_names_the_field() -> None:
    data = (DATA / "conv_relu_pool_fc.mnn").read_bytes()
    with pytest.raises(InvalidModelError) as e:
        load_net(data[: len(data) // 2])
    assert "Net.bizCode points outside the" in str(e.value)


def test_corrupted_op_names_the_op_and_field() -> None:
    data = bytearray((DATA / "conv_relu_pool_fc.mnn").read_bytes())
    fb = load_net(bytes(data))  # find the weight vector's length word of op 'conv_3' and break it
    weight = fb.ops[2].param.weight
    assert fb.ops[2].name == "conv_3" and weight.size > 100
    start = bytes(data).find(weight.astype("<f4").tobytes())
    data[start - 4 : start] = (1 << 30).to_bytes(4, "little")
    with pytest.raises(InvalidModelError) as e:
        load_net(bytes(data))
    assert "Net.oplists[2] (op 'conv_3') > Op.main > Convolution2D.weight" in str(e.value)


def test_fuzzed_messages_show_no_parser_internals() -> None:
    data = (DATA / "residual_add.mnn").read_bytes()
    rng = np.random.default_rng(5)
    named = 0
    for _ in range(300):
        try:
            load_net(mutate(data, rng))
        except InvalidModelError as e:
            text = e.message
            assert "unpack_from" not in text and "buffer of at least" not in text, text
            if text.startswith("model bytes are corrupted or truncated: "):
                rest = text.removeprefix("model bytes are corrupted or truncated: ")
                assert rest.startswith(("Net.", "Net ", "the root table offset")), text
                named += 1
    assert named > 50


# -- op_backend names --------------------------------------------------------------------------
def test_misspelled_op_backend_name_is_an_error(xpu: ForwardType) -> None:
    net = mnnpy.Interpreter.from_buffer(_chain(CHAIN))
    with pytest.raises(InvalidValueError) as e:
        net.create_session(mnnpy.ScheduleConfig(op_backend={"sigg": ForwardType.CPU}))
    assert "'sigg'" in str(e.value) and "did you mean 'sig'" in str(e.value)
    with pytest.raises(InvalidValueError, match="'Sigmod'.*'Sigmoid'"):
        net.create_session(mnnpy.ScheduleConfig(op_backend={"Sigmod": ForwardType.CPU}))
    with pytest.warns(RuntimeWarning, match="fell back"):
        by_name = net.create_session(
            mnnpy.ScheduleConfig(type=xpu, op_backend={"r2": ForwardType.CPU})
        )
    assert [p.backend for p in by_name.placement()] == ["USER_3", "CPU", "CPU"]
    by_type = net.create_session(mnnpy.ScheduleConfig(op_backend={"Softmax": xpu}))
    assert [p.backend for p in by_type.placement()] == ["CPU", "CPU", "CPU"]


# -- mnnpy.check ----------------------------------------------------------------------------
def test_check_lists_placement_fallbacks_and_what_cannot_run(xpu: ForwardType) -> None:
    chain = [*CHAIN, (OpType.Threshold, "thr"), (OpType.ReLU, "r3")]  # Threshold: no creator
    report = mnnpy.check(_chain(chain), "user_3")
    got = [(op.name, op.backend, op.status) for op in report.ops]
    assert got == [
        ("r1", "USER_3", "runs"),
        ("sig", "CPU", "falls back"),
        ("r2", "USER_3", "runs"),
        ("thr", "", "cannot run"),
        ("r3", "USER_3", "runs"),  # checked after it, with thr's output on the host
    ]
    assert not report.ok and [op.name for op in report.problems] == ["thr"]
    assert "no backend can run op type Threshold" in report.ops[3].reason
    assert report.ops[1].reason == "USER_3: is_op_supported said no"
    text = str(report)
    assert "thr" in text and "cannot run" in text and "1 op(s) cannot run" in text
    registered = "registered: CPU, OPENCL, USER_3"  # in-tree OPENCL is always registered
    with pytest.raises(mnnpy.MNNError, match=f"no backend for USER_2; {registered}"):
        mnnpy.check(_chain(CHAIN), "user_2")


def test_check_reports_content_dependent_ops_before_any_run() -> None:
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    p = ReshapeT()
    p.dimType = int(DimensionFormat.NCHW)
    model = make_single_op_net(
        OpType.Reshape, [x, np.array([3, 2], np.int32)], p, OpParameter.Reshape, fmt=0
    )
    report = mnnpy.check(model)
    (op,) = report.ops
    assert (op.status, op.backend) == ("content-dependent", "CPU") and report.ok
    assert "'in1'" in op.reason
    bad = mnnpy.check(model, inputs={"in1": np.array([4, 2], np.int32)})  # 8 != 6 elements
    assert bad.ops[0].status == "error" and not bad.ok
    with pytest.raises(InvalidValueError, match="no input"):
        mnnpy.check(model, inputs={"nope": x})


def test_check_lists_ops_of_subgraphs() -> None:
    """Subgraphs as ``Net.subgraphs`` holds them (name -> graph with a ``net``)."""
    interp = mnnpy.Interpreter.from_buffer(_chain(CHAIN))
    body = load_net(_chain([(OpType.ReLU, "b1"), (OpType.Threshold, "b2")]))
    interp.net.subgraphs = {"body": SimpleNamespace(name="body", net=body)}  # type: ignore[attr-defined]
    report = mnnpy.check(interp)
    got = [(op.subgraph, op.name, op.status) for op in report.ops]
    assert got[3:] == [("body", "b1", "runs"), ("body", "b2", "cannot run")]
    assert "body" in str(report)


def test_cli_check(tmp_path: Path) -> None:
    r = _cli("check", str(DATA / "conv_relu_pool_fc.mnn"))
    assert r.returncode == 0, r.stderr
    assert "conv_3" in r.stdout and "every op can run" in r.stdout
    (tmp_path / "m.mnn").write_bytes(_chain([(OpType.ReLU, "r1"), (OpType.Threshold, "thr")]))
    r = _cli("check", str(tmp_path / "m.mnn"), "--backend", "cpu")
    assert r.returncode == 1 and "thr" in r.stdout and "cannot run" in r.stdout
    r = _cli("check", str(DATA / "conv_relu_pool_fc.mnn"), "--op-backend", "conv_4=cpu")
    assert r.returncode == 1 and "did you mean 'conv_3'" in r.stderr


def test_check_a_converted_onnx_if(tmp_path: Path) -> None:
    """ONNX If converted by MNN's converter: the If op and, once ``Net`` reads the subgraphs
    table (the control-flow work), the ops of both branches are listed."""
    pytest.importorskip("_tools")
    onnx = pytest.importorskip("onnx")
    from onnx import TensorProto, helper

    sys.path.insert(0, str(ROOT / "tools"))
    from _mnn_convert import mnnconvert

    def branch(name: str, op: str) -> object:
        out = helper.make_tensor_value_info(f"{name}_y", TensorProto.FLOAT, [1, 3])
        return helper.make_graph([helper.make_node(op, ["x"], [f"{name}_y"])], name, [], [out])

    nodes = [
        helper.make_node("ReduceSum", ["x"], ["s"], keepdims=0),
        helper.make_node("Greater", ["s", "zero"], ["c"]),
        helper.make_node(
            "If",
            ["c"],
            ["y"],
            then_branch=branch("then", "Relu"),
            else_branch=branch("else", "Neg"),
        ),
    ]
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 3])],
        initializer=[helper.make_tensor("zero", TensorProto.FLOAT, [], [0.0])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    onnx.save(model, str(tmp_path / "if.onnx"))
    dst = tmp_path / "if.mnn"
    mnnconvert(["-f", "ONNX", "--modelFile", tmp_path / "if.onnx", "--MNNModel", dst], expect=dst)
    report = mnnpy.check(dst)
    main = [op for op in report.ops if not op.subgraph]
    assert main[-1].type == "If" and main[-1].name == "y"
    if "subgraphs" not in mnnpy.net.Net.__dataclass_fields__:  # before the subgraphs are read
        assert main[-1].status == "cannot run" and "If" in main[-1].reason
        return
    inner = [op for op in report.ops if op.subgraph]
    assert len({op.subgraph for op in inner}) == 2
    assert {"ReLU", "UnaryOp"} <= {op.type for op in inner}
    assert all(op.status == "runs" and op.backend == "CPU" for op in inner), inner


def test_check_control_flow_models_with_their_subgraphs() -> None:
    """The control-flow test models (If, Loop as While, Scan), once they and ``Net.subgraphs``
    exist: every op, subgraph ops included, is placed, and each subgraph is listed."""
    files = sorted((DATA / "control_flow").glob("*.mnn"))
    if not files or "subgraphs" not in mnnpy.net.Net.__dataclass_fields__:
        pytest.skip("no control-flow models or subgraphs in this tree")
    for path in files:
        report = mnnpy.check(path)
        assert report.ok, str(report)
        net = mnnpy.Interpreter(path).net
        listed = {op.subgraph for op in report.ops if op.subgraph}
        assert listed == set(net.subgraphs), path  # type: ignore[attr-defined]
