"""``mnnpy.compat`` where it deliberately differs from pymnn: errors instead of silently wrong
copies, crashes or garbage, and mnnpy's additions (see ``mnnpy.compat``'s docstring)."""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import mnnpy.compat as MNN
from mnnpy.compat.tensor import InvalidArgumentError
from mnnpy.errors import ErrorCode, InputDataError, MNNError, NoExecutionError, NotSupportError
from mnnpy.interpreter import MemoryMode, PowerMode, PrecisionMode

DATA = Path(__file__).resolve().parent.parent / "data"
CONV = str(DATA / "conv_relu_pool_fc.mnn")
NHWC = str(DATA / "nhwc_dformat.mnn")
CAFFE, TF, C4 = (
    MNN.Tensor_DimensionType_Caffe,
    MNN.Tensor_DimensionType_Tensorflow,
    MNN.Tensor_DimensionType_Caffe_C4,
)


@pytest.fixture
def conv() -> tuple[Any, Any, Any]:
    interpreter = MNN.Interpreter(CONV)
    session = interpreter.createSession({"numThread": 1})
    return interpreter, session, interpreter.getSessionInput(session)


def host(shape: tuple[int, ...], dim: int = CAFFE, dtype: Any = MNN.Halide_Type_Float) -> Any:
    return MNN.Tensor(shape, dtype, dim)


# -- copies: pymnn returns True and copies garbage or nothing ------------------------------------
@pytest.mark.parametrize(
    "source",
    [
        host((1, 3, 16, 16)),  # smaller
        host((1, 3, 64, 64)),  # larger
        host((3, 32, 32, 1)),  # same element count
        host((1, 3, 32, 32), TF),  # read as NHWC: C = 32 after conversion
        host((1, 3, 32, 32), dtype=MNN.Halide_Type_Int),
        host((1, 3, 32, 32), dtype=MNN.Halide_Type_Int64),
        np.zeros((1, 3, 16, 16), np.float32),
        np.zeros((1, 3, 32, 32), np.float64),
    ],
)
def test_copy_from_mismatch_raises(conv: tuple[Any, Any, Any], source: Any) -> None:
    interpreter, session, input_tensor = conv
    with pytest.raises(InputDataError) as info:
        input_tensor.copyFrom(source)
    assert info.value.code == ErrorCode.INPUT_DATA_ERROR
    assert "cannot copy" in str(info.value)
    assert interpreter.runSession(session) == 0  # the session stays usable


@pytest.mark.parametrize(
    "target", [host((1, 11)), host((10,)), host((1, 10), dtype=MNN.Halide_Type_Int)]
)
def test_copy_to_host_mismatch_raises(conv: tuple[Any, Any, Any], target: Any) -> None:
    interpreter, session, _ = conv
    assert interpreter.runSession(session) == 0
    with pytest.raises(InputDataError):
        interpreter.getSessionOutput(session).copyToHostTensor(target)


def test_copy_argument_kinds(conv: tuple[Any, Any, Any]) -> None:
    _, _, input_tensor = conv
    with pytest.raises(InvalidArgumentError) as info:
        input_tensor.copyFrom([1.0, 2.0])
    assert isinstance(info.value, TypeError) and isinstance(info.value, MNNError)
    with pytest.raises(InvalidArgumentError):
        input_tensor.copyToHostTensor(np.zeros(3))
    with pytest.raises(MNNError, match="empty"):
        MNN.Tensor().copyFrom(input_tensor)


def test_copy_from_ndarray_and_host_to_host(conv: tuple[Any, Any, Any]) -> None:
    interpreter, session, input_tensor = conv
    golden = np.load(DATA / "conv_relu_pool_fc.npz")
    assert input_tensor.copyFrom(golden["input:x"]) is True  # pymnn crashes on an ndarray
    assert interpreter.runSession(session) == 0
    out = interpreter.getSessionOutput(session).getNumpyData()
    np.testing.assert_allclose(out, golden["output:prob"], atol=1e-6)
    a = MNN.Tensor((1, 2, 2, 3), MNN.Halide_Type_Float, list(range(12)), TF)
    b = host((1, 3, 2, 2))
    assert b.copyFrom(a) is True  # pymnn returns False and copies nothing
    np.testing.assert_array_equal(
        b.getNumpyData(), np.arange(12.0).reshape(1, 2, 2, 3).transpose(0, 3, 1, 2)
    )


