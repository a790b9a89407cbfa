"""pymnn's legacy Session API: ``mnnpy.compat`` and, when installed, MNN's own ``MNN`` module.

Tests taking the ``mnn`` fixture run the same legacy-style code against both modules (the
``MNN`` variant is skipped without the wheel). Error cases where pymnn crashes or silently
copies wrong data, and mnnpy's additions, are tested on ``mnnpy.compat`` alone, in
``test_compat_errors.py``. Only ``MNN`` is imported, never ``MNN.tools`` (its logger installs
packages and uploads usage logs).
"""

from __future__ import annotations

import importlib
import warnings
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import pytest

import mnnpy.compat as compat

DATA = Path(__file__).resolve().parent.parent / "data"
CONV = str(DATA / "conv_relu_pool_fc.mnn")
NHWC = str(DATA / "nhwc_dformat.mnn")
CONV_OPS = {
    "conv_3": "Convolution",
    "maxpool_7": "Pooling",
    "conv_11": "Convolution",
    "logits__matmul_converted": "Convolution",
    "prob": "Softmax",
}


def import_module(name: str) -> ModuleType:
    """``mnnpy.compat``, or MNN's wheel (skipping the test when it is not installed)."""
    if name == "MNN":
        return pytest.importorskip("MNN")
    return importlib.import_module(name)


@pytest.fixture(params=["mnnpy.compat", "MNN"])
def mnn(request: pytest.FixtureRequest) -> ModuleType:
    return import_module(request.param)


@pytest.fixture(scope="module")
def golden() -> dict[str, np.ndarray]:
    return dict(np.load(DATA / "conv_relu_pool_fc.npz"))


@pytest.fixture(scope="module")
def golden_nhwc() -> dict[str, np.ndarray]:
    return dict(np.load(DATA / "nhwc_dformat.npz"))


def open_session(mnn: ModuleType, path: str = CONV, config: Any = None) -> tuple[Any, Any]:
    """An interpreter and a one-thread session (fallback warnings silenced)."""
    interpreter = mnn.Interpreter(path)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        session = interpreter.createSession(config or {"numThread": 1})
    return interpreter, session


def feed(mnn: ModuleType, interpreter: Any, session: Any, x: np.ndarray, dim: int) -> None:
    """Copy ``x`` (in layout ``dim``) into the session's input through a host tensor."""
    host = mnn.Tensor(x.shape, mnn.Halide_Type_Float, x, dim)
    assert interpreter.getSessionInput(session).copyFrom(host) is True


def fetch(mnn: ModuleType, interpreter: Any, session: Any, *name: str) -> np.ndarray:
    """An output (the first, or ``name``) copied into a Caffe host tensor."""
    output = interpreter.getSessionOutput(session, *name)
    host = mnn.Tensor(output.getShape(), mnn.Halide_Type_Float, mnn.Tensor_DimensionType_Caffe)
    assert output.copyToHostTensor(host) is True
    return np.array(host.getNumpyData())


def recorder(calls: list[str], result: bool) -> Any:
    """A ``(tensors, name)`` callback that records the name and returns ``result``."""

    def callback(tensors: Any, name: str) -> bool:
        calls.append(name)
        return result

    return callback


def legacy_script(mnn: ModuleType, x: np.ndarray) -> np.ndarray:
    """The classic pymnn example, as a pymnn user writes it."""
    interpreter = mnn.Interpreter(CONV)
    session = interpreter.createSession({"numThread": 1})
    input_tensor = interpreter.getSessionInput(session)
    tmp_input = mnn.Tensor((1, 3, 32, 32), mnn.Halide_Type_Float, x, mnn.Tensor_DimensionType_Caffe)
    input_tensor.copyFrom(tmp_input)
    assert interpreter.runSession(session) == 0
    output_tensor = interpreter.getSessionOutput(session)
    tmp_output = mnn.Tensor((1, 10), mnn.Halide_Type_Float, mnn.Tensor_DimensionType_Caffe)
    output_tensor.copyToHostTensor(tmp_output)
    return np.array(tmp_output.getNumpyData())


