"""pymnn's Module API (``MNN.nn``): the same scripts on ``mnnpy.compat`` and MNN's wheel.

Each script loads a module with ``nn.load_module_from_file``, reads ``get_info()`` and runs
``forward`` / ``onForward`` / ``__call__`` on NumPy-backed Vars. On the wheel the Vars are
``MNN.expr.const`` variables; on the facade ``mnnpy.nn.Var`` (no ``MNN.expr`` needed). Outputs
are compared to each other (rtol 1e-3 / atol 1e-4) and, for the control-flow models, to the
MNN Module goldens stored beside them. Only ``MNN`` is imported, never ``MNN.tools``. Error
cases where pymnn crashes or returns nothing are tested on the facade alone.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import pytest

import mnnpy.compat as MNN
from mnnpy.errors import (
    FileNotExistError,
    InputDataError,
    InvalidValueError,
    MNNError,
    NotSupportError,
)
from mnnpy.nn import Var
from tests.helpers import assert_close

DATA = Path(__file__).resolve().parent.parent / "data"
FLOW = DATA / "control_flow"
PLAIN = ["conv_relu_pool_fc", "batch2", "residual_add", "nhwc_dformat", "nhwc_input"]
FLOW_MODELS = sorted(p.stem for p in FLOW.glob("*.mnn"))

MakeVar = Callable[[np.ndarray, str], Any]


def _wheel() -> tuple[ModuleType, MakeVar]:
    mnn = pytest.importorskip("MNN")
    import MNN.expr as F  # noqa: N812 (pymnn's idiom)

    def make(arr: np.ndarray, fmt: str) -> Any:
        dtype = F.int if arr.dtype.kind in "iu" else F.float
        arr = arr.astype(np.int32 if arr.dtype.kind in "iu" else np.float32)
        return F.const(arr, list(arr.shape), getattr(F, fmt), dtype)

    return mnn.nn, make


def _facade() -> tuple[ModuleType, MakeVar]:
    return MNN.nn, lambda arr, fmt: Var(arr, fmt)


@pytest.fixture(params=["mnnpy.compat", "MNN"])
def api(request: pytest.FixtureRequest) -> tuple[ModuleType, MakeVar]:
    return _facade() if request.param == "mnnpy.compat" else _wheel()


def _format_name(fmt: Any) -> str:
    """``NCHW`` for mnnpy's DataFormat.NCHW and for pymnn's ``data_format.NCHW``."""
    name = getattr(fmt, "name", None)
    return name if isinstance(name, str) else str(fmt).split(".")[-1]


def script(
    nn: ModuleType, make: MakeVar, path: Path, feeds: list[list[np.ndarray]]
) -> tuple[dict[str, Any], list[list[np.ndarray]]]:
    """What a pymnn user writes: load, read the info, forward each feed; plain results back.

    Each input Var is made in the format the model declares for it (``get_info()["inputs"]``).
    """
    net = nn.load_module_from_file(str(path), [], [], thread_num=1)
    info = net.get_info()
    desc = {
        "version": info["version"],
        "bizCode": info["bizCode"],
        "inputNames": info["inputNames"],
        "outputNames": info["outputNames"],
        "inputs": [(v.shape, _format_name(v.data_format)) for v in info["inputs"]],
    }
    results = []
    for feed in feeds:
        vars_ = [make(a, fmt) for a, (_, fmt) in zip(feed, desc["inputs"], strict=True)]
        if len(vars_) == 1:
            outs = [net.forward(vars_[0]), net(vars_[0])]
            assert_close(np.array(outs[1].read()), np.array(outs[0].read()))
            results.append([np.array(outs[0].read())])
        else:
            results.append([np.array(v.read()) for v in net.onForward(vars_)])
    return desc, results


def _flow_feeds(name: str) -> tuple[list[list[np.ndarray]], list[list[np.ndarray]]]:
    """Per case with MNN outputs: the inputs (model order) and MNN's Module outputs."""
    golden = dict(np.load(FLOW / f"{name}.npz"))
    net = MNN.nn.load_module_from_file(str(FLOW / f"{name}.mnn"), [], [])
    ins, outs = net.input_names, net.output_names
    cases = sorted({int(k.split("@")[1]) for k in golden if k.startswith("mnn:")})
    feeds = [[golden[f"input:{n}@{c}"] for n in ins] for c in cases]
    return feeds, [[golden[f"mnn:{n}@{c}"] for n in outs] for c in cases]