def test_copy_before_resize_session_raises(conv: tuple[Any, Any, Any]) -> None:
    interpreter, session, input_tensor = conv
    interpreter.resizeTensor(input_tensor, [2, 3, 40, 40])  # a list works too
    with pytest.raises(NoExecutionError, match="resize"):
        input_tensor.copyFrom(host((2, 3, 40, 40)))
    interpreter.resizeSession(session)
    assert input_tensor.copyFrom(host((2, 3, 40, 40))) is True


# -- tensors ------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("args", "error"),
    [
        (((4,), MNN.Halide_Type_Uint8, [1, 2, 3, 300], CAFFE), InputDataError),  # pymnn wraps
        (((2,), MNN.Halide_Type_Int, [1.0, 2.0], CAFFE), InputDataError),
        (((2, -2), MNN.Halide_Type_Float, CAFFE), MNNError),  # pymnn accepts it
        (((2, 2), MNN.Halide_Type_Float, 7), InvalidArgumentError),  # pymnn accepts it
        (((2, 2), MNN.Halide_Type_String, CAFFE), NotSupportError),
        (((1,), MNN.Halide_Type_Float, 8, CAFFE), MNNError),  # an int, not an address
        (((1,), MNN.Halide_Type_Float, 1.5, CAFFE), InvalidArgumentError),
        ((np.zeros(3, np.float64),), InputDataError),  # unsupported dtype
        ((np.zeros(3, np.float32), 9), InvalidArgumentError),
        ((MNN.Tensor(), CAFFE), MNNError),
    ],
)
def test_tensor_constructor_errors(args: tuple, error: type[Exception]) -> None:
    with pytest.raises(error):
        MNN.Tensor(*args)


def test_tensor_from_tensor_converts_layout() -> None:
    nhwc = np.arange(12, dtype=np.float32).reshape(1, 2, 2, 3)
    src = MNN.Tensor((1, 2, 2, 3), MNN.Halide_Type_Float, nhwc, TF)
    caffe = MNN.Tensor(src, CAFFE)  # pymnn: right shape, uninitialized data
    assert caffe.getShape() == (1, 3, 2, 2) and caffe.getDimensionType() == CAFFE
    np.testing.assert_array_equal(caffe.getNumpyData(), nhwc.transpose(0, 3, 1, 2))
    back = MNN.Tensor(caffe, TF)
    np.testing.assert_array_equal(back.getNumpyData(), nhwc)
    packed = MNN.Tensor(caffe, C4)
    assert packed.getDimensionType() == CAFFE  # as pymnn: NC4HW4 reports Caffe
    np.testing.assert_array_equal(packed.getNumpyData(), nhwc.transpose(0, 3, 1, 2))
    from_array = MNN.Tensor(nhwc, TF)
    assert from_array.getShape() == (1, 2, 2, 3) and from_array.getData() == tuple(range(12))
    assert MNN.Tensor(nhwc).getDimensionType() == CAFFE
    same = MNN.Tensor(src)
    assert same.getData() == src.getData() and same.getDimensionType() == TF


def test_tensor_additions() -> None:
    t = MNN.Tensor([2, 2], MNN.Halide_Type_Int64, [1, 2, 3, 4], CAFFE)  # pymnn: ndarray only
    assert t.getDataType() is MNN.Halide_Type_Int64 and t.getElementSize() == 4
    t = MNN.Tensor((2, 3), MNN.Halide_Type_Float, [[1, 2, 3], [4, 5, 6]], CAFFE)  # nested
    assert t.getData() == (1, 2, 3, 4, 5, 6)
    t.fromNumpy(np.full(6, 2, np.float32))  # pymnn's fromNumpy always fails (bytes vs items)
    assert t.getData() == (2.0,) * 6
    with pytest.raises(InputDataError):
        t.fromNumpy(np.zeros(6, np.float64))
    with pytest.raises(InputDataError):
        t.fromNumpy(np.zeros(5, np.float32))
    with pytest.raises(MNNError):
        MNN.Tensor().getElementSize()
    assert repr(MNN.Halide_Type_Float) == "<Halide_Type_Float>"