# -- scripts ------------------------------------------------------------------------------------
def test_legacy_script_matches_golden(mnn: ModuleType, golden: dict[str, np.ndarray]) -> None:
    out = legacy_script(mnn, golden["input:x"])
    np.testing.assert_allclose(out, golden["output:prob"], rtol=1e-5, atol=1e-6)


def _flows(mnn: ModuleType) -> list[np.ndarray]:
    """Random input, resized batch, a saved inner tensor, the NHWC model: every output."""
    rng = np.random.default_rng(0)
    results = [legacy_script(mnn, rng.random((1, 3, 32, 32), dtype=np.float32))]
    interpreter, session = open_session(mnn, config={"numThread": 2, "saveTensors": ("relu_5",)})
    interpreter.resizeTensor(interpreter.getSessionInput(session), (2, 3, 40, 40))
    assert interpreter.resizeSession(session) is True
    x = rng.random((2, 3, 40, 40), dtype=np.float32)
    feed(mnn, interpreter, session, x, mnn.Tensor_DimensionType_Caffe)
    assert interpreter.runSession(session) == 0
    results += [
        fetch(mnn, interpreter, session, "prob"),
        fetch(mnn, interpreter, session, "relu_5"),
    ]
    interpreter, session = open_session(mnn, NHWC)
    feed(mnn, interpreter, session, rng.random((1, 16, 16, 3), dtype=np.float32), 0)
    assert interpreter.runSession(session) == 0
    return results + [fetch(mnn, interpreter, session)]


def test_same_results_as_mnn() -> None:
    theirs = _flows(import_module("MNN"))
    ours = _flows(compat)
    assert [a.shape for a in ours] == [(1, 10), (2, 10), (2, 8, 40, 40), (1, 10)]
    for a, b in zip(ours, theirs, strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)


def test_resize_flow(mnn: ModuleType, golden: dict[str, np.ndarray]) -> None:
    interpreter, session = open_session(mnn)
    input_tensor = interpreter.getSessionInput(session)
    interpreter.resizeTensor(input_tensor, (2, 3, 40, 40))
    assert input_tensor.getShape() == (2, 3, 40, 40)
    assert interpreter.getSessionInfo(session, 3) != 0  # RESIZE_STATUS: needs a resize
    assert interpreter.runSession(session) == 3  # COMPUTE_SIZE_ERROR before resizeSession
    assert interpreter.resizeSession(session) is True
    assert interpreter.getSessionInfo(session, 3) == 0
    x = np.zeros((2, 3, 40, 40), np.float32)
    x[1, :, :32, :32] = golden["input:x"][0]
    feed(mnn, interpreter, session, x, mnn.Tensor_DimensionType_Caffe)
    assert interpreter.runSession(session) == 0
    out = fetch(mnn, interpreter, session)
    assert out.shape == (2, 10)
    np.testing.assert_allclose(out.sum(axis=1), [1, 1], rtol=1e-5)
    # back to the model's shape: the golden again
    interpreter.resizeTensor(input_tensor, (1, 3, 32, 32))
    interpreter.resizeSession(session)
    feed(mnn, interpreter, session, golden["input:x"], mnn.Tensor_DimensionType_Caffe)
    assert interpreter.runSession(session) == 0
    np.testing.assert_allclose(fetch(mnn, interpreter, session), golden["output:prob"], atol=1e-6)


def test_tensorflow_layout_input(mnn: ModuleType, golden: dict[str, np.ndarray]) -> None:
    interpreter, session = open_session(mnn)
    nhwc = golden["input:x"].transpose(0, 2, 3, 1).copy()
    feed(mnn, interpreter, session, nhwc, mnn.Tensor_DimensionType_Tensorflow)
    assert interpreter.runSession(session) == 0
    np.testing.assert_allclose(fetch(mnn, interpreter, session), golden["output:prob"], atol=1e-6)


@pytest.mark.parametrize("layout", ["Tensorflow", "Caffe"])
def test_nhwc_model(mnn: ModuleType, golden_nhwc: dict[str, np.ndarray], layout: str) -> None:
    interpreter, session = open_session(mnn, NHWC)
    input_tensor = interpreter.getSessionInput(session)
    assert input_tensor.getShape() == (1, 16, 16, 3)
    assert input_tensor.getDimensionType() == mnn.Tensor_DimensionType_Tensorflow
    x = golden_nhwc["input:x"]
    dim = getattr(mnn, f"Tensor_DimensionType_{layout}")
    feed(mnn, interpreter, session, x if layout == "Tensorflow" else x.transpose(0, 3, 1, 2), dim)
    assert interpreter.runSession(session) == 0
    output = interpreter.getSessionOutput(session)
    np.testing.assert_allclose(output.getNumpyData(), golden_nhwc["output:y"], atol=1e-5)