def _plain_feeds(name: str) -> list[list[np.ndarray]]:
    info = MNN.nn.load_module_from_file(str(DATA / f"{name}.mnn"), [], []).get_info()
    rng = np.random.default_rng(len(name))
    shapes = [v.shape for v in info["inputs"]]
    first = [rng.standard_normal(s).astype(np.float32) for s in shapes]
    batch3 = [rng.standard_normal([3, *s[1:]]).astype(np.float32) for s in shapes]
    return [first, batch3, first]  # a new batch resizes; the first shape again resizes back


def _compare(ours: list[list[np.ndarray]], theirs: list[list[np.ndarray]]) -> None:
    assert len(ours) == len(theirs)
    for a, b in zip(ours, theirs, strict=True):
        assert len(a) == len(b)
        for x, y in zip(a, b, strict=True):
            assert x.shape == y.shape
            assert_close(x, y.astype(x.dtype))


@pytest.mark.parametrize("name", PLAIN)
def test_plain_models_match_wheel(name: str) -> None:
    feeds = _plain_feeds(name)
    if name == "batch2":
        feeds = feeds[:1]  # its Reshape fixes the batch at 2
    ours = script(*_facade(), DATA / f"{name}.mnn", feeds)
    theirs = script(*_wheel(), DATA / f"{name}.mnn", feeds)
    assert ours[0] == theirs[0]
    _compare(ours[1], theirs[1])


@pytest.mark.parametrize("name", FLOW_MODELS)
def test_control_flow_models_match_wheel_and_goldens(name: str) -> None:
    feeds, golden = _flow_feeds(name)
    ours = script(*_facade(), FLOW / f"{name}.mnn", feeds)
    _compare(ours[1], golden)
    theirs = script(*_wheel(), FLOW / f"{name}.mnn", feeds)
    assert ours[0] == theirs[0]
    _compare(ours[1], theirs[1])


def test_nhwc_model_takes_nchw_vars(api: tuple[ModuleType, MakeVar]) -> None:
    """A Var's format is honoured: NCHW data into an NHWC-declared input gives the same."""
    nn, make = api
    golden = dict(np.load(DATA / "nhwc_dformat.npz"))
    x = golden["input:x"]
    net = nn.load_module_from_file(str(DATA / "nhwc_dformat.mnn"), [], [], thread_num=1)
    nchw = np.ascontiguousarray(x.transpose(0, 3, 1, 2))
    y = np.array(net.forward(make(nchw, "NCHW")).read())
    assert_close(y, golden["output:y"])
    y = np.array(net.forward(make(x, "NHWC")).read())
    assert_close(y, golden["output:y"])


def test_named_inputs_and_outputs_in_given_order(api: tuple[ModuleType, MakeVar]) -> None:
    nn, make = api
    feeds, golden = _flow_feeds("loop_const")
    path = str(FLOW / "loop_const.mnn")
    net = nn.load_module_from_file(path, ["v0", "x"], ["is", "v_final"], thread_num=1)
    assert net.get_info()["inputNames"] == ["v0", "x"]
    assert net.get_info()["outputNames"] == ["is", "v_final"]
    x, v0 = feeds[0]
    outs = net.onForward([make(v0, "NCHW"), make(x, "NCHW")])
    assert_close(np.array(outs[0].read()), golden[0][2].astype(np.int32))
    assert_close(np.array(outs[1].read()), golden[0][0])


def test_runtime_manager_config(api: tuple[ModuleType, MakeVar]) -> None:
    nn, make = api
    golden = dict(np.load(DATA / "conv_relu_pool_fc.npz"))
    manager = nn.create_runtime_manager(({"backend": "CPU", "numThread": 2, "precision": "low"},))
    net = nn.load_module_from_file(
        str(DATA / "conv_relu_pool_fc.mnn"), ["x"], ["prob"], runtime_manager=manager
    )
    y = net.forward(make(golden["input:x"], "NCHW"))
    assert_close(np.array(y.read()), golden["output:prob"])


# -- the facade alone: where pymnn crashes, prints and returns [], or computes garbage ----------


CONV = str(DATA / "conv_relu_pool_fc.mnn")


@pytest.mark.parametrize(
    ("inputs", "outputs", "error", "match"),
    [
        (["nope"], ["prob"], InvalidValueError, "no input 'nope'.*\\['x'\\]"),
        (["x"], ["nope"], InvalidValueError, "no output 'nope'.*\\['prob'\\]"),
        (["x"], ["relu_5"], NotSupportError, "inner tensor"),
        (["relu_5"], [], NotSupportError, "inner tensor"),
        (["x", "x"], [], InvalidValueError, "repeat"),
        ("x", [], InvalidValueError, "list of str"),
    ],
)
def test_bad_names(inputs: Any, outputs: Any, error: type[MNNError], match: str) -> None:
    with pytest.raises(error, match=match):
        MNN.nn.load_module_from_file(CONV, inputs, outputs)