def test_print_tensor_data(capsys: pytest.CaptureFixture[str]) -> None:
    MNN.Tensor((1, 2), MNN.Halide_Type_Float, (1.5, 2.5), CAFFE).printTensorData()
    assert "1.5" in capsys.readouterr().out


def test_caffe_c4_host_tensor_feeds_nhwc_model() -> None:
    golden = np.load(DATA / "nhwc_dformat.npz")
    interpreter = MNN.Interpreter(NHWC)
    session = interpreter.createSession({"numThread": 1})
    nchw = golden["input:x"].transpose(0, 3, 1, 2).copy()
    packed = MNN.Tensor(nchw.shape, MNN.Halide_Type_Float, nchw, C4)  # pymnn: raw, unpacked
    np.testing.assert_array_equal(packed.getNumpyData(), nchw)
    interpreter.getSessionInput(session).copyFrom(packed)
    assert interpreter.runSession(session) == 0
    output = interpreter.getSessionOutput(session)
    target = MNN.Tensor((1, 10), MNN.Halide_Type_Float, TF)  # pymnn: garbage for 2-D NHWC
    output.copyToHostTensor(target)
    np.testing.assert_allclose(target.getNumpyData(), golden["output:y"], atol=1e-5)


def test_session_tensor_views(conv: tuple[Any, Any, Any]) -> None:
    interpreter, session, input_tensor = conv
    x = np.random.default_rng(0).random((1, 3, 32, 32), dtype=np.float32)
    input_tensor.getNumpyData()[...] = x  # a view of the input's memory, as in pymnn
    assert interpreter.runSession(session) == 0
    np.testing.assert_array_equal(input_tensor.getNumpyData(), x)  # pymnn: may be overwritten
    saved: dict[str, Any] = {}

    def keep(tensors: Any, name: str) -> bool:
        if name == "conv_3":
            saved["relu"] = tensors[0].getNumpyData()  # NC4HW4 inside: an unpacked copy
        return True

    assert interpreter.runSessionWithCallBack(session, None, keep) == 0
    assert saved["relu"].shape == (1, 8, 32, 32) and saved["relu"].min() >= 0


# -- interpreter and sessions -------------------------------------------------------------------
def test_callback_must_return_bool(conv: tuple[Any, Any, Any]) -> None:
    interpreter, session, _ = conv
    with pytest.raises(MNNError, match="must return True or False"):
        interpreter.runSessionWithCallBack(session, lambda tensors, name: None, None)
    assert interpreter.runSessionWithCallBack(session, lambda t, n: np.bool_(True), None) == 0
    with pytest.raises(InvalidArgumentError):
        interpreter.runSessionWithCallBack(session, "not callable", None)
    with pytest.raises(MNNError, match="empty OpInfo"):
        MNN.OpInfo().getName()


def test_run_errors_become_codes(
    conv: tuple[Any, Any, Any], caplog: pytest.LogCaptureFixture
) -> None:
    interpreter, session, _ = conv
    interpreter.releaseSession(session)
    assert interpreter.runSession(session) == ErrorCode.NO_EXECUTION
    assert "released" in caplog.text
    with pytest.raises(NoExecutionError):
        interpreter.getSessionInfo(session, 0)


def test_session_errors(conv: tuple[Any, Any, Any]) -> None:
    interpreter, session, input_tensor = conv
    with pytest.raises(MNNError, match="empty Session"):
        interpreter.runSession(MNN.Session())  # pymnn crashes
    other = MNN.Interpreter(CONV)
    with pytest.raises(MNNError, match="another Interpreter"):
        other.runSession(session)
    with pytest.raises(MNNError, match="not an input"):
        interpreter.resizeTensor(interpreter.getSessionOutput(session), (1, 5))
    with pytest.raises(InvalidArgumentError):
        interpreter.resizeTensor(input_tensor, (1, 3, "a", 32))
    with pytest.raises(MNNError, match="unknown session info code"):
        interpreter.getSessionInfo(session, 9)
    with pytest.raises(InvalidArgumentError):
        interpreter.createSession([])  # pymnn: default session
    with pytest.raises(InvalidArgumentError):
        MNN.Interpreter(b"model.mnn")
    with pytest.raises(MNNError, match="unknown session mode"):
        interpreter.setSessionMode(99)
    with pytest.raises(InvalidArgumentError):
        interpreter.setSessionHint(0, "x")
    with pytest.raises(MNNError) as missing:
        interpreter.setExternalFile("no/such/weights.bin")
    assert missing.value.code == ErrorCode.FILE_NOT_EXIST
    with pytest.raises(InvalidArgumentError):
        interpreter.createSession({"numThread": 1}, runtime="not a runtime")