def test_nhwc_model_resize(mnn: ModuleType, golden_nhwc: dict[str, np.ndarray]) -> None:
    interpreter, session = open_session(mnn, NHWC)
    interpreter.resizeTensor(interpreter.getSessionInput(session), (2, 16, 16, 3))
    interpreter.resizeSession(session)
    x = golden_nhwc["input:x"]
    both = np.concatenate([x, x[:, ::-1]]).copy()
    feed(mnn, interpreter, session, both, mnn.Tensor_DimensionType_Tensorflow)
    assert interpreter.runSession(session) == 0
    out = fetch(mnn, interpreter, session)
    assert out.shape == (2, 10)
    np.testing.assert_allclose(out[0], golden_nhwc["output:y"][0], atol=1e-5)


def test_input_output_lookup(mnn: ModuleType) -> None:
    interpreter, session = open_session(mnn)
    assert list(interpreter.getSessionInputAll(session)) == ["x"]
    assert list(interpreter.getSessionOutputAll(session)) == ["prob"]
    assert interpreter.getSessionInput(session, "x").getShape() == (1, 3, 32, 32)
    assert interpreter.getSessionOutput(session, "prob").getShape() == (1, 10)
    inputs = interpreter.getSessionInputAll(session)
    assert inputs["x"].getDataType() is mnn.Halide_Type_Float
    assert inputs["x"].getDimensionType() == mnn.Tensor_DimensionType_Caffe
    with pytest.raises(Exception):  # noqa: B017 - pymnn raises a bare Exception
        interpreter.getSessionInput(session, "relu_5")
    with pytest.raises(Exception):  # noqa: B017
        interpreter.getSessionOutput(session, "relu_5")  # not saved
    with pytest.raises(Exception):  # noqa: B017
        interpreter.getSessionInput("not a session")
    with pytest.raises(Exception):  # noqa: B017
        interpreter.runSession("not a session")
    with pytest.raises(Exception):  # noqa: B017
        interpreter.resizeTensor("not a tensor", (1, 3, 8, 8))


def test_save_tensors(mnn: ModuleType, golden: dict[str, np.ndarray]) -> None:
    interpreter, session = open_session(mnn, config={"saveTensors": ("relu_5", "maxpool_7")})
    assert list(interpreter.getSessionOutputAll(session)) == ["maxpool_7", "prob", "relu_5"]
    assert interpreter.getSessionOutput(session).getShape() == (1, 8, 16, 16)  # first by name
    feed(mnn, interpreter, session, golden["input:x"], mnn.Tensor_DimensionType_Caffe)
    assert interpreter.runSession(session) == 0
    relu = fetch(mnn, interpreter, session, "relu_5")
    pooled = fetch(mnn, interpreter, session, "maxpool_7")
    assert relu.shape == (1, 8, 32, 32) and relu.min() >= 0 and relu.max() > 0
    np.testing.assert_allclose(pooled, relu.reshape(1, 8, 16, 2, 16, 2).max(axis=(3, 5)))
    np.testing.assert_allclose(
        fetch(mnn, interpreter, session, "prob"), golden["output:prob"], atol=1e-6
    )


# -- callbacks ----------------------------------------------------------------------------------
def test_callbacks_with_names(mnn: ModuleType, golden: dict[str, np.ndarray]) -> None:
    interpreter, session = open_session(mnn)
    feed(mnn, interpreter, session, golden["input:x"], mnn.Tensor_DimensionType_Caffe)
    seen: list[tuple[str, str, tuple]] = []

    def begin(tensors: Any, name: str) -> bool:
        seen.append(("begin", name, tuple(t.getShape() for t in tensors)))
        return True

    def end(tensors: Any, name: str) -> bool:
        seen.append(("end", name, tuple(t.getShape() for t in tensors)))
        if name == "prob":
            np.testing.assert_allclose(tensors[0].getNumpyData(), golden["output:prob"], atol=1e-6)
        return True

    assert interpreter.runSessionWithCallBack(session, begin, end) == 0
    assert ("begin", "conv_3", ((1, 3, 32, 32),)) in seen
    assert ("end", "conv_3", ((1, 8, 32, 32),)) in seen
    assert ("end", "prob", ((1, 10),)) == seen[-1]
    assert interpreter.runSessionWithCallBack(session) == 0