def test_input_left_out() -> None:
    with pytest.raises(InvalidValueError, match="leave out.*'M'"):
        MNN.nn.load_module_from_file(str(FLOW / "loop_count.mnn"), ["x", "p0"], [])


def test_missing_file_and_bad_keywords() -> None:
    with pytest.raises(FileNotExistError, match="nonexist"):
        MNN.nn.load_module_from_file(str(DATA / "nonexist.mnn"), [], [])
    with pytest.raises(InvalidValueError, match="unknown keyword.*'threads'"):
        MNN.nn.load_module_from_file(CONV, [], [], threads=2)
    with pytest.raises(InvalidValueError, match="unknown backend"):
        MNN.nn.load_module_from_file(CONV, [], [], backend="tpu")
    with pytest.raises(InvalidValueError, match="unknown memory mode"):
        MNN.nn.load_module_from_file(CONV, [], [], memory_mode=7)
    with pytest.raises(InvalidValueError, match="thread_num"):
        MNN.nn.load_module_from_file(CONV, [], [], thread_num=0)
    with pytest.raises(NotImplementedError, match="load_module"):
        MNN.nn.load_module([], [], False)


def test_bad_forward_inputs() -> None:
    net = MNN.nn.load_module_from_file(CONV, [], [])
    x = np.zeros((1, 3, 32, 32), np.float32)
    with pytest.raises(MNNError, match="Convolution|channel|conv_3"):
        net.forward(np.zeros((1, 4, 32, 32), np.float32))  # pymnn: prints, returns []
    with pytest.raises(InputDataError, match="rank 4"):
        net.forward(x[0])  # pymnn: SIGSEGV
    with pytest.raises(InputDataError, match="float32.*int32"):
        net.forward(x.astype(np.int32))  # pymnn: reads the int bits as floats
    with pytest.raises(InputDataError, match="float64"):
        net.forward(x.astype(np.float64))
    with pytest.raises(InvalidValueError, match="takes 1 input"):
        net.onForward([x, x])  # pymnn: uses the first, ignores the rest
    with pytest.raises(InvalidValueError, match="list of Vars"):
        net.onForward(x)
    with pytest.raises(InvalidValueError, match="placeholder"):
        net.forward(net.get_info()["inputs"][0])
    # after the errors the module still runs
    golden = dict(np.load(DATA / "conv_relu_pool_fc.npz"))
    assert_close(net.forward(golden["input:x"]).read(), golden["output:prob"])


def test_int64_input_converted_when_it_fits() -> None:
    feeds, golden = _flow_feeds("loop_count")
    net = MNN.nn.load_module_from_file(str(FLOW / "loop_count.mnn"), [], [])
    x, p0, m = feeds[0]
    outs = net.onForward([x, p0, m.astype(np.int64)])
    _compare([[o.read() for o in outs]], golden[:1])
    # M = 0: no iteration, an empty scan output (pymnn's Module API crashes: SIGSEGV)
    golden = dict(np.load(FLOW / "loop_count.npz"))
    outs = net.onForward([golden[f"input:{n}@3"] for n in ("x", "p0", "M")])
    assert outs[1].shape == [0]
    assert_close(outs[0].read(), golden["ort:p_final@3"])
    with pytest.raises(InputDataError, match="outside the int32 range"):
        net.onForward([x, p0, np.array(2**40, np.int64)])