def test_session_info_numbers(conv: tuple[Any, Any, Any]) -> None:
    interpreter, session, input_tensor = conv
    assert interpreter.getSessionInfo(session, 4) == 1.0  # THREAD_NUMBER, pymnn: int bits
    assert interpreter.getSessionInfo(session, 2) == 0  # CPU (pymnn: 13, CPU_EXTENSION)
    assert interpreter.getSessionInfo(session, 5).thread_number == 1  # ALL: mnnpy's SessionInfo
    interpreter.resizeTensor(input_tensor, (1, 3, 16, 16))
    assert interpreter.getSessionInfo(session, 3) == 2.0


@pytest.mark.parametrize(
    ("config", "error"),
    [
        ({"inputPaths": ("maxpool_7",)}, NotSupportError),
        ({"outputPaths": ("relu_5",)}, NotSupportError),
        ({"backend": None}, InvalidArgumentError),
        ({"memory": 7}, MNNError),
        ({"saveTensors": ("relu_5", 3)}, InvalidArgumentError),
    ],
)
def test_config_errors(config: dict[str, Any], error: type[Exception]) -> None:
    with pytest.raises(error):
        MNN.Interpreter(CONV).createSession(config)


def test_config_honoured() -> None:
    interpreter = MNN.Interpreter(CONV)
    config = {
        "backend": "cpu",
        "numThread": 3,
        "memory": "low",
        "power": "high",
        "precision": "lowBF",
        "saveTensors": ["relu_5"],
    }
    session = interpreter.createSession(config)
    core = session._session.config
    assert core.num_thread == 3 and core.backend_config.memory == MemoryMode.LOW
    assert core.backend_config.power == PowerMode.HIGH
    assert core.backend_config.precision == PrecisionMode.LOW_BF16
    assert "relu_5" in interpreter.getSessionOutputAll(session)
    with pytest.warns(RuntimeWarning, match="METAL"):  # OPENCL is in-tree now
        interpreter.createSession({"backend": "METAL"})
    with pytest.warns(RuntimeWarning, match="type=99"):
        interpreter.createSession({"backend": 99})
    with pytest.warns(RuntimeWarning, match="ignoring precision 'fp16'"):
        interpreter.createSession({"precision": "fp16"})
    with pytest.warns(RuntimeWarning, match="VULKAN"):
        runtime, found = MNN.Interpreter.createRuntime(({"backend": "CPU"}, {"backend": 7}))
    assert found == (True, False)


def test_save_tensors_unknown_name_warns(caplog: pytest.LogCaptureFixture) -> None:
    interpreter = MNN.Interpreter(CONV)
    session = interpreter.createSession({"saveTensors": ("nope", "x", "prob")})
    assert list(interpreter.getSessionOutputAll(session)) == ["prob", "x"]
    assert "nope" in caplog.text


def test_update_session_to_model_copies(tmp_path: Path) -> None:
    interpreter = MNN.Interpreter(CONV)
    session = interpreter.createSession()
    interpreter.updateSessionToModel(session, str(tmp_path / "copy.mnn"))
    assert (tmp_path / "copy.mnn").read_bytes() == Path(CONV).read_bytes()
    assert MNN.Interpreter(str(tmp_path / "copy.mnn")).getModelVersion() == "3.6.1"


def test_not_provided_names() -> None:
    with pytest.raises(AttributeError, match="legacy Session API"):
        MNN.CVImageProcess  # noqa: B018
    with pytest.raises(AttributeError, match="legacy Session API"):
        MNN.CV_ImageFormat_RGB  # noqa: B018
    with pytest.raises(AttributeError, match="no attribute"):
        MNN.Nothing  # noqa: B018
    assert MNN.version() == "3.6.1" and issubclass(MNN.MNNError, Exception)


def test_no_warnings_on_plain_use() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        interpreter = MNN.Interpreter(CONV)
        session = interpreter.createSession({"backend": "CPU", "precision": "normal"})
        assert interpreter.runSession(session) == 0