def test_callbacks_with_info(mnn: ModuleType, golden: dict[str, np.ndarray]) -> None:
    interpreter, session = open_session(mnn)
    feed(mnn, interpreter, session, golden["input:x"], mnn.Tensor_DimensionType_Caffe)
    infos: dict[str, tuple[str, float]] = {}

    def begin(tensors: Any, info: Any) -> bool:
        infos[info.getName()] = (info.getType(), info.getFlops())
        return True

    assert interpreter.runSessionWithCallBackInfo(session, begin, None) == 0
    assert {name: infos[name][0] for name in CONV_OPS} == CONV_OPS
    assert infos["conv_3"][1] == pytest.approx(32 * 32 * 8 * 3 * 9 / 1e6)
    total = sum(flops for _, flops in infos.values())
    assert total == pytest.approx(interpreter.getSessionInfo(session, 1), rel=1e-5)
    assert total == pytest.approx(0.3068, rel=0.05)  # MNN's figure, with its Raster ops
    np.testing.assert_allclose(fetch(mnn, interpreter, session), golden["output:prob"], atol=1e-6)


def test_callback_stop_and_skip(mnn: ModuleType) -> None:
    interpreter, session = open_session(mnn)
    calls: list[str] = []

    def stop_third(tensors: Any, name: str) -> bool:
        calls.append(name)
        return len(calls) < 3

    assert interpreter.runSessionWithCallBack(session, None, stop_third) == 11  # CALL_BACK_STOP
    assert len(calls) == 3
    skipped: list[str] = []
    assert interpreter.runSessionWithCallBack(session, recorder(skipped, False), None) == 0
    assert "conv_3" in skipped and "prob" in skipped
    info_calls: list[str] = []

    def stop_info(tensors: Any, info: Any) -> bool:
        info_calls.append(info.getName())
        return False

    assert interpreter.runSessionWithCallBackInfo(session, None, stop_info) == 11
    assert len(info_calls) == 1


def test_callback_exception_propagates(mnn: ModuleType) -> None:
    interpreter, session = open_session(mnn)

    def boom(tensors: Any, name: str) -> bool:
        raise ValueError("boom")

    # pymnn raises SystemError; mnnpy.compat the callback's own exception
    expected = ValueError if mnn is compat else Exception
    with pytest.raises(expected):
        interpreter.runSessionWithCallBack(session, boom, None)


def test_release_mode_skips_callbacks(mnn: ModuleType) -> None:
    interpreter = mnn.Interpreter(CONV)
    interpreter.setSessionMode(1)  # Session_Release
    session = interpreter.createSession({"numThread": 1})
    calls: list[str] = []
    assert interpreter.runSessionWithCallBack(session, recorder(calls, True), None) == 0
    assert calls == []
    interpreter.setSessionMode(0)  # Session_Debug
    session = interpreter.createSession({"numThread": 1})
    assert interpreter.runSessionWithCallBack(session, recorder(calls, True), None) == 0
    assert "conv_3" in calls


# -- sessions -----------------------------------------------------------------------------------
def test_session_info(mnn: ModuleType) -> None:
    interpreter, session = open_session(mnn, config={"numThread": 2})
    memory, flops = interpreter.getSessionInfo(session, 0), interpreter.getSessionInfo(session, 1)
    assert isinstance(memory, float) and memory > 0
    assert isinstance(flops, float) and flops == pytest.approx(0.3068, rel=0.05)
    assert isinstance(interpreter.getSessionInfo(session, 2), int)  # the major backend
    assert interpreter.getSessionInfo(session, 3) == 0