def test_user_module_wraps_a_loaded_one() -> None:
    golden = dict(np.load(DATA / "conv_relu_pool_fc.npz"))

    class Top2(MNN.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.net = MNN.nn.load_module_from_file(CONV, ["x"], ["prob"])

        def forward(self, x: Any) -> Any:
            prob = self.net.forward(x).read()
            return Var(np.sort(prob, axis=1)[:, ::-1][:, :2].copy())

    model = Top2()
    assert model.net.name == "net" and model._children == [model.net]
    model.train(False)
    assert not model.net.is_training
    with pytest.raises(AttributeError, match="does not provide nn.conv"):
        MNN.nn.conv  # noqa: B018
    want = np.sort(golden["output:prob"], axis=1)[:, ::-1][:, :2]
    assert_close(model(golden["input:x"]).read(), want)
    assert_close(model.onForward([golden["input:x"]])[0].read(), want)
    assert MNN.nn.EmptyModule().forward() is None
    with pytest.raises(NotSupportError, match="not loaded from a model"):
        model.get_info()


def test_wheel_enums_accepted_by_the_facade() -> None:
    """pymnn's ``expr.Backend`` / ``MemoryMode`` / ``PrecisionMode`` members are read by name."""
    pytest.importorskip("MNN")
    import MNN.expr as F  # noqa: N812 (pymnn's idiom)

    net = MNN.nn.load_module_from_file(
        CONV,
        [],
        [],
        backend=F.Backend.CPU,
        memory_mode=F.MemoryMode.Low,
        power_mode=F.PowerMode.High,
        precision_mode=F.PrecisionMode.Low_BF16,
    )
    config = net.runner.session.config
    assert (config.type, config.num_thread) == (0, 1)
    assert config.backend_config.memory == 2 and config.backend_config.precision == 3
    assert config.backend_config.power == 1


@pytest.mark.parametrize("which", ["mnnpy.compat", "MNN"])
def test_module_with_expr_vars(which: str) -> None:
    """A pymnn inference script: expr Vars in, expr ops on the outputs (needs MNN.expr)."""
    if which == "MNN":
        mnn = pytest.importorskip("MNN")
        import MNN.expr as F  # noqa: N812 (pymnn's idiom)

        nn = mnn.nn
    else:
        F = pytest.importorskip("mnnpy.compat.expr")  # noqa: N806 (pymnn's idiom)
        nn = MNN.nn
    golden = dict(np.load(DATA / "nhwc_dformat.npz"))
    x = golden["input:x"]
    net = nn.load_module_from_file(str(DATA / "nhwc_dformat.mnn"), [], [], thread_num=1)
    nchw = np.ascontiguousarray(x.transpose(0, 3, 1, 2))
    y = net.forward(F.const(nchw.flatten().tolist(), [1, 3, 16, 16], F.NCHW))
    y = F.convert(y, F.NHWC)
    assert_close(np.array(y.read()), golden["output:y"])
    prob = F.softmax(y * 2.0, 1)
    want = np.exp(2 * golden["output:y"] - (2 * golden["output:y"]).max())
    assert_close(np.array(prob.read()), want / want.sum())
    assert int(np.array(F.argmax(prob, 1).read())[0]) == int(golden["output:y"].argmax())


def test_runtime_manager_set_external(tmp_path: Path) -> None:
    """A --saveExternalData model moved away from its weight file, found through set_external."""
    model = tmp_path / "moved.mnn"
    model.write_bytes((FLOW / "if_conv_ext.mnn").read_bytes())
    golden = dict(np.load(FLOW / "if_conv_ext.npz"))
    with pytest.raises(FileNotExistError, match="weight"):
        MNN.nn.load_module_from_file(str(model), [], []).forward(golden["input:x@0"])
    manager = MNN.nn.create_runtime_manager(({"numThread": 1},))
    manager.set_external(str(FLOW / "if_conv_ext.mnn.weight"))
    net = MNN.nn.load_module_from_file(str(model), [], [], runtime_manager=manager)
    for case in (0, 1):
        assert_close(net.forward(golden[f"input:x@{case}"]).read(), golden[f"mnn:y@{case}"])


def _numpy_cv_demo(mnn: Any, model: str, image_path: str, size: int) -> np.ndarray:
    """MNN's pymnn/examples/MNNExpr/mnn_numpy_cv_demo.py, the model and size as arguments."""
    mnp, cv2 = mnn.numpy, mnn.cv
    net = mnn.nn.load_module_from_file(model, [], [])
    image = cv2.imread(image_path)
    image = image[..., ::-1]
    image = cv2.resize(image, (size, size))
    image = image - (103.94, 116.78, 123.68)
    image = image * (0.017, 0.017, 0.017)
    image = image.astype(mnp.float32)
    input_var = mnp.expand_dims(image, [0])
    input_var = mnn.expr.convert(input_var, mnn.expr.NC4HW4)
    output_var = net.forward(input_var)
    output_var = mnn.expr.convert(output_var, mnn.expr.NHWC)
    assert int(np.array(mnp.argmax(output_var))) == int(np.array(output_var.read()).argmax())
    return np.array(output_var.read())


def test_mnn_numpy_cv_demo_matches_wheel(tmp_path: Path) -> None:
    """pymnn's NHWC image -> NC4HW4 Var -> module -> NHWC script (needs MNN.cv / MNN.numpy)."""
    cv = pytest.importorskip("mnnpy.compat.cv")
    pytest.importorskip("mnnpy.compat.numpy")
    pytest.importorskip("mnnpy.compat.expr")
    image = (np.random.default_rng(0).random((40, 48, 3)) * 255).astype(np.uint8)
    path = str(tmp_path / "image.png")
    cv.imwrite(path, image)
    ours = _numpy_cv_demo(MNN, CONV, path, 32)
    assert ours.shape == (1, 10)
    wheel = pytest.importorskip("MNN")
    for sub in ("cv", "numpy", "expr", "nn"):
        pytest.importorskip(f"MNN.{sub}")
    assert_close(ours, _numpy_cv_demo(wheel, CONV, path, 32))