@pytest.mark.parametrize(
    "config",
    [
        {"backend": "CPU", "precision": "low", "memory": 2, "power": 1, "numThread": 2},
        {"backend": "OPENCL", "backupType": "CPU", "precision": "high"},  # falls back to CPU
        {"backend": 3, "precision": "normal", "memory": "low"},
        {"backend": "AUTO", "precision": 2, "unknownKey": 1},
        {"numThread": 0},
        {"inputPaths": ("x",), "outputPaths": ("prob",)},
    ],
)
def test_create_session_configs(
    mnn: ModuleType, golden: dict[str, np.ndarray], config: dict[str, Any]
) -> None:
    interpreter, session = open_session(mnn, config=config)
    feed(mnn, interpreter, session, golden["input:x"], mnn.Tensor_DimensionType_Caffe)
    assert interpreter.runSession(session) == 0
    np.testing.assert_allclose(fetch(mnn, interpreter, session), golden["output:prob"], atol=1e-5)


@pytest.mark.parametrize(
    "config",
    [{"backend": "FOO"}, {"numThread": "2"}, {"numThread": 2.0}, {"saveTensors": "relu_5"}],
)
def test_create_session_rejects(mnn: ModuleType, config: dict[str, Any]) -> None:
    interpreter = mnn.Interpreter(CONV)
    with pytest.raises(Exception):  # noqa: B017
        interpreter.createSession(config)


def test_create_runtime(mnn: ModuleType, golden: dict[str, np.ndarray]) -> None:
    interpreter = mnn.Interpreter(CONV)
    runtime, found = mnn.Interpreter.createRuntime(({"numThread": 1},))
    assert found == (True,)
    session = interpreter.createSession({"numThread": 1}, runtime)
    feed(mnn, interpreter, session, golden["input:x"], mnn.Tensor_DimensionType_Caffe)
    assert interpreter.runSession(session) == 0
    np.testing.assert_allclose(fetch(mnn, interpreter, session), golden["output:prob"], atol=1e-6)


def test_no_op_settings(mnn: ModuleType, tmp_path: Path) -> None:
    interpreter, session = open_session(mnn)
    assert interpreter.getModelVersion() == "3.6.1"
    assert interpreter.setCacheFile(str(tmp_path / "cache")) is None
    assert interpreter.setSessionHint(0, 4) is None
    assert interpreter.updateCacheFile(session, 0) == 0
    assert interpreter.cache() is None and interpreter.removeCache() is None
    assert session.cache() is None and session.removeCache() is None
    assert isinstance(mnn.version(), str)
    assert interpreter.runSession(session) == 0


def test_bad_model_files(mnn: ModuleType, tmp_path: Path) -> None:
    with pytest.raises(Exception):  # noqa: B017
        mnn.Interpreter(str(tmp_path / "missing.mnn"))
    with pytest.raises(Exception):  # noqa: B017
        mnn.Interpreter(str(DATA / "README.md"))


# -- tensors ------------------------------------------------------------------------------------
def test_tensor_from_sequences(mnn: ModuleType) -> None:
    caffe = mnn.Tensor_DimensionType_Caffe
    t = mnn.Tensor((1, 3), mnn.Halide_Type_Float, (1.0, 2.0, 3.0), caffe)
    assert t.getShape() == (1, 3) and t.getData() == (1.0, 2.0, 3.0)
    assert t.getDataType() is mnn.Halide_Type_Float and t.getDimensionType() == caffe
    np.testing.assert_array_equal(t.getNumpyData(), [[1, 2, 3]])
    t = mnn.Tensor([2, 2], mnn.Halide_Type_Int, [1, 2, 3, 4], caffe)
    assert t.getData() == (1, 2, 3, 4) and t.getDataType() is mnn.Halide_Type_Int
    assert t.getNumpyData().dtype == np.int32
    t = mnn.Tensor([4], mnn.Halide_Type_Uint8, [0, 1, 2, 255], caffe)
    assert t.getData() == (0, 1, 2, 255) and t.getDataType() is mnn.Halide_Type_Uint8
    t = mnn.Tensor((), mnn.Halide_Type_Float, (5.0,), caffe)
    assert t.getShape() == () and t.getData() == (5.0,)


def test_tensor_from_buffers(mnn: ModuleType) -> None:
    caffe = mnn.Tensor_DimensionType_Caffe
    data = np.array([1.0, 2.0, 3.0], dtype=np.float32)
    for source in (data, data.tobytes(), data.__array_interface__["data"][0]):
        t = mnn.Tensor([1, 3], mnn.Halide_Type_Float, source, caffe)
        assert t.getData() == (1.0, 2.0, 3.0)
    copy = mnn.Tensor([1, 3], mnn.Halide_Type_Float, t.getHost(), caffe)
    assert copy.getData() == (1.0, 2.0, 3.0)
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    assert mnn.Tensor([2, 3], mnn.Halide_Type_Float, a.T, caffe).getData() == (0, 3, 1, 4, 2, 5)
    t = mnn.Tensor([2, 2], mnn.Halide_Type_Int64, np.arange(4, dtype=np.int64), caffe)
    assert t.getDataType() is mnn.Halide_Type_Int64 and t.getData() == (0, 1, 2, 3)
    t = mnn.Tensor([2, 2], mnn.Halide_Type_Double, np.arange(4, dtype=np.float32), caffe)
    assert t.getDataType() is mnn.Halide_Type_Float  # Double tensors hold float32


def test_tensor_zeros_empty_and_views(mnn: ModuleType) -> None:
    t = mnn.Tensor([2, 3], mnn.Halide_Type_Float, mnn.Tensor_DimensionType_Tensorflow)
    assert t.getShape() == (2, 3) and t.getData() == (0.0,) * 6
    assert t.getDimensionType() == mnn.Tensor_DimensionType_Tensorflow
    empty = mnn.Tensor()
    assert empty.getShape() is None and empty.getData() is None and repr(empty) == "array([])"
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    t = mnn.Tensor([2, 3], mnn.Halide_Type_Float, a, mnn.Tensor_DimensionType_Caffe)
    view = t.getNumpyData()
    view[0, 0] = 42
    assert t.getData()[0] == 42 and a[0, 0] == 0  # a view of the tensor, a copy of the data
    assert "42" in repr(t)


@pytest.mark.parametrize(
    "args",
    [
        ((1, 3), "Float", (1.0, 2.0), 1),  # too few values
        ((1, 3), "Float", np.zeros(4, np.float32), 1),  # wrong size
        ((2, 2), "Float", np.arange(4, dtype=np.float64), 1),  # wrong ndarray dtype
        ((2, 2), "Int", np.arange(4, dtype=np.float32), 1),
        ((2, 2), "Int", [1.7, 2, 3, 4], 1),  # floats into ints
        ((1, 3), "Float", b"abc", 1),  # wrong byte count
        ((1, 3), "Float", "abc", 1),
        ((2, 2), "Float", [1, 2, 3, "x"], 1),
        ((1, 3), "float", (1.0, 2.0, 3.0), 1),  # not a Halide type
        ((1, 3), "Float"),  # two arguments need a tensor first
        (("a", 3), "Float", 1),
        ((1,), "Float", (1.0,), 1, 5),
    ],
)
def test_tensor_constructor_errors(mnn: ModuleType, args: tuple) -> None:
    args = tuple(
        getattr(mnn, f"Halide_Type_{a}") if isinstance(a, str) and a in ("Float", "Int") else a
        for a in args
    )
    with pytest.raises(Exception):  # noqa: B017 - pymnn: TypeError / SystemError
        mnn.Tensor(*args)


def test_save_tensors_of_folded_shape_values(tmp_path: Path) -> None:
    """A saved tensor that only folded ops read (no memory in the session) holds its value."""
    from tests.ops.test_shape import converter_shape_subgraph_net

    path = tmp_path / "shape.mnn"
    path.write_bytes(converter_shape_subgraph_net())
    interpreter = compat.Interpreter(str(path))
    session = interpreter.createSession({"saveTensors": ("head", "count")})
    shape = (2, 5, 3, 1)
    assert interpreter.runSession(session) == 0
    head = interpreter.getSessionOutput(session, "head")
    assert head.getShape() == (2,)
    np.testing.assert_array_equal(np.array(head.getNumpyData()), shape[:2])
    count = interpreter.getSessionOutput(session, "count")
    assert int(np.array(count.getNumpyData())) == len(shape) - 2
